"""Errors of process groups and collectives; an error that names a rank writes `rank N`.

`DistError` (from the stores' errors, their common base) is also what a group used
in a way its state does not allow raises: uninitialized, destroyed, a rank outside it.
"""
from __future__ import annotations

from typing import Iterable, Optional

from store.errors import DistError, DistNetworkError, DistStoreError  # noqa: F401 - torch's names


class DistBackendError(DistError):
    """A collective could not complete (torch's name)."""


class RankLostError(DistBackendError, ConnectionError):
    """A rank of the group died, hung or left: the group is broken from then on."""

    def __init__(self, ranks: Iterable[int], reason: str, cause: Optional[str] = None):
        """`cause`: the error that stopped the ranks, when they left after one (`reason`
        then names it too); this rank passes it on as its own when it leaves."""
        self.ranks = sorted(ranks)
        self.reason = reason
        self.cause = cause
        names = ", ".join(f"rank {r}" for r in self.ranks)
        super().__init__(f"{names} lost: {reason}")

    def __reduce__(self):
        return type(self), (self.ranks, self.reason, self.cause)


class CollectiveMismatchError(ValueError):
    """Two ranks made different calls at the same step of a group's collective sequence."""


class CollectiveTimeoutError(DistBackendError, TimeoutError):
    """A collective did not complete within the group's timeout."""


class WrongConnectionError(ValueError):
    """A process-group message named a sending rank other than the one whose connection
    it came on (see `senders.py`)."""
