"""actorgrad's actors: the runtime every worker and store server runs on, and the services on it.

Names are loaded on first use so that importing the runtime never pulls in the
services layer (DESIGN §1).
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Actor": "actors.runtime",
    "Future": "actors.runtime",
    "wait_all": "actors.runtime",
    "Message": "actors.runtime",
    "Kind": "actors.runtime",
    "PeerLostError": "actors.runtime",
    "RemoteError": "actors.runtime",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'actors' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
