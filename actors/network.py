"""Where a process stands on the network: the address it offers its peers, and which
of its peers share its host."""
from __future__ import annotations

import os
import socket
from typing import Sequence

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


def workers_on_host(addresses: Sequence[str], mine: str) -> int:
    """How many of `addresses` (peers' mailbox endpoints) are on the host of `mine`."""
    host = host_of(mine)
    return sum(1 for other in addresses if host_of(other) == host)


def host_of(address: str) -> str:
    """``tcp://10.0.0.5:7000`` → ``10.0.0.5``; every ``ipc://`` path is this host."""
    transport, _, rest = address.partition("://")
    return rest.rsplit(":", 1)[0] if transport == "tcp" else "local"
