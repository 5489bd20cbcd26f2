"""Errors of the elastic rendezvous (torch's `RendezvousError` family)."""
from __future__ import annotations

from store.errors import StoreError


class RendezvousError(StoreError):
    """Base class of every rendezvous failure."""


class RendezvousClosedError(RendezvousError):
    """The rendezvous is closed: no node may join it any more."""


class RendezvousTimeoutError(RendezvousError, TimeoutError):
    """A rendezvous operation did not complete before its deadline."""


class RendezvousStateError(RendezvousError):
    """The shared rendezvous state is corrupt or from an unknown format."""


class RendezvousConnectionError(RendezvousError, ConnectionError):
    """The backend holding the shared state could not be reached."""
