"""What the `timeout` arguments of RPC calls and of `shutdown` mean, as in torch.

For a call, None or a negative number (torch's `UNSET_RPC_TIMEOUT`, -1) means the
world's default set at `init_rpc`; 0 means no timeout; otherwise seconds, or a
timedelta. For `shutdown`, whose default in torch is 0, None, 0, a negative number
and infinity all mean no limit.
"""
from __future__ import annotations

import math
from typing import Optional

from store.base import Timeout, to_seconds

UNSET_RPC_TIMEOUT = -1.0
"""The `timeout` that means "the world's default, set at `init_rpc`" (torch's, -1)."""


def call_timeout(timeout: Optional[Timeout]) -> Optional[float]:
    """Seconds for one call; None for the world's default."""
    seconds = to_seconds(timeout, "timeout")
    return None if seconds is None or seconds < 0 else seconds


def shutdown_timeout(timeout: Optional[Timeout]) -> Optional[float]:
    """Seconds for each wait of a graceful shutdown; None for no limit."""
    seconds = to_seconds(timeout, "timeout")
    if seconds is None or seconds <= 0 or math.isinf(seconds):
        return None
    return seconds
