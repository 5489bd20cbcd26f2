"""The process's transport security: one setting that every socket of the process follows.

`secure(sock, server=...)` is called on each socket before it binds or connects.
"""
from __future__ import annotations

import zmq


def secure(sock: zmq.Socket, *, server: bool) -> None:
    """Apply the process's security setting to `sock`, before it binds (`server`) or connects."""
    return None
