"""The backward messages of a pass: gradients travelling to send functions.

A recv function that runs produces gradients for the send function of the same
message id, on the worker that sent the tensors. Those gradients travel as a
*backward step* to that worker: ``(context_id, pass_id, retain_graph, items, live)``
with items ``[(message_id, grads), ...]`` grouped per worker, and `live` None in
FAST mode or, in SMART mode, the message ids of the pass's live send functions on
every worker (see `lineage`). The receiving worker, on first sight of the pass,
counts its dependencies (`BackwardPass`: from every send, or from its live ones),
injects each item into its send function and runs what became ready. The reply holds the items
for the requester's send functions and the reports of what still waits (`outcome`).

Gradients a step produces for the worker that sent it ride back in the step's reply;
those for any other worker go out as nested steps, and the reply waits for them. So
a step is answered only when everything it set off has finished, the initiator's
`backward` returns when every worker's part is done, failures travel back to it,
and the common case, one worker calling another, costs a single round trip.
"""
from __future__ import annotations

import threading
import traceback
from collections import deque
from typing import Dict, List, Optional, Tuple

import numpy as np

import actors
from actors.runtime import Future, Kind
from actors.runtime.concurrency.contained import escapes
from actors.runtime.concurrency.futures import completed
from actors.runtime.process.log import get_logger

from .context import AutogradContext, BackwardPass, container
from .errors import DistBackwardError
from .lineage import held_by
from .outcome import Report, Reports, merge

log = get_logger(__name__)

Item = Tuple[int, List[Optional[np.ndarray]]]
Outgoing = Dict[int, List[Item]]
Reply = Tuple[List[Item], Tuple[Report, ...]]

_running = threading.local()


def send_gradients(recv, grads: List[Optional[np.ndarray]]) -> None:
    """The RecvFunction's backward: note the gradients for the sender's send function.

    `Exchange.advance` routes what was noted once the graph has run. RuntimeError when
    no distributed pass runs here: a local ``backward()`` reached a tensor received
    over RPC, whose gradient only a distributed pass can send back.
    """
    produced = getattr(_running, "produced", None)
    if produced is None:
        raise RuntimeError(
            f"backward() reached a tensor received over RPC from worker "
            f"{recv.peer.name!r} in distributed autograd context {recv.context_id}: its "
            f"gradient can only go back to the sender in a distributed pass; use "
            f"dist_autograd.backward(context_id, [loss]) and "
            f"dist_autograd.get_gradients(context_id)")
    produced.append((recv.peer.id, (recv.message_id, list(grads))))


