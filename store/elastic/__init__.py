"""Elastic rendezvous: torch's dynamic rendezvous on our stores (DESIGN §2, docs/ELASTIC.md).

Layers, each in its own module: `state` (plain data), `operators` (pure decisions),
`executor` (sync through a `backend` with compare-and-set, apply actions), and the
`handler` that users call.
"""
from store.elastic.backend import RendezvousBackend, StoreRendezvousBackend
from store.elastic.errors import (RendezvousClosedError, RendezvousConnectionError,
                                  RendezvousError, RendezvousStateError, RendezvousTimeoutError)
from store.elastic.handler import DynamicRendezvousHandler, RendezvousInfo
from store.elastic.settings import NodeDesc, RendezvousSettings, RendezvousTimeout
from store.elastic.state import RendezvousState

__all__ = [
    "DynamicRendezvousHandler", "RendezvousInfo", "RendezvousTimeout", "RendezvousSettings",
    "RendezvousBackend", "StoreRendezvousBackend", "RendezvousState", "NodeDesc",
    "RendezvousError", "RendezvousClosedError", "RendezvousTimeoutError",
    "RendezvousStateError", "RendezvousConnectionError",
]
