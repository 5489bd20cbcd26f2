"""Which local address a process offers its peers: the one that routes to the store."""
from __future__ import annotations

import os
import socket

from store.base import Store


def bind_host(store: Store) -> str:
    """The local IP address on the route to `store`'s host (MASTER_ADDR if it has none),
    so that peers on other hosts reach this process; 127.0.0.1 when nothing routes."""
    host = getattr(getattr(store, "underlying_store", store), "host", None) or \
        os.environ.get("MASTER_ADDR", "127.0.0.1")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((socket.gethostbyname(host), 9))  # no packet is sent
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"
