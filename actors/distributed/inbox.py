"""`Inbox`: the messages of a process's groups that arrived before anyone took them.

The actor's I/O thread `put`s each message under its key (group, collective step,
sender...); the thread running a collective `take`s the one it needs next and sleeps
until it arrives. With `read_with`, the first thread that must sleep reads the
actor's mailbox itself instead, and `put`s what it reads (its own message among
them) without waking anyone: one thread hand-off less per message.

Once a rank is reported lost (it died or hung), every wait of a group it belongs to
fails with RankLostError: such a group cannot finish any collective. A rank that left
(destroyed its group) only fails the waits for a message from it.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import (Any, Callable, Deque, Dict, Hashable, Iterable, List, Optional, Set,
                    Tuple)

from actors.runtime.introspection.status import dump_recorder
from actors.runtime.process.waits import SlowWait

from .errors import CollectiveTimeoutError, DistError, RankLostError

Key = Hashable
# Most waits for a message end within this (seconds); only a longer one makes the
# `SlowWait` that reports it, so the common wait pays nothing for reporting.
QUIET_WAIT = 0.05


class Inbox:
    """Per-key FIFO queues of messages, and the ranks known to be lost."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queues: Dict[Key, Deque[Any]] = {}
        self._lost: Dict[int, str] = {}  # rank -> why
        self._reported: Set[int] = set()  # of those, the ones lost on another rank's word
        self._left: Dict[int, Optional[str]] = {}  # rank -> the error that stopped it, if known
        self._closed: Optional[str] = None
        self._read_here: Optional[Callable[[Optional[float]], bool]] = None
        self._interrupt: Callable[[], None] = _nothing
        self._reader: Optional[int] = None  # the thread that reads the mailbox, if one does
        self._sleepers = 0  # threads in `_cond.wait`, one of which reads next

    def read_with(self, read_here: Callable[[Optional[float]], bool],
                  interrupt: Callable[[], None]) -> None:
        """Wait by reading the mailbox the messages come to: `read_here(timeout)` and
        `interrupt()` are `Actor.read_mailbox_here` and `interrupt_mailbox_reading`."""
        self._read_here, self._interrupt = read_here, interrupt

    def put(self, key: Key, message: Any) -> None:
        with self._cond:
            queue = self._queues.get(key)
            if queue is None:
                queue = self._queues[key] = collections.deque()
            queue.append(message)
            self._wake_all()

    def _wake_all(self) -> None:
        """Wake every waiter; hold `_cond`."""
        self._cond.notify_all()
        reader = self._reader
        if reader is not None and reader != threading.get_ident():
            self._interrupt()

    def lose(self, rank: int, reason: str, reported: bool = False) -> None:
        """Record `rank` as lost, unless it left first, and wake every waiter.

        `reported`: on another rank's word, which its own leave notice overrules.
        """
        with self._cond:
            if rank in self._left:
                return
            if not reported:
                self._reported.discard(rank)
            if rank not in self._lost:
                self._lost[rank] = reason
                if reported:
                    self._reported.add(rank)
                self._wake_all()

    def leave(self, rank: int, failure: Optional[str] = None) -> None:
        """Record that `rank` left: it sends nothing more. `failure`: the error that
        stopped it, which a wait for it then names."""
        with self._cond:
            self._left[rank] = failure
            if rank in self._reported:  # it left in order after all
                self._reported.discard(rank)
                del self._lost[rank]
            self._wake_all()

    def lost(self) -> Dict[int, str]:
        """The ranks reported lost, and why."""
        with self._cond:
            return dict(self._lost)

    def departed(self) -> Set[int]:
        """The ranks that said they left."""
        with self._cond:
            return set(self._left)

    def has_left(self, rank: int) -> bool:
        """Whether `rank` said it left."""
        with self._cond:
            return rank in self._left

    def close(self, reason: str) -> None:
        with self._cond:
            self._closed = reason
            self._wake_all()

    def check(self, ranks: Iterable[int]) -> None:
        """Raise RankLostError if any of `ranks` is lost."""
        with self._cond:
            self._raise_if_broken(ranks)

    def senders_waiting(self, prefix: tuple) -> Set[int]:
        """The senders of messages queued under keys ``prefix + (sender,)``."""
        size = len(prefix) + 1
        with self._cond:
            return {key[-1] for key in self._queues
                    if isinstance(key, tuple) and len(key) == size and key[:-1] == prefix}

    def take_stale(self, group: str, step: int) -> List[Tuple[Key, Any]]:
        """Take every message of `group`'s collectives at steps before `step`, keyed
        ``(group, step, sender)``, oldest step first: messages that the calls of those
        steps did not take and no later call will."""
        with self._cond:
            stale = sorted(key for key in self._queues if isinstance(key, tuple) and len(key) == 3
                           and key[0] == group
                           and isinstance(key[1], int) and key[1] < step)
            return [(key, message) for key in stale for message in self._queues.pop(key)]

    def take(self, key: Key, sender: int, ranks: Iterable[int], deadline: Optional[float],
             what: Callable[[], str], slow: Optional[Callable[[], SlowWait]] = None) -> Any:
        """The oldest message under `key` from global rank `sender`, waiting until
        `deadline` (monotonic).

        RankLostError if one of `ranks` (the group's members) is lost meanwhile, or
        `sender` left; CollectiveTimeoutError, saying `what()` waited, at the deadline.
        `slow()`, if given, is the wait's `SlowWait`, asked for when it must wait.
        """
        return self.take_first((key,), (sender,), ranks, deadline, what, slow)[1]

    def take_first(self, keys: Tuple[Key, ...], senders: Tuple[int, ...], ranks: Iterable[int],
                   deadline: Optional[float], what: Callable[[], str],
                   slow: Optional[Callable[[], SlowWait]] = None) -> Tuple[Key, Any]:
        """`take` from whichever of `keys` (from `senders`, in the same order) has a
        message first; RankLostError once every one of `senders` has left."""
        ranks = tuple(ranks)
        watch: Optional[SlowWait] = None
        waited = False  # the first wait is bounded by QUIET_WAIT instead of a SlowWait
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
                if self._left and all(sender in self._left for sender in senders):
                    raise self._left_before(senders, what())
                timeout = None
                if deadline is not None:
                    timeout = deadline - time.monotonic()
                    if timeout <= 0:
                        dump_recorder("collective_timeout")
                        raise CollectiveTimeoutError(f"{what()} timed out")
                if slow is not None and not waited:
                    timeout = QUIET_WAIT if timeout is None else min(timeout, QUIET_WAIT)
                    waited = True
                elif slow is not None:
                    watch = watch or slow()
                    watch.tick()
                    timeout = watch.next_in() if timeout is None else min(timeout,
                                                                          watch.next_in())
                if self._read_here is not None and self._reader is None:
                    self._reader = threading.get_ident()
                    self._cond.release()
                    try:
                        reading = self._read_here(timeout)
                    finally:
                        self._cond.acquire()
                        self._reader = None
                        if self._sleepers:  # the next turn is theirs
                            self._cond.notify()
                    if reading:
                        continue
                self._sleepers += 1
                try:
                    self._cond.wait(timeout)
                finally:
                    self._sleepers -= 1

    def _left_before(self, senders: Tuple[int, ...], what: str) -> RankLostError:
        causes = sorted({self._left[s] for s in senders} - {None})
        cause = "; ".join(causes) if causes else None
        stopped = f", stopped by {cause}" if cause else ""
        return RankLostError(senders, f"left the group before {what} was served{stopped}", cause)

    def _raise_if_broken(self, ranks: Tuple[int, ...]) -> None:
        if self._closed is not None:
            raise DistError(self._closed)
        if not self._lost:
            return
        lost = {r: why for r, why in self._lost.items() if r in ranks}
        if lost:
            dump_recorder("rank_lost")
            raise RankLostError(lost, "; ".join(sorted(set(lost.values()))))


def _nothing() -> None:
    pass
