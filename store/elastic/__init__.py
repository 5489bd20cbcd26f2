"""Elastic rendezvous: torch's dynamic rendezvous on our stores (DESIGN §2, docs/ELASTIC.md).

Layers, each in its own module: `state` (plain data), `operators` (pure decisions),
`executor` (sync through a `backend` with compare-and-set, apply actions), the
`handler` that users call, and the `registry` that builds handlers by backend name.
"""
from store.elastic.backend import C10dRendezvousBackend, RendezvousBackend, StoreRendezvousBackend
from store.elastic.etcd_backend import EtcdRendezvousBackend
from store.elastic.errors import (RendezvousClosedError, RendezvousConnectionError,
                                  RendezvousError, RendezvousStateError, RendezvousTimeoutError)
from store.elastic.handler import DynamicRendezvousHandler
from store.elastic.info import RendezvousInfo, RendezvousStoreInfo
from store.elastic.registry import (RendezvousHandlerRegistry, RendezvousParameters,
                                    create_handler, get_rendezvous_handler,
                                    rendezvous_handler_registry)
from store.elastic.settings import NodeDesc, RendezvousSettings, RendezvousTimeout
from store.elastic.state import RendezvousState
from store.elastic.static import StaticRendezvousHandler

__all__ = [
    "DynamicRendezvousHandler", "RendezvousInfo", "RendezvousStoreInfo", "RendezvousTimeout",
    "RendezvousSettings", "RendezvousBackend", "StoreRendezvousBackend", "C10dRendezvousBackend",
    "EtcdRendezvousBackend",
    "RendezvousParameters", "RendezvousHandlerRegistry", "rendezvous_handler_registry",
    "get_rendezvous_handler", "create_handler", "StaticRendezvousHandler", "RendezvousState",
    "NodeDesc",
    "RendezvousError", "RendezvousClosedError", "RendezvousTimeoutError",
    "RendezvousStateError", "RendezvousConnectionError",
]
