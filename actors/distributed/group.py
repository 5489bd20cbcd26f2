"""`ProcessGroup`: a set of global ranks, its collective sequence, and `Work`.

Every member calls the group's collectives in the same order; the n-th call is step
n of the group's sequence, and every message of that call is keyed by the group, the
step and the sender's global rank, so that messages of different calls never mix.
Each message also carries the sender's call (collective, op, dtype, shape) and its
phase: a receiver whose own call differs raises CollectiveMismatchError naming both.

Calls run in the order they were made: an `async_op` call goes to the group's one
background thread and returns a `Work`; a blocking call runs on the caller's thread,
after the group's pending asynchronous calls.

Each group keeps the call it runs (`current`) and the last one it finished, which
STATUS reports (`groups_status`) with whom the call waits for; a call that waits
longer than ``ACTORGRAD_WAIT_WARN_AFTER`` says so in the log (`SlowWait`).
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
import weakref
from typing import Any, Callable, ContextManager, Dict, List, Optional, Sequence, Tuple

import numpy as np

from actors.runtime import Future
from actors.runtime.concurrency.futures import FutureTimeoutError
from actors.runtime.concurrency.threads import start_thread
from actors.runtime.concurrency.weak import members
from actors.runtime.introspection import status
from actors.runtime.introspection.recorder import OP, OP_START, RECORDING, TRAFFIC, record
from actors.runtime.introspection.status import dump_recorder
from actors.runtime.process.log import get_logger
from actors.runtime.process.waits import SlowWait
from actors.runtime.protocol.bounded import shorten
from store.base import Timeout, to_seconds

from .errors import CollectiveMismatchError, DistError, RankLostError
from .transport import Transport

log = get_logger(__name__)

_STOP = object()
# The phase of the message a rank that found a mismatch sends its group instead of its
# part: the data is what it found.
MISMATCH_FOUND = "mismatch found"
_groups: "weakref.WeakSet[ProcessGroup]" = weakref.WeakSet()
# How many of its last calls a group remembers, to judge the messages of their steps
# that arrive after them.
HISTORY = 64


class Work:
    """A collective started with ``async_op=True``.

    As in torch, its result (and its future's value) is the list of the call's outputs,
    the very objects passed in: ``[tensor]`` for `all_reduce`, `broadcast`, `reduce`
    and `scatter`, the output list of `all_gather` and `all_to_all`, the gather list on
    `gather`'s `dst` and ``[]`` elsewhere, ``[]`` for `barrier`; so a torch completion
    callback such as ``fut.then(lambda f: f.value()[0] / world)`` runs unchanged.
    """

    def __init__(self, future: Future):
        self._future = future

    def wait(self, timeout: Timeout = None) -> bool:
        """Block until done (at most `timeout`, seconds or a timedelta, as torch's);
        raise its error. True, as torch's `Work.wait` returns."""
        seconds = to_seconds(timeout)
        try:
            self._future.wait(seconds)
        except FutureTimeoutError:
            raise TimeoutError(f"collective not done within {seconds:g}s") from None
        return True

    def is_completed(self) -> bool:
        """Whether the collective has finished, with or without an error; never blocks."""
        return self._future.done()

    def is_success(self) -> bool:
        """Whether the collective has finished without an error; False while it runs."""
        return self._future.done() and self._future.exception() is None

    def exception(self) -> Optional[BaseException]:
        """The collective's error once it has failed; None while it runs or after it succeeded."""
        return self._future.exception() if self._future.done() else None

    def result(self) -> Any:
        """Wait for the collective and return its outputs (`irecv`: the sender's rank).

        Raises the collective's error.
        """
        self.wait()
        return self._future.value()

    def get_future(self) -> Future:
        """The `Future` that completes with the collective, for `then` and `add_done_callback`."""
        return self._future


class Call:
    """One collective call on one rank: its step, its description and how to message."""

    __slots__ = ("group", "step", "describe", "deadline", "started", "delivered",
                 "waiting_for", "slow")

    def __init__(self, group: "ProcessGroup", step: int, describe: tuple, deadline: float):
        self.group, self.step, self.describe, self.deadline = group, step, describe, deadline
        self.started = time.monotonic()
        self.delivered: set = set()  # global ranks whose messages this call took
        self.waiting_for: Optional[int] = None  # the global rank it waits on now
        self.slow: Optional[SlowWait] = None

    def slow_wait(self) -> SlowWait:
        """This call's report of a long wait, made when it first has to wait."""
        if self.slow is None:
            self.slow = SlowWait(self._waiting, since=self.started)
        return self.slow

    def _waiting(self) -> str:
        return f"{self.describe[0]} #{self.step} waiting for rank {self.waiting_for}"

    def send(self, to: int, phase: Any, data: Any, keep: bool = False) -> None:
        """Send `data` to group rank `to` for `phase` of this call (`keep`: see
        `Transport.send`)."""
        self.send_all((to,), phase, data, keep)

    def send_all(self, to: Sequence[int], phase: Any, data: Any, keep: bool = False) -> None:
        """`send` to each of group ranks `to`, writing a large array once for the
        ranks on this host."""
        group = self.group
        group.transport.send_many([group.ranks[peer] for peer in to], (group.id, self.step),
                                  (self.describe, phase), data, keep)

    def recv(self, frm: int, phase: Any) -> Any:
        """The data group rank `frm` sent for `phase` of this call, as the caller's own."""
        return self.group.transport.open(self._take(frm, phase))

    def lend(self, frm: int, phase: Any) -> ContextManager[Any]:
        """`recv` without a copy: the data is valid only inside the ``with`` block."""
        return self.group.transport.lend(self._take(frm, phase))

    def _take(self, frm: int, phase: Any) -> Any:
        """A sender's messages of one call arrive in the order it sent them, which is
        the order the receiver takes them in; so a message for another phase can only
        come from a different call."""
        group = self.group
        sender = self.waiting_for = group.ranks[frm]
        (call, sent_phase), data = group.transport.inbox.take(
            (group.id, self.step, sender), sender, group.ranks, self.deadline,
            lambda: f"{_render(self.describe)} (step {self.step}) waiting for rank {sender}",
            self.slow_wait)
        self.waiting_for = None
        self.delivered.add(sender)
        if call != self.describe or sent_phase != phase:
            dump_recorder("collective_mismatch")
            found = group.transport.open(data)  # frees a shared array's slots
            if sent_phase == MISMATCH_FOUND:
                raise CollectiveMismatchError(f"{found} (found by rank {sender})")
            ours, theirs = _render(self.describe), _render(call)
            if ours == theirs:  # same call, another algorithm: e.g. shared memory on one only
                ours, theirs = f"{ours} at phase {phase}", f"{theirs} at phase {sent_phase}"
            self.mismatch(_called_apart(group.ranks[group.rank], ours, sender, theirs,
                                        self.step))
        return data

    def mismatch(self, found: str) -> None:
        """Raise CollectiveMismatchError(`found`), after telling the peers, which may wait
        for this rank's part of the call, which will not come."""
        try:
            self.send_all(self.peers(), MISMATCH_FOUND, found)
        except Exception as exc:  # noqa: BLE001 - the mismatch is the error to raise
            log.info("mismatch_notice_not_sent", error=f"{type(exc).__name__}: {exc}")
        raise CollectiveMismatchError(found)

    def peers(self) -> List[int]:
        """The other group ranks."""
        return [peer for peer in range(self.group.size) if peer != self.group.rank]


class ProcessGroup:
    """Global `ranks` (in group-rank order) that exchange through this process's transport.

    `rank` is this process's rank in the group, -1 when it is not a member.
    """

    def __init__(self, transport: Transport, group_id: str, ranks: Sequence[int],
                 timeout: float):
        self.transport = transport
        self.id = group_id
        self.ranks: List[int] = list(ranks)
        self.rank = self.ranks.index(transport.rank) if transport.rank in self.ranks else -1
        self.size = len(self.ranks)
        self.timeout = timeout
        self._steps = itertools.count()
        self._lock = threading.Lock()
        self._queue: "queue.SimpleQueue" = queue.SimpleQueue()
        self._pending = 0
        self._thread: Optional[threading.Thread] = None
        self._destroyed = False
        self.current: Optional[Call] = None  # the call running now
        self._began = 0.0  # when it began (monotonic)
        # (describe, step, monotonic end, error text or None) of the last call
        self.last: Optional[tuple] = None
        # step -> (describe, whether it failed) of the last HISTORY calls, to judge the
        # messages of their steps that they did not take (`_check_stale`)
        self._history: Dict[int, Tuple[tuple, bool]] = {}
        self._on_destroy: List[Callable[[], None]] = []
        _groups.add(self)
        TRAFFIC.watch(self)

    def run(self, describe: tuple, body: Callable[[Call], Any], async_op: bool) -> Any:
        """Run collective `body` as this group's next step; a Work if `async_op`."""
        with self._lock:
            if self._destroyed:
                raise DistError("the process group was destroyed")
            if self.rank < 0:
                raise DistError(f"rank {self.transport.rank} is not a member of this group "
                                f"(ranks {self.ranks})")
            self.transport.inbox.check(self.ranks)
            call = Call(self, next(self._steps), describe, time.monotonic() + self.timeout)
            if not async_op and not self._pending:
                inline = True
            else:
                inline = False
                future = Future()
                self._pending += 1
                self._start_thread()
                self._queue.put((future, body, call))
        if inline:
            return self._execute(body, call)
        if async_op:
            return Work(future)
        return future.wait()

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = start_thread(self._work, name=f"pg-{self.id}-ops",
                                        owner="actors.distributed.group.ProcessGroup",
                                        purpose="runs the group's queued collectives in order")

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            future, body, call = item
            try:
                value = self._execute(body, call)
            except BaseException as exc:  # noqa: BLE001 - the Work raises it
                future.set_exception(exc)
            else:
                future.set_result(value)
            finally:
                with self._lock:
                    self._pending -= 1
            del item, future, body, call

    def _execute(self, body: Callable[[Call], Any], call: Call) -> Any:
        self._began = time.monotonic()
        self.current = call
        error = None
        try:
            self._check_stale(call)
            value = body(call)
            failure = self.transport.failure
            if failure is not None and failure[0] == self.id:
                self.transport.failure = None  # it went on after that error: not stopped
            return value
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}"
            # The root of a chain of ranks that left one after another is passed on.
            cause = exc.cause if isinstance(exc, RankLostError) else None
            self.transport.failure = (self.id, cause or shorten(error))
            raise
        finally:
            self.current = None
            self.last = (call.describe, call.step, time.monotonic(), error)
            self._history[call.step] = (call.describe, error is not None)
            self._history.pop(call.step - HISTORY, None)
            if RECORDING:
                record((time.monotonic_ns(), OP, self.id, call.describe[0], call.step, 0, 0,
                        error, self._began))

    def _check_stale(self, call: Call) -> None:
        """Raise CollectiveMismatchError for a message of an earlier step that the call
        of that step, which succeeded here, did not take: its sender called something
        else there (two ranks each took itself for a broadcast's root, and neither
        received), or found a mismatch with another rank after this one was done.

        Found at this rank's next call of the group, when the earlier one had nothing
        to receive from the sender. Messages of a step that failed here (its error told
        already, or a peer's part came after its timeout) are dropped.
        """
        found = None
        for (_, step, sender), (theirs, data) in self.transport.inbox.take_stale(self.id,
                                                                                 call.step):
            data = self.transport.open(data)  # frees a shared array's slots
            ours, failed = self._history.get(step, (None, True))
            describe, phase = theirs
            if found is not None or failed or (describe == ours and phase != MISMATCH_FOUND):
                continue
            if phase == MISMATCH_FOUND:
                found = f"{data} (found by rank {sender})"
            else:
                found = _called_apart(self.transport.rank, _render(ours), sender,
                                      _render(describe), step)
        if found is not None:
            dump_recorder("collective_mismatch")
            call.mismatch(f"{found}; raised at step {call.step}, this rank's next call")

    def open_entries(self) -> List[tuple]:
        """The collective running now, as a flight-recorder entry of its start."""
        call = self.current
        if call is None:
            return []
        return [(round(self._began * 1e9), OP_START, self.id, call.describe[0], call.step, 0, 0,
                 None, None)]

    def status(self) -> Dict[str, Any]:
        """What this group runs now and ran last, for STATUS."""
        now = time.monotonic()
        call, last = self.current, self.last
        current = None
        if call is not None:
            queued = self.transport.inbox.senders_waiting((self.id, call.step))
            current = {"op": call.describe[0], "call": _render(call.describe),
                       "describe": _plain(call.describe), "step": call.step,
                       "bytes": size_of(call.describe), "age_s": round(now - call.started, 3),
                       "waiting_for": call.waiting_for,
                       "delivered": sorted(call.delivered | queued)}
        return {"group": self.id, "ranks": list(self.ranks), "rank": self.transport.rank,
                "size": self.size, "current": current,
                "last": None if last is None else {
                    "op": last[0][0], "call": _render(last[0]), "step": last[1],
                    "ago_s": round(now - last[2], 3), "error": last[3]}}

    def on_destroy(self, action: Callable[[], None]) -> None:
        """Run `action` once when the group is destroyed."""
        self._on_destroy.append(action)

    def destroy(self) -> None:
        """Refuse new calls and end the background thread once its work is done."""
        with self._lock:
            self._destroyed = True
            thread = self._thread
            actions, self._on_destroy = self._on_destroy, []
        for action in actions:
            action()
        if thread is not None:
            self._queue.put(_STOP)
            if thread is not threading.current_thread():
                thread.join(5.0)


def groups_status() -> List[Dict[str, Any]]:
    """Every live group of this process, for STATUS."""
    return [group.status() for group in members(_groups) if not group._destroyed]


def size_of(describe: tuple) -> Optional[int]:
    """Bytes of one rank's array in a call described as ``(name, ..., dtype, shape)``."""
    if len(describe) >= 3 and isinstance(describe[-1], tuple) and isinstance(describe[-2], str):
        count = 1
        for extent in describe[-1]:
            count *= int(extent)
        try:
            return count * np.dtype(describe[-2]).itemsize
        except TypeError:
            return None
    return None


def _plain(describe: tuple) -> list:
    return [list(d) if isinstance(d, tuple) else d for d in describe]


status.add_section("collectives", groups_status)


def _called_apart(rank: int, ours: str, sender: int, theirs: str, step: int) -> str:
    """The text of a mismatch: what this rank and the sender each called at `step`."""
    return (f"rank {rank} called {ours} but rank {sender} called {theirs} at step {step} "
            f"of the group")


def _render(describe: tuple) -> str:
    name, *details = describe
    return f"{name}({', '.join(str(d) for d in details)})"