class Exchange:
    """One worker's share of a pass: runs the gradients that arrive, routes those produced.

    `requester` is the worker whose step set this share off (None for the worker that
    called `backward`); gradients for it are kept in `for_requester`, for the reply.
    """

    def __init__(self, ctx: AutogradContext, part: BackwardPass, me: int,
                 requester: Optional[int], live: Optional[Tuple[int, ...]]):
        self.ctx, self.part, self.me, self.requester = ctx, part, me, requester
        self.live = live
        self.for_requester: List[Item] = []
        self.reports: Reports = {}

    def advance(self, items: List[Item]) -> Outgoing:
        """Inject `items`, run what became ready; returns the steps to send, per worker.

        Gradients for this worker itself (an RPC to self) are injected at once.
        """
        ctx = self.ctx
        outgoing: Outgoing = {}
        with ctx.lock:
            self.part.version += 1
            while True:
                for message_id, grads in items:
                    self.part.task.inject(ctx.send(message_id), grads)
                _running.produced = produced = []
                try:
                    self.part.task.run()
                finally:
                    _running.produced = None
                items = []
                for rank, item in produced:
                    if rank == self.me:
                        items.append(item)
                    elif rank == self.requester:
                        self.for_requester.append(item)
                    else:
                        outgoing.setdefault(rank, []).append(item)
                if not items:
                    return outgoing

    def step(self, items: List[Item]) -> tuple:
        """The payload of a backward step carrying `items`."""
        return (self.ctx.id, self.part.pass_id, self.part.retain_graph, items, self.live)

    def fold(self, reply: Reply) -> Outgoing:
        """Take a step's reply in: note its reports, advance with its items."""
        items, reports = reply
        merge(self.reports, reports)
        return self.advance(items)

    def reply(self) -> Reply:
        """This share's reply: the requester's items, with this worker's report added."""
        with self.ctx.lock:
            merge(self.reports, [(self.me, self.part.version, self.part.waiting())])
        return self.for_requester, tuple(self.reports.values())

    def drive(self, outgoing: Outgoing) -> None:
        """At the initiator: send steps and fold their replies in until none is outstanding.

        A lone step waits on this thread's own connection (two thread hand-offs fewer).
        Raises the first failure.
        """
        waiting: "deque[Future]" = deque()
        while outgoing or waiting:
            if len(outgoing) == 1 and not waiting:
                ((rank, items),) = outgoing.items()
                reply = actors.call_service(rank, Kind.AUTOGRAD_BACKWARD_STEP, self.step(items))
            else:
                waiting.extend(self._send(outgoing))
                reply = waiting.popleft().wait()
            outgoing = self.fold(reply)

    def relay(self, outgoing: Outgoing, on_pool, failure) -> Future:
        """On a worker serving a step: the reply, once every nested step is answered.

        Replies are folded in on the worker pool (`on_pool`), not the I/O thread that
        completes them; `failure(exc)` turns a local error into the one to report.
        """
        if not outgoing:
            return completed(self.reply())
        done = Future()
        lock = threading.Lock()
        outstanding = [0]

        def send(steps: Outgoing) -> None:
            with lock:
                outstanding[0] += len(steps)
            for future in self._send(steps):
                future.add_done_callback(arrived)

        def arrived(future: Future) -> None:
            exc = future.exception()
            if exc is None:
                try:
                    on_pool(fold, future.value())
                    return
                except Exception as stopped:  # noqa: BLE001 - e.g. the pool is stopping
                    exc = stopped
            finish(exc)

        def fold(reply: Reply) -> None:
            try:
                with lock:  # replies are folded on several pool threads at once
                    outgoing = self.fold(reply)
                send(outgoing)
            except BaseException as exc:  # noqa: BLE001 - reported to the requester
                finish(failure(exc))
                if escapes(exc):
                    raise
                return
            finish(None)

        def finish(exc: Optional[BaseException]) -> None:
            with lock:
                outstanding[0] -= 1
                if done.done():
                    return
                if exc is not None:
                    done.set_exception(exc)
                elif outstanding[0] == 0:
                    done.set_result(self.reply())

        send(outgoing)
        return done

    def _send(self, outgoing: Outgoing) -> List[Future]:
        return [actors.call_service_async(rank, Kind.AUTOGRAD_BACKWARD_STEP, self.step(items))
                for rank, items in outgoing.items()]


def failure(worker: str, exc: BaseException) -> BaseException:
    """The error a failed part reports: remote failures, lost workers and timeouts pass
    unchanged."""
    if isinstance(exc, (DistBackwardError, ConnectionError, TimeoutError)):
        return exc
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    log.warning("dist_backward_failed", worker=worker, error=f"{type(exc).__name__}: {exc}")
    return DistBackwardError(worker, f"{type(exc).__name__}: {exc}", text)


def serve_backward_step(requester: actors.WorkerInfo, step: tuple) -> Future:
    """Serve a backward step (see the module doc); the reply holds the requester's items."""
    context_id, pass_id, retain_graph, items, live = step
    me = actors.get_worker_info()
    ctx = container.get(context_id, me.name)
    try:
        with ctx.lock:
            part = ctx.backward_pass(pass_id, retain_graph,
                                     None if live is None else held_by(live, me.id))
        exchange = Exchange(ctx, part, me.id, requester.id, live)
        outgoing = exchange.advance(items)
    except Exception as exc:
        raise failure(me.name, exc) from exc
    return exchange.relay(outgoing, actors.run_on_pool, lambda exc: failure(me.name, exc))
