"""Key-value stores for coordinating processes, and init-method rendezvous.

`TCPStore` and `EtcdStore` are imported on first use (module `__getattr__`): they
bring in the actor runtime or the etcd client, and `import store` should stay cheap
for users of the local stores.
"""
from __future__ import annotations

from typing import List

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
    "EtcdStore",
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


_LAZY = {"TCPStore": "store.tcp_store", "EtcdStore": "store.etcd"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups skip this hook
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    """The loaded names and the ones loaded on first use, for help() and completion."""
    return sorted(set(globals()) | set(__all__))
