"""The owner's side of RRefs: values by RRef id, and who still holds a reference.

Every holder of an RRef has its own fork id. The owner counts, per fork, the
registrations (the creating `remote()` call, or a FORK message from whoever passed
the RRef on) minus the deletions. Messages about one RRef arrive over different
connections, so a fork's deletion may overtake its registration: its balance then
goes negative for a while, which keeps the value alive. The value is freed when
every fork's balance is back to zero. A forker registers a new fork before it sends
its own deletion, over the same ordered connection, so the count never reaches zero
while a reference is in flight.
"""
from __future__ import annotations

import threading
from typing import Dict

from actors.runtime import Future, ProtocolError
from actors.runtime.concurrency.futures import InvalidStateError


class OwnerTable:
    """Values owned by this worker, with per-fork reference balances. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: Dict[int, Future] = {}
        self._balances: Dict[int, Dict[int, int]] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def value(self, rref_id: int) -> Future:
        """The future value of `rref_id`, created pending if its creation has not arrived."""
        with self._lock:
            future = self._values.get(rref_id)
            if future is None:
                future = self._values[rref_id] = Future()
                self._balances[rref_id] = {}
            return future

    def add(self, rref_id: int, fork_id: int) -> Future:
        """Register a holder; returns the value's future."""
        return self._adjust(rref_id, fork_id, +1)

    def remove(self, rref_id: int, fork_id: int) -> None:
        """A holder dropped its reference."""
        self._adjust(rref_id, fork_id, -1)

    def reject(self, rref_id: int, fork_id: int, reason: str) -> None:
        """The creator's `remote()` of `rref_id` was refused unrun: its fork counts as the
        creation's would, and a wait for the value here fails at once with `reason`."""
        value = self.add(rref_id, fork_id)
        try:
            value.set_exception(ProtocolError(
                f"the creation of RRef 0x{rref_id:x} by remote() was rejected unrun, so its "
                f"owner never holds the value: {reason}"))
        except InvalidStateError:
            pass  # already failed, by an earlier report of the same refusal

    def _adjust(self, rref_id: int, fork_id: int, delta: int) -> Future:
        with self._lock:
            future = self._values.get(rref_id)
            if future is None:
                future = self._values[rref_id] = Future()
                self._balances[rref_id] = {}
            balances = self._balances[rref_id]
            balance = balances.get(fork_id, 0) + delta
            if balance:
                balances[fork_id] = balance
            else:
                balances.pop(fork_id, None)
            if not balances:
                del self._values[rref_id]
                del self._balances[rref_id]
            return future
