"""`LeaderPool`: worker threads that take turns receiving their own requests.

With a plain `WorkerPool`, every request costs a thread wake-up between the I/O
thread that receives it and the worker that runs it; on a machine whose idle CPUs
sleep, that is a large share of a round trip. Here (the leader/followers pattern)
one idle worker, the leader, waits on the mailbox itself. When a request arrives it
hands the role to an idle follower and runs the request on its own thread, so the
next leader wakes up beside the request instead of in front of it.

Handlers that must not wait for a worker (registered inline) run on the leader
before it hands the role on, so they keep mailbox order as on an I/O thread. When
no follower is idle the leader queues the request for the next free worker and
goes on receiving: the mailbox is always read, except by a pool of one thread
while that thread runs a request.
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Optional, Tuple

from .errors import ActorStoppedError
from .log import get_logger
from .scheduler import WorkerPool

log = get_logger(__name__)

Work = Tuple[Callable[..., Any], tuple]
# `receive(timeout)`: the next request to run on a worker, or None (nothing came,
# the request was served inline, or `wake` was called).
Receive = Callable[[float], Optional[Work]]

# A leader re-checks whether the pool is stopping at least this often (seconds).
_RECEIVE_SLICE = 1.0


class LeaderPool(WorkerPool):
    """A `WorkerPool` whose idle threads also receive requests (see the module doc).

    `receive` is called by the leader only; `wake` makes a pending `receive` return.
    """

    def __init__(self, num_threads: int, name: str, receive: Receive, wake: Callable[[], None]):
        self._receive, self._wake = receive, wake
        self._cond = threading.Condition()
        self._tasks: "collections.deque[Work]" = collections.deque()
        self._idle = 0
        self._leading = False
        super().__init__(num_threads, name)

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._cond:
            if self._stopped:
                raise ActorStoppedError("worker pool is stopped")
            self._tasks.append((fn, args))
            if self._idle:
                self._cond.notify()

    def stop(self, timeout: float = 5.0) -> None:
        """Finish queued work, then join every thread (each join bounded by `timeout`)."""
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
            self._cond.notify_all()
        self._wake()
        self._join(timeout)

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._tasks and self._leading and not self._stopped:
                    self._idle += 1
                    self._cond.wait()
                    self._idle -= 1
                if self._tasks:
                    work: Optional[Work] = self._tasks.popleft()
                elif self._stopped:
                    return
                else:
                    self._leading, work = True, None
            if work is None:
                work = self._lead()
            if work is not None:
                self._run(*work)
                del work  # as in WorkerPool._work

    def _lead(self) -> Optional[Work]:
        """Receive until a request needs a worker; returns it once the role is handed on."""
        while not self._stopped:
            try:
                work = self._receive(_RECEIVE_SLICE)
            except Exception:  # noqa: BLE001 - one bad message must not stop the receiving
                log.exception("request_receiving_failed")
                continue
            if work is None:
                continue
            with self._cond:
                if self._idle or len(self._threads) == 1:
                    self._leading = False  # a pool of one reads again once this is done
                    self._cond.notify()
                    return work
                self._tasks.append(work)  # all busy: the next free worker takes it
        with self._cond:
            self._leading = False
            self._cond.notify_all()
        return None
