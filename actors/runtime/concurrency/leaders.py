"""`LeaderPool`: worker threads that take turns reading their actor's mailbox.

With a plain `WorkerPool`, every request costs a thread wake-up between the I/O
thread that receives it and the worker that runs it; on a machine whose idle CPUs
sleep, that is a large share of a round trip. Here (a leader/followers pattern)
one worker, the leader, reads the mailbox itself and runs the request it read on
its own thread, still as the only reader: waking a follower to read on in
parallel would cost the same wake-up again, on the request's path.

The leader hands the mailbox to an idle follower only when the request could hold
it too long:

- before it blocks in the runtime, on a nested call or a future
  (`blocking.about_to_block`), since the answer it waits for may be a request
  only this actor can read;
- when a watchdog (`watch`, run by the actor's I/O thread every `WATCH_INTERVAL`
  while requests come in) sees it busy for longer than that, since user code may
  block anywhere or compute for long.

Handlers registered inline run on the leader as they are read, in mailbox order.
Work submitted to the pool goes to an idle follower; when none is idle the leader
runs it between two reads, the same way as a request it read. A thread that finds
nobody reading takes the mailbox before any queued work.

The actor sees only a `WorkerPool`: it builds a `LeaderPool` instead of handing
its `Router` to the mailbox loop, and the rest of the runtime knows of this only
through `blocking.about_to_block`, which every blocking wait calls.
"""
from __future__ import annotations

import collections
import select
import threading
import time
from typing import Any, Callable, Optional, Tuple

from .blocking import holding_mailbox
from ..errors import ActorStoppedError
from ..process.log import get_logger
from ..io.router import Router
from .scheduler import WorkerPool
from ..io.wakeup import WakePipe

log = get_logger(__name__)

Work = Tuple[Callable[..., Any], tuple]
# `accept(identity, frames)`: a request as work to run on a worker, or None (it was
# bad input, answered already, or served inline on the calling thread).
Accept = Callable[[bytes, list], Optional[Work]]

# A leader re-checks whether the pool is stopping at least this often (seconds).
_RECEIVE_SLICE = 1.0
# The watchdog's period, and how long a leader may run one request before it hands on.
WATCH_INTERVAL = 0.01
# The watchdog stops once no request has started for this long.
_WATCH_IDLE = 1.0


