"""`Deadlines`: when each pending request times out, as a heap (no I/O, no clock of its own).

The actor's I/O thread pushes a request's deadline when it sends the request and
asks for the ones `due` when its one timer fires. A request answered in time stays
in the heap until its deadline comes, and is then skipped (the caller says which
ids are still pending); the heap is rebuilt from the pending ids once stale entries
outnumber them, so answered requests cost memory only for a while.
"""
from __future__ import annotations

import heapq
from typing import Callable, Collection, List, Optional, Tuple

def check_timeout(timeout: Optional[float]) -> None:
    """ValueError for a NaN timeout, before a request is made: no deadline compares to
    NaN, so it would never be due, and in the heap it would hide every later one."""
    if timeout is not None and timeout != timeout:
        raise ValueError("timeout must be a number of seconds or None, got nan")


# Rebuild once the heap holds this many entries more than twice the pending ones.
_SLACK = 64


class Deadlines:
    """A min-heap of ``(deadline, request id)``."""

    def __init__(self) -> None:
        self._heap: List[Tuple[float, int]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, deadline: float, req_id: int, pending: Collection[int]) -> bool:
        """Add a deadline; True if it is now the earliest (the timer must move up).

        `pending` holds the ids still waiting, for rebuilding the heap when it is
        mostly stale.
        """
        heap = self._heap
        if len(heap) > 2 * len(pending) + _SLACK:
            heap[:] = [entry for entry in heap if entry[1] in pending]
            heapq.heapify(heap)
        heapq.heappush(heap, (deadline, req_id))
        return heap[0][1] == req_id

    def due(self, now: float, is_pending: Callable[[int], bool]) -> List[int]:
        """Remove and return the pending ids whose deadline is at or before `now`."""
        heap, expired = self._heap, []
        while heap and heap[0][0] <= now:
            req_id = heapq.heappop(heap)[1]
            if is_pending(req_id):
                expired.append(req_id)
        return expired

    def earliest(self) -> Optional[float]:
        return self._heap[0][0] if self._heap else None
