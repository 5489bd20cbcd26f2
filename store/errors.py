"""Errors raised by the stores and the init-method rendezvous."""
from __future__ import annotations


class DistError(RuntimeError):
    """Base class of every failure of the distributed packages (torch's `DistError`)."""


class StoreError(DistError):
    """Base class of every store failure."""


class DistStoreError(StoreError):
    """A store operation failed (torch's name: what a timed-out `get` or `wait` raises)."""


class DistNetworkError(StoreError):
    """A store could not be reached (torch's name)."""


class StoreTimeoutError(DistStoreError, TimeoutError):
    """A blocking store operation did not complete within its timeout."""

    def __init__(self, operation: str, keys, timeout: float, detail: str = ""):
        self.operation = operation
        self.keys = list(keys)
        self.timeout = timeout
        self.detail = detail
        message = f"{operation} timed out after {timeout:g}s waiting for keys {self.keys!r}"
        super().__init__(f"{message}: {detail}" if detail else message)

    def __reduce__(self):
        return type(self), (self.operation, self.keys, self.timeout, self.detail)


class StoreConnectionError(DistNetworkError, ConnectionError):
    """The store server could not be reached, or went away."""


class QueueEmptyError(StoreError, LookupError):
    """A non-blocking queue_pop found the queue empty."""


class RendezvousHandlerError(StoreError, ValueError):
    """An init-method URL could not be handled (unknown scheme, bad query, missing variable)."""


def _rebuilt_from_json_replies() -> None:
    """Store errors keep their type across the JSON codec (safe-mode clients speak it)."""
    from actors.runtime.protocol.remote_errors import register_error_type

    for cls in (DistError, StoreError, DistStoreError, DistNetworkError, StoreTimeoutError,
                StoreConnectionError, QueueEmptyError, RendezvousHandlerError):
        register_error_type(cls)


_rebuilt_from_json_replies()