class LeaderPool(WorkerPool):
    """A `WorkerPool` whose threads also read `router`'s requests (see the module doc).

    Each request read goes through `accept`. `call_soon(fn)` and `call_later(delay,
    fn)` run the watchdog on another thread (the actor's I/O thread). Threads start
    with `start()`.
    """

    def __init__(self, num_threads: int, name: str, router: Router, accept: Accept,
                 call_soon: Callable[..., None], call_later: Callable[..., Any]):
        self._router, self._accept = router, accept
        self._call_soon, self._call_later = call_soon, call_later
        self._wakeup = WakePipe()
        self._waiter: Optional[Any] = None  # a select.poll object, built on first wait
        router.set_reader(lambda: threading.get_ident() == self._reader, self._wakeup.wake)
        self._cond = threading.Condition()
        self._tasks: "collections.deque[Work]" = collections.deque()
        self._idle = 0  # followers waiting and not yet woken
        self._reader: Optional[int] = None  # the leader's thread ident; None: nobody leads
        self._running: Optional[_Turn] = None  # the leader's request, while it runs it
        self._last_start = 0.0
        self._watched = False
        super().__init__(num_threads, name)

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._cond:
            if self._stopped:
                raise ActorStoppedError("worker pool is stopped")
            self._tasks.append((fn, args))
            woken = self._wake_follower()
        if not woken:
            self._wakeup.wake()  # the leader runs it between two reads

    def _hand_off(self, turn: "_Turn") -> None:
        """Let an idle follower (or the next free worker) read the mailbox from now on."""
        with self._cond:
            if turn.handed_off or self._running is not turn:  # over, or handed on already
                return
            turn.handed_off = True
            self._running = None
            self._reader = None
            self._wake_follower()

    def _wake_follower(self) -> bool:
        """Wake one idle follower, if any; hold `_cond`."""
        if not self._idle:
            return False
        self._idle -= 1
        self._cond.notify()
        return True

    def close_soon(self) -> None:
        """Ask every thread to finish queued work and end; returns at once."""
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
            self._idle = 0
            self._cond.notify_all()
        self._wakeup.wake()
        if not self._started:
            self._release()

    def _release(self) -> None:
        self._wakeup.close()

    def _start_watch(self) -> None:
        try:
            self._call_soon(self._watch)
        except ActorStoppedError:
            pass

    def _watch(self) -> None:
        if self.watch():
            self._call_later(WATCH_INTERVAL, self._watch)

    def watch(self) -> bool:
        """The watchdog's round: hand the mailbox on from a leader busy for too long.

        Returns whether to keep watching (requests came in lately).
        """
        now = time.monotonic()
        turn = self._running
        if turn is not None and now - turn.since >= WATCH_INTERVAL:
            turn.hand_off()
        if turn is None and now - self._last_start > _WATCH_IDLE:
            self._watched = False
            # A request that started meanwhile saw the flag still set: look again.
            if self._running is None:
                return False
            self._watched = True
        return True

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._tasks and self._reader is not None and not self._stopped:
                    self._idle += 1
                    self._cond.wait()
                work: Optional[Work] = None
                if self._reader is None and not self._stopped:
                    self._reader = threading.get_ident()  # nobody reads: that comes first
                elif self._tasks:
                    work = self._tasks.popleft()
                else:
                    return  # stopped, and nothing left to run
            if work is None:
                self._lead()
            else:
                self._run(*work)
                del work  # as in WorkerPool._work

    def _next(self) -> Optional[Work]:
        """Queued work first (nobody idle took it), else the next request read."""
        if self._tasks:
            with self._cond:
                if self._tasks:
                    return self._tasks.popleft()
        try:
            request = self._router.take() or self._wait_for_request()
            return None if request is None else self._accept(*request)
        except Exception:  # noqa: BLE001 - the socket failing must not stop the reading
            # `accept` answers bad input itself (`ActorCore._accept`): what lands here
            # is a failure to read or to answer, with nobody left to tell.
            log.exception("request_receiving_failed")
            return None

    def _wait_for_request(self) -> Optional[tuple]:
        """Sleep until a request or a wake-up comes (`_RECEIVE_SLICE` at most); the request."""
        waiter = self._waiter
        if waiter is None:
            waiter = self._waiter = select.poll()
            waiter.register(self._wakeup.fd, select.POLLIN)
            waiter.register(self._router.fd, select.POLLIN)
        router_woke = False
        for fd, _ in waiter.poll(int(_RECEIVE_SLICE * 1000)):
            if fd == self._wakeup.fd:
                self._wakeup.drain()
            else:
                router_woke = True
        if self._stopped:
            return None
        return self._router.take_woken() if router_woke else self._router.take()

    def _lead(self) -> None:
        """Read and run requests until the mailbox is handed on or the pool stops."""
        while not self._stopped:
            work = self._next()
            if work is None:
                continue
            turn = self._running = _Turn(self, time.monotonic())
            self._last_start = turn.since
            if not self._watched:
                self._watched = True
                self._start_watch()
            holding_mailbox(turn.hand_off)
            try:
                self._run(*work)
            finally:
                holding_mailbox(None)
                del work
                with self._cond:
                    if self._running is turn:
                        self._running = None
            if turn.handed_off:
                return
        with self._cond:
            self._reader = None
            self._cond.notify_all()



class _Turn:
    """One request run by the leader that read it, and whether it has handed on the mailbox."""

    __slots__ = ("pool", "since", "handed_off")

    def __init__(self, pool: LeaderPool, since: float):
        self.pool, self.since, self.handed_off = pool, since, False

    def hand_off(self) -> None:
        self.pool._hand_off(self)
