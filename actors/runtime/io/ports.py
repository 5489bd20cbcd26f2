"""A TCP port for a server that binds it later: the job's store port that rank 0
publishes at a rendezvous, a local etcd member's ports.

Binding port 0 gives a port from the range the kernel also takes outgoing
connections' own ports from, so any connection opened before the server binds can
take it, and the bind fails. `free_port` picks below that range, where only a
listener that asks for the very port can take it.
"""
from __future__ import annotations

import os
import random
import socket
import threading
from typing import Set, Tuple

_SPAN = 20000  # how far below the connections' range to pick
_MIN_CHOICE = 1000  # fewer ports than this below the range: take the kernel's choice
_pick = random.Random()  # not the global one, which a program may seed
_given: Set[int] = set()  # never the same port twice to one process
_lock = threading.Lock()
# A forked child would otherwise draw the very ports its parent and siblings draw.
os.register_at_fork(after_in_child=_pick.seed)


def connections_range() -> Tuple[int, int]:
    """The range the kernel takes an outgoing connection's local port from."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            low, high = (int(field) for field in ports.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on now, below the connections' range
    (see the module doc); the kernel's choice where that range leaves too few."""
    low, _ = connections_range()
    first = max(1024, low - _SPAN)
    for _ in range(200 if low - first >= _MIN_CHOICE else 0):
        with _lock:
            port = _pick.randrange(first, low)
            if port in _given or not bindable(host, port):
                continue
            _given.add(port)
        return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def bindable(host: str, port: int, reuse_address: bool = False) -> bool:
    """Whether `port` on `host` can be bound now. With `reuse_address` as ZeroMQ binds
    (SO_REUSEADDR: a port whose last connections linger in TIME_WAIT counts as free);
    without, strictly, as a port handed to another program should be."""
    with socket.socket() as sock:
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True
