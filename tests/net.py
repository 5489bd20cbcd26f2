"""Loopback helpers for tests: free ports, and whether a port can be bound now."""
from __future__ import annotations

import socket

from actors.runtime.io.ports import free_port  # noqa: F401 - the tests' free ports


def bindable(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:`port` now (SO_REUSEADDR, as ZeroMQ binds)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
