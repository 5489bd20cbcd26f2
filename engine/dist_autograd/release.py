"""Releasing a context on every worker it touched, without a message of its own.

Leaving a context forgets it here and owes a release to each worker its part
touched. An owed release rides along with the next call to that worker (the hook
puts the ids in the request's meta) and stays owed until that call is answered, so a
call that fails to leave or to come back loses nothing; if no call goes there soon, a
flusher sends it within `FLUSH_INTERVAL` as a one-way ``Kind.AUTOGRAD_CONTEXT_RELEASE``
message (a service of the RPC layer). Releasing twice is harmless: a worker
that no longer has the context ignores it. A training loop therefore sends no release messages at
all: each iteration's first call carries the previous one's. A worker that
receives a release forwards it the same way to the workers its part touched,
except the one it heard from; a worker that no longer has the context stops there,
which ends cycles.
"""
from __future__ import annotations

import threading
from typing import Dict, Iterable, List, Optional

import actors
from actors.runtime import Kind
from actors.runtime.log import get_logger

from .context import container

log = get_logger(__name__)

# The longest an owed release waits for a message to ride with.
FLUSH_INTERVAL = 0.05
# The flusher parks after this many empty rounds, and is woken when a release is owed.
_IDLE_ROUNDS = 20


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
    """Context ids to release on other workers, by worker rank, and their flusher."""

    def __init__(self) -> None:
        self._by_rank: Dict[int, List[int]] = {}
        self._wake = threading.Condition()
        self._parked = True
        self._flusher: Optional[threading.Thread] = None

    def add(self, rank: int, context_id: int) -> None:
        with self._wake:
            self._by_rank.setdefault(rank, []).append(context_id)
            if self._parked:
                self._parked = False
                if self._flusher is None:
                    self._flusher = threading.Thread(target=self._flush_loop,
                                                     name="dist-autograd-release", daemon=True)
                    self._flusher.start()
                else:
                    self._wake.notify()

    def any(self) -> bool:
        """Whether a release is owed to any worker."""
        return bool(self._by_rank)

    def peek(self, rank: int) -> Optional[List[int]]:
        """The releases owed to `rank`, for a call going there; still owed until `settle`."""
        if not self._by_rank:  # the common case, without the lock
            return None
        with self._wake:
            owed = self._by_rank.get(rank)
            return list(owed) if owed else None

    def settle(self, rank: int, context_ids: Iterable[int]) -> None:
        """`rank` answered a call that carried these releases: they are no longer owed."""
        with self._wake:
            owed = self._by_rank.get(rank)
            if owed:
                done = set(context_ids)
                owed[:] = [context_id for context_id in owed if context_id not in done]
                if not owed:
                    del self._by_rank[rank]

    def drop(self, rank: int) -> None:
        """Forget what is owed to a worker that is gone."""
        with self._wake:
            self._by_rank.pop(rank, None)

    def _flush_loop(self) -> None:
        idle = 0
        while True:
            with self._wake:
                if idle >= _IDLE_ROUNDS and not self._by_rank:
                    self._parked = True
                    self._wake.wait_for(lambda: not self._parked)
                    idle = 0
                self._wake.wait(FLUSH_INTERVAL)
                due, self._by_rank = self._by_rank, {}
            idle = 0 if due else idle + 1
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
