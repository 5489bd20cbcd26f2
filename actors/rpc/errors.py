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


class RemoteTraceback(Exception):
    """The traceback text of an exception that worker `worker` raised in a call: the
    `__cause__` of the exception raised at the caller in its place, so that one left
    uncaught prints the callee's frames, named after the worker, above the caller's
    own (torch puts them in the message, after "On WorkerInfo(...)")."""

    def __init__(self, worker: str, text: str):
        super().__init__(worker, text)
        self.worker, self.text = worker, text

    def __str__(self) -> str:
        return f'raised on worker {self.worker!r}:\n"""\n{self.text.rstrip()}\n"""'
