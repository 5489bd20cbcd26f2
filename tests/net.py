"""Loopback helpers for tests: free ports and bounded waits on a subprocess's output."""
from __future__ import annotations

import random
import socket
from typing import Tuple

# Ports below the kernel's range for connections' own ports, this many of them.
_SPAN = 20000
_pick = random.Random()  # not the global one, which a test may seed
_given: set = set()  # never the same port twice to one process


def _connections_range() -> Tuple[int, int]:
    """The range the kernel takes an outgoing connection's local port from."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            low, high = (int(field) for field in ports.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def bindable(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:`port` now (SO_REUSEADDR, as ZeroMQ binds)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    Taken below the range of connections' local ports: a port from that range (what
    binding port 0 gives) can become some process's outgoing connection before the
    test binds it, and then binding it fails.
    """
    low, _ = _connections_range()
    first = max(1024, low - _SPAN)
    for _ in range(200):
        port = _pick.randrange(first, low)
        if port in _given:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    with socket.socket() as sock:  # every try taken: the kernel's choice
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
