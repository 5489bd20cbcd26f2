"""`RouterTurns`: the reading of an actor's ROUTER, shared between its I/O thread and the
threads that wait for one of its messages.

When the I/O thread reads a message that another thread of the process waits for (a
collective's data), it must wake that thread: one more thread hand-off on the
message's way (docs/PERFORMANCE.md). Instead, the waiting thread can take a turn: for
the time of its wait it reads the ROUTER itself and dispatches every request it takes,
as the I/O thread would.

- The I/O thread sleeps on an epoll set that holds the ROUTER's descriptor (the set's
  own descriptor is in its poller). The first turn switches that interest off with
  ``epoll.modify``, and wakes the I/O thread once, so that it sleeps a bounded time
  from then on.
- The I/O thread takes the reading back (the interest on, the requests waiting
  dispatched) only once no turn has been on for `GRACE` seconds: collectives called
  back to back keep the reading, and their messages wake nobody but their reader. A
  request that comes between two turns waits for the next turn, or for the I/O
  thread's next look (`recheck_ms`, within about a tenth of a second).
- One turn at a time: another waiting thread waits as before, woken by whoever
  dispatches its message.
- Whoever reads takes and dispatches each request under one lock, so requests are
  dispatched in the order they came (a sender's messages stay in order).
- `interrupt` ends the current turn's sleep (the owner's news: a peer lost, a close);
  `close` ends any turn and refuses new ones.
"""
from __future__ import annotations

import select
import threading
import time
from typing import Any, Callable, List, Optional

from ..process.log import get_logger
from .router import Router
from .sockets import RECV_BATCH
from .wakeup import WakePipe

Dispatch = Callable[[bytes, List[Any]], None]

# No turn for this long (seconds): the I/O thread reads the ROUTER again.
GRACE = 0.005
# While turns hold the reading, the I/O thread looks again after these many ms, doubling.
FIRST_RECHECK_MS, LAST_RECHECK_MS = 5, 80
# How long closing waits for the turn on to end (seconds): it ends within one drain.
CLOSE_WAIT = 5.0

log = get_logger(__name__)


class RouterTurns:
    """`router`'s reading; `dispatch(identity, frames)` handles each request taken (on the
    thread that took it); `wake_io()` wakes the I/O thread."""

    def __init__(self, router: Router, dispatch: Dispatch, wake_io: Callable[[], None]):
        self._router, self._dispatch, self._wake_io = router, dispatch, wake_io
        self._interest = select.epoll()
        self._interest.register(router.fd, select.EPOLLIN)
        self.fd = self._interest.fileno()  # for the I/O thread's poller
        self._io_reads = True  # the I/O thread's interest is on
        # Re-entrant: a request dispatched by the I/O thread may report a lost peer,
        # which hands up what that peer delivered first.
        self._reading = threading.RLock()
        self._turn = threading.Lock()  # held through a turn, and to change hands
        self.lent = False  # a turn is on
        self._ended = 0.0  # monotonic end of the last turn
        self._recheck_ms = FIRST_RECHECK_MS
        self._wake = WakePipe()
        self._sleep: Optional[Any] = None  # the turns' select.poll, built by the first
        self._closed = False

    # ---- whoever reads ---------------------------------------------------------

    def drain(self, woken: bool) -> int:
        """Dispatch the requests waiting, `RECV_BATCH` at most; how many (`RECV_BATCH`:
        more may wait). `woken`: the ROUTER's descriptor just said so
        (`Router.take_woken`). Any thread."""
        router = self._router
        taken = 0
        with self._reading:
            take = router.take_woken if woken else router.take
            while taken < RECV_BATCH:
                request = take()
                if request is None:
                    break
                self._dispatch(*request)
                taken += 1
                take = router.take
        return taken

    def drain_all(self, woken: bool = False) -> int:
        """`drain` until no request waits; how many it dispatched. Any thread."""
        taken = 0
        while True:
            batch = self.drain(woken)
            taken += batch
            if batch < RECV_BATCH:
                return taken
            woken = False

    # ---- a waiting thread -----------------------------------------------------------

    def read_here(self, timeout: Optional[float]) -> bool:
        """A turn of the calling thread, which waits for a message: dispatch what waits,
        else sleep until a request comes (then dispatch it), `interrupt`, or `timeout`
        seconds (None: no limit). False, at once, when another thread has the turn or
        the reading is closed: the caller waits its usual way."""
        if not self._turn.acquire(False):
            return False
        try:
            if self._closed:
                return False
            self.lent = True
            if self._io_reads:
                self._io_reads = False
                self._interest.modify(self._router.fd, 0)
                self._wake_io()  # it may sleep without a bound: from now on it may not
            try:
                if not self.drain_all():
                    self.drain_all(self._sleep_until_ready(timeout))
            finally:
                self.lent = False
                self._ended = time.monotonic()
            return True
        finally:
            self._turn.release()

    def _sleep_until_ready(self, timeout: Optional[float]) -> bool:
        """Sleep until a request, an interrupt or `timeout`; True if a request came."""
        sleep = self._sleep
        if sleep is None:
            sleep = self._sleep = select.poll()
            sleep.register(self._router.fd, select.POLLIN)
            sleep.register(self._wake.fd, select.POLLIN)
        router_fd, woke = self._router.fd, False
        for fd, _ in sleep.poll(None if timeout is None else max(0, int(timeout * 1000) + 1)):
            if fd == router_fd:
                woke = True
            else:
                self._wake.drain()
        return woke

    def reads_here(self, in_io_thread: bool) -> bool:
        """Whether the calling thread reads the ROUTER now: it is taking and dispatching
        (a take follows whatever it sends), or it is the I/O thread and holds the
        reading. `Router.send` from any other thread looks for requests it leaves
        unannounced."""
        return self._reading._is_owned() or (in_io_thread and self._io_reads)

    def interrupt(self) -> None:
        """End the sleep of the current turn, or of the next if none is on (the caller
        knows that a turn began); any thread."""
        self._wake.wake()

    # ---- the I/O thread ------------------------------------------------------------

    def io_reads(self) -> bool:
        """Whether the I/O thread reads the ROUTER now; it takes the reading back here
        once no turn has been on for `GRACE` (I/O thread, before each look at it)."""
        if self._io_reads:
            return True
        if self.lent or time.monotonic() - self._ended < GRACE or not self._turn.acquire(False):
            return False
        try:
            if self._closed:
                return False
            self._interest.modify(self._router.fd, select.EPOLLIN)
            self._io_reads = True
            self._recheck_ms = FIRST_RECHECK_MS
            return True
        finally:
            self._turn.release()

    def recheck_ms(self) -> Optional[int]:
        """How long the I/O thread may sleep before it asks `io_reads` again (None: no
        limit, it reads); doubling up to `LAST_RECHECK_MS` while turns keep the reading."""
        if self._io_reads:
            return None
        ms = self._recheck_ms
        self._recheck_ms = min(LAST_RECHECK_MS, ms * 2)
        return ms

    def close(self) -> None:
        """End the current turn (waiting for it, `CLOSE_WAIT` at most) and refuse new
        ones; then nothing polls the ROUTER's descriptor here any more. Any thread but
        a turn's own."""
        self._closed = True
        self._wake.wake()
        if not self._turn.acquire(True, CLOSE_WAIT):
            # A handler that blocks in a turn: its descriptors stay open, not reused.
            log.warning("router_turn_not_ended", waited_s=CLOSE_WAIT)
            return
        try:
            self._interest.close()
            self._wake.close()
        finally:
            self._turn.release()
