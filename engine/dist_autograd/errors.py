"""Errors of distributed autograd."""
from __future__ import annotations

from typing import Optional


class UnknownContextError(KeyError):
    """No distributed autograd context with this id lives on this worker."""

    def __init__(self, context_id: int, worker: str = ""):
        self.context_id = context_id
        self.worker = worker
        where = f" on worker {worker!r}" if worker else ""
        super().__init__(f"no distributed autograd context {context_id} (0x{context_id:x})"
                         f"{where}: it was never created here or has been released")

    def __str__(self) -> str:
        return self.args[0]

    def __reduce__(self):
        return type(self), (self.context_id, self.worker)


class ContextActiveError(RuntimeError):
    """A context was entered while another one is active in the same thread."""


class DistBackwardError(RuntimeError):
    """A part of a distributed backward pass failed on `worker`.

    `remote_traceback` holds the traceback text formatted on that worker.
    """

    def __init__(self, worker: str, message: str, remote_traceback: Optional[str] = None):
        self.worker = worker
        self.remote_traceback = remote_traceback
        super().__init__(f"backward failed on worker {worker!r}: {message}")

    def __reduce__(self):
        message = str(self.args[0]).split(": ", 1)[-1]
        return type(self), (self.worker, message, self.remote_traceback)
