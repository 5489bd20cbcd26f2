"""Loopback helpers for tests: free ports, and whether a port can be bound now."""
from __future__ import annotations

from actors.runtime.io import ports
from actors.runtime.io.ports import free_port  # noqa: F401 - the tests' free ports


def bindable(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:`port` now, as ZeroMQ binds."""
    return ports.bindable("127.0.0.1", port, reuse_address=True)
