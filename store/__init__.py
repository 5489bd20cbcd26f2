"""Key-value stores for coordinating processes, and init-method rendezvous.

`TCPStore` is imported on first use (module `__getattr__`): it brings in the actor
runtime, and `import store` should stay cheap for users of the local stores.
"""
from __future__ import annotations

from store.base import Store
from store.errors import (
    DistError,
    DistNetworkError,
    DistStoreError,
    QueueEmptyError,
    RendezvousHandlerError,
    StoreConnectionError,
    StoreError,
    StoreTimeoutError,
)
from store.file_store import FileStore
from store.hash_store import HashStore
from store.prefix_store import PrefixStore
from store.rendezvous import register_rendezvous_handler, rendezvous

__all__ = [
    "Store",
    "HashStore",
    "PrefixStore",
    "FileStore",
    "TCPStore",
    "rendezvous",
    "register_rendezvous_handler",
    "StoreError",
    "StoreTimeoutError",
    "DistError",
    "DistStoreError",
    "DistNetworkError",
    "StoreConnectionError",
    "QueueEmptyError",
    "RendezvousHandlerError",
]


def __getattr__(name: str):
    if name == "TCPStore":
        from store.tcp_store import TCPStore

        globals()["TCPStore"] = TCPStore  # later lookups skip this hook
        return TCPStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
