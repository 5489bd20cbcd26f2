"""Errors of the RPC services."""
from __future__ import annotations

from actors.runtime.errors import PeerLostError


class RpcError(RuntimeError):
    """Base class of RPC failures that are not one of the builtin categories below."""


class RpcNotInitializedError(RpcError):
    """An RPC call was made before `init_rpc` or after `shutdown`."""


class RpcInitError(RpcError):
    """The RPC world could not assemble (a duplicate name or rank, or missing workers)."""


class WorkerLostError(PeerLostError):
    """The worker a call was addressed to died or became unreachable."""

    def __init__(self, worker: str, reason: str = "connection lost"):
        self.worker = worker
        super().__init__(worker, reason)
        self.args = (f"worker {worker!r}: {reason}",)

    def __str__(self) -> str:
        return self.args[0]

    def __reduce__(self):
        return type(self), (self.worker, self.reason)


class RRefError(RpcError):
    """An RRef was used in a way its owner or state does not allow."""
