"""Processes for the TCPStore tests: a server to kill, clients that join or hang."""
import os
import time

from store.server import StoreServer
from store.tcp_store import TCPStore


def serve(ready) -> None:
    server = StoreServer("127.0.0.1", 0).start()
    ready.put(server.port)
    while True:
        time.sleep(3600)


def join_world(port: int, world_size: int, done) -> None:
    store = TCPStore("127.0.0.1", port, world_size=world_size, timeout=30)
    done.put(os.getpid())
    store.close()


def block_on_missing_key(port: int, ready) -> None:
    """Park a get and a watch on the server, then hang until killed."""
    store = TCPStore("127.0.0.1", port, timeout=60)
    store.watch_key("watched", lambda old, new: None)
    store.set("client-was-here", b"1")
    ready.put("parked")
    store.get("never-set")
