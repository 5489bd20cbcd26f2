"""The store servers a process hosts for its `TCPStore` masters, and the addresses they bind."""
from __future__ import annotations

import socket
import threading
from typing import Any, Dict, List, Tuple

from store.server import StoreServer


class Servers:
    """The store servers this process hosts; a multi-tenant master joins one already
    serving its port (as torch's multi-tenant TCPStore does), and the last to close it
    stops it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shared: Dict[Tuple[str, int], List[Any]] = {}  # (host, port) -> [server, users]

    def open(self, host: str, port: int, multi_tenant: bool) -> StoreServer:
        with self._lock:
            entry = self._shared.get((host, port)) if multi_tenant and port else None
            if entry is not None:
                entry[1] += 1
                return entry[0]
            server = StoreServer(host, port).start()
            if multi_tenant:
                self._shared[(host, server.port)] = [server, 1]
            return server

    def release(self, server: StoreServer) -> None:
        with self._lock:
            for key, entry in list(self._shared.items()):
                if entry[0] is server:
                    entry[1] -= 1
                    if entry[1]:
                        return
                    del self._shared[key]
        server.stop()


servers = Servers()


def resolve(host: str) -> str:
    """An IP address for `host` (ZeroMQ binds interfaces and addresses, not names)."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host
