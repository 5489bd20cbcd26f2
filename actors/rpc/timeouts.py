"""What an RPC call's `timeout` argument means, as in torch.

None or a negative number (torch's `UNSET_RPC_TIMEOUT`, -1) means the world's
default set at `init_rpc`; 0 means no timeout; otherwise seconds, or a timedelta.
"""
from __future__ import annotations

from typing import Optional

from store.base import Timeout, to_seconds

UNSET_RPC_TIMEOUT = -1.0
"""The `timeout` that means "the world's default, set at `init_rpc`" (torch's, -1)."""


def call_timeout(timeout: Optional[Timeout]) -> Optional[float]:
    """Seconds for one call; None for the world's default."""
    seconds = to_seconds(timeout, "timeout")
    return None if seconds is None or seconds < 0 else seconds
