"""Releasing a context on every worker it touched, without a message of its own.

Leaving a context forgets it here and owes a release to each worker its part
touched. An owed release rides along with the next call to that worker (the hook
puts the ids in the request's meta) and stays owed until that call is answered, so a
call that fails to leave or to come back loses nothing; if no call goes there soon, a
flush, timed by the RPC worker's I/O loop, sends it within `FLUSH_INTERVAL` as a
one-way ``Kind.AUTOGRAD_CONTEXT_RELEASE`` message (a service of the RPC layer).
Releasing twice is harmless: a worker that no longer has the context ignores it. A
training loop therefore sends no release messages at all: each iteration's first
call carries the previous one's. A worker that receives a release forwards it the
same way to the workers its part touched, except the one it heard from; a worker
that no longer has the context stops there, which ends cycles. A worker whose every
such path is lost drops the context itself (`DistAutogradHook.worker_lost`).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Iterable, List, Optional

import actors
from actors.runtime import Kind
from actors.runtime.process.log import get_logger

from .context import container

log = get_logger(__name__)

# The longest an owed release waits for a message to ride with.
FLUSH_INTERVAL = 0.05


def release(context_id: int, came_from: Optional[int] = None) -> None:
    """Forget the context here and owe its release to every worker it touched."""
    ctx = container.release(context_id)
    if ctx is None:
        return
    me = actors.get_worker_info().id
    for rank in ctx.workers - {me, came_from}:
        owed.add(rank, context_id)


def release_all(context_ids: Iterable[int], came_from: int) -> None:
    """Release contexts a peer no longer needs (the flusher's message, or a call's meta)."""
    for context_id in context_ids:
        release(context_id, came_from)


def serve_release(sender: actors.WorkerInfo, context_ids: List[int]) -> None:
    """The ``AUTOGRAD_CONTEXT_RELEASE`` service: `sender` no longer needs these contexts."""
    release_all(context_ids, sender.id)


class OwedReleases:
    """Context ids to release on other workers, by worker rank, and their flush.

    A flush is a timer of the RPC world (`actors.run_on_pool_later`), not a thread:
    one is scheduled when a release becomes owed and none is pending.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._by_rank: Dict[int, List[int]] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._flush_due: Optional[float] = None  # the pending flush's time, if one is

    def add(self, rank: int, context_id: int) -> None:
        with self._lock:
            self._by_rank.setdefault(rank, []).append(context_id)
            now = self._clock()
            # A flush a whole interval late went down with its world (or waits for a busy
            # pool): schedule another; a spare one finds nothing to send.
            if self._flush_due is not None and now < self._flush_due + FLUSH_INTERVAL:
                return
            self._flush_due = now + FLUSH_INTERVAL
        try:
            actors.run_on_pool_later(FLUSH_INTERVAL, self.flush)
        except Exception as exc:  # noqa: BLE001 - RPC stopping: the next add tries again
            with self._lock:
                self._flush_due = None
            log.info("dist_autograd_release_flush_not_scheduled",
                     reason=f"{type(exc).__name__}: {exc}")

    def any(self) -> bool:
        """Whether a release is owed to any worker."""
        return bool(self._by_rank)

    def peek(self, rank: int) -> Optional[List[int]]:
        """The releases owed to `rank`, for a call going there; still owed until `settle`."""
        if not self._by_rank:  # the common case, without the lock
            return None
        with self._lock:
            owed = self._by_rank.get(rank)
            return list(owed) if owed else None

    def settle(self, rank: int, context_ids: Iterable[int]) -> None:
        """`rank` answered a call that carried these releases: they are no longer owed."""
        with self._lock:
            owed = self._by_rank.get(rank)
            if owed:
                done = set(context_ids)
                owed[:] = [context_id for context_id in owed if context_id not in done]
                if not owed:
                    del self._by_rank[rank]

    def clear(self) -> None:
        """Forget every owed release (their world is gone)."""
        with self._lock:
            self._by_rank.clear()
            self._flush_due = None

    def drop(self, rank: int) -> None:
        """Forget what is owed to a worker that is gone."""
        with self._lock:
            self._by_rank.pop(rank, None)

    def flush(self) -> None:
        """Send everything owed, each worker's ids as one one-way message."""
        with self._lock:
            due, self._by_rank, self._flush_due = self._by_rank, {}, None
        for rank, context_ids in due.items():
            self._send(rank, context_ids)

    @staticmethod
    def _send(rank: int, context_ids: List[int]) -> None:
        try:
            actors.notify_service(rank, Kind.AUTOGRAD_CONTEXT_RELEASE, context_ids)
        except Exception as exc:  # noqa: BLE001 - RPC stopped: nobody is left to tell
            log.info("dist_autograd_release_dropped", worker=rank, contexts=len(context_ids),
                     reason=f"{type(exc).__name__}: {exc}")


owed = OwedReleases()
