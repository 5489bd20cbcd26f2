"""`Inbox`: the messages of a process's groups that arrived before anyone took them.

The actor's I/O thread `put`s each message under its key (group, collective step,
sender...); the thread running a collective `take`s the one it needs next and sleeps
until it arrives. Once a rank is reported lost (it died or hung), every wait of a
group it belongs to fails with RankLostError: such a group cannot finish any
collective. A rank that left (destroyed its group) only fails the waits for a
message from it.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Deque, Dict, Hashable, Iterable, Optional, Set, Tuple

from .errors import CollectiveTimeoutError, DistError, RankLostError

Key = Hashable


class Inbox:
    """Per-key FIFO queues of messages, and the ranks known to be lost."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queues: Dict[Key, Deque[Any]] = {}
        self._lost: Dict[int, str] = {}  # rank -> why
        self._left: Set[int] = set()
        self._closed: Optional[str] = None

    def put(self, key: Key, message: Any) -> None:
        with self._cond:
            queue = self._queues.get(key)
            if queue is None:
                queue = self._queues[key] = collections.deque()
            queue.append(message)
            self._cond.notify_all()

    def lose(self, rank: int, reason: str) -> None:
        """Record `rank` as lost, unless it left first, and wake every waiter."""
        with self._cond:
            if rank not in self._left:
                self._lost.setdefault(rank, reason)
                self._cond.notify_all()

    def leave(self, rank: int) -> None:
        """Record that `rank` left: it sends nothing more."""
        with self._cond:
            self._left.add(rank)
            self._cond.notify_all()

    def lost(self) -> Dict[int, str]:
        """The ranks reported lost, and why."""
        with self._cond:
            return dict(self._lost)

    def has_left(self, rank: int) -> bool:
        """Whether `rank` said it left."""
        with self._cond:
            return rank in self._left

    def close(self, reason: str) -> None:
        with self._cond:
            self._closed = reason
            self._cond.notify_all()

    def check(self, ranks: Iterable[int]) -> None:
        """Raise RankLostError if any of `ranks` is lost."""
        with self._cond:
            self._raise_if_broken(ranks)

    def take(self, key: Key, sender: int, ranks: Iterable[int], deadline: Optional[float],
             what: Callable[[], str]) -> Any:
        """The oldest message under `key` from global rank `sender`, waiting until
        `deadline` (monotonic).

        RankLostError if one of `ranks` (the group's members) is lost meanwhile, or
        `sender` left; CollectiveTimeoutError, saying `what()` waited, at the deadline.
        """
        return self.take_first((key,), (sender,), ranks, deadline, what)[1]

    def take_first(self, keys: Tuple[Key, ...], senders: Tuple[int, ...], ranks: Iterable[int],
                   deadline: Optional[float], what: Callable[[], str]) -> Tuple[Key, Any]:
        """`take` from whichever of `keys` (from `senders`, in the same order) has a
        message first; RankLostError once every one of `senders` has left."""
        ranks = tuple(ranks)
        with self._cond:
            while True:
                for key in keys:
                    queue = self._queues.get(key)
                    if queue:
                        message = queue.popleft()
                        if not queue:
                            del self._queues[key]
                        return key, message
                self._raise_if_broken(ranks)
                if self._left.issuperset(senders):
                    raise RankLostError(senders, f"left the group before {what()} was served")
                if deadline is None:
                    self._cond.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CollectiveTimeoutError(f"{what()} timed out")
                self._cond.wait(remaining)

    def _raise_if_broken(self, ranks: Tuple[int, ...]) -> None:
        if self._closed is not None:
            raise DistError(self._closed)
        lost = {r: why for r, why in self._lost.items() if r in ranks}
        if lost:
            raise RankLostError(lost, "; ".join(sorted(set(lost.values()))))
