"""A replica's arrivals at the quorum rounds in the job's store.

A member arrives in slices of SLICE and, between them, expects no longer the members
its group reported lost; a newcomer arrives in slices of JOIN_SLICE and, between them,
learns whether anyone who holds the state is left to join. Only the last slice of a
member's wait lets the deadline release the round with fewer members.
"""
from __future__ import annotations

import time
from typing import Callable, Dict, Optional, Tuple

from actors.runtime.process.waits import SlowWait
from store import Store
from store.errors import StoreTimeoutError
from store.quorum import quorum_wait_text

from .holders import Holders
from .quorum import Plan, expected

# A member's arrivals last this long each (the last one may release the round with
# min_replica_size members); within one, it arrives again when it learns of a loss.
SLICE = 0.25
# A newcomer asks this often (seconds) whether anyone is left to join.
JOIN_SLICE = 1.0


class Rounds:
    """Arrivals of replica `replica_id` at rounds under `keys`; `known_lost()` gives the
    group ranks a round need not wait for."""

    def __init__(self, keys: Store, replica_id: str, holders: Holders,
                 known_lost: Callable[[], set]):
        self._keys, self._me, self._holders = keys, replica_id, holders
        self._known_lost = known_lost

    def latest(self) -> int:
        """The latest round rank 0 wrote down, -1 before any."""
        return int(self._keys.get("latest")) if self._keys.check(["latest"]) else -1

    def no_round(self, name: str, limit: float) -> StoreTimeoutError:
        return StoreTimeoutError("quorum", [name], limit,
                                 detail=f"replica {self._me!r} found no round to join")

    def first(self, name: str, data: bytes, expect: Tuple[str, ...], min_size: int,
              deadline: float) -> Dict[str, bytes]:
        """Arrive at the job's first round, expecting every replica of `expect`."""
        return self._keys.quorum(name, self._me, data, expect=expect, min_size=min_size,
                                 timeout=max(0.01, deadline - time.monotonic()))

    def join(self, name: str, data: bytes, deadline: float) -> Dict[str, bytes]:
        """Arrive at round `name` as a newcomer until `deadline`, in slices of JOIN_SLICE:
        between them, ReplicasLeftError once every member that held the state left."""
        with SlowWait(lambda: quorum_wait_text(name, self._me, None, None, None)) as report:
            while True:
                remaining = deadline - time.monotonic()
                try:
                    return self._keys.quorum(name, self._me, data,
                                             timeout=max(0.01, min(JOIN_SLICE, remaining)))
                except StoreTimeoutError as exc:
                    if remaining <= JOIN_SLICE:
                        raise
                    self._holders.check_joinable(exc, False, self.latest)
                report.tick()

    def arrive(self, name: str, data: str, basis: Optional[Plan], timeout: float,
               final_min: int) -> Dict[str, bytes]:
        """Arrive at round `name` expecting `basis`'s members but those the group has
        reported lost, again as soon as it reports another; in slices of SLICE, and in
        the last one let the deadline release the round with `final_min` members."""
        deadline = time.monotonic() + timeout

        def expect_now() -> Tuple[str, ...]:
            return expected(basis, self._known_lost(), self._me)

        def text() -> str:
            return quorum_wait_text(name, self._me, None, expect_now(), final_min)

        # One report for the whole wait: each slice's own wait is too short to report.
        with SlowWait(text) as report:
            while True:
                remaining = deadline - time.monotonic()
                final = remaining <= SLICE
                try:
                    return self._keys.quorum(name, self._me, data, expect=expect_now(),
                                             min_size=final_min if final else None,
                                             timeout=max(0.01, min(SLICE, remaining)),
                                             expect_now=expect_now)
                except StoreTimeoutError:
                    if final:
                        raise
                report.tick()
