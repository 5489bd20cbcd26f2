"""`Timers`: the I/O thread's timer heap. It says which timers are due and how long the
loop may sleep; the loop runs them."""
from __future__ import annotations

import heapq
import itertools
import time
from typing import Any, Callable, List, Optional

# ZeroMQ's poll takes a C int: a far timer (a wait "forever") is re-checked now and then.
_LONGEST_SLEEP_MS = 60_000


class TimerHandle:
    __slots__ = ("deadline", "fn", "args", "cancelled")

    def __init__(self, deadline: float, fn: Callable[..., Any], args: tuple):
        self.deadline, self.fn, self.args, self.cancelled = deadline, fn, args, False

    def cancel(self) -> None:
        self.cancelled = True


class Timers:
    """Timers by deadline (`time.monotonic` seconds); one thread uses them."""

    def __init__(self) -> None:
        self._heap: List[tuple] = []
        self._order = itertools.count()  # equal deadlines run in the order they were set

    def add(self, delay: float, fn: Callable[..., Any], args: tuple) -> TimerHandle:
        """A timer that runs `fn(*args)` `delay` seconds from now; ValueError for a NaN
        delay, which no time compares to: it would never be due, and the loop could not
        tell how long to sleep."""
        if delay != delay:
            raise ValueError("a timer's delay must be a number of seconds, got nan")
        handle = TimerHandle(time.monotonic() + delay, fn, args)
        heapq.heappush(self._heap, (handle.deadline, next(self._order), handle))
        return handle

    def sleep_ms(self) -> Optional[int]:
        """How long the loop may sleep before the next timer is due (None: no timer)."""
        if not self._heap:
            return None
        due_ms = int((self._heap[0][0] - time.monotonic()) * 1000) + 1
        return min(max(0, due_ms), _LONGEST_SLEEP_MS)

    def due(self) -> List[TimerHandle]:
        """The timers due now, earliest first, taken off the heap; cancelled ones left out."""
        now, heap, handles = time.monotonic(), self._heap, []
        while heap and heap[0][0] <= now:
            handle = heapq.heappop(heap)[2]
            if not handle.cancelled:
                handles.append(handle)
        return handles

    def clear(self) -> None:
        self._heap.clear()
