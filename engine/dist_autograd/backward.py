"""FAST-mode distributed backward, and releasing contexts everywhere they went.

The worker that calls `backward` counts its dependencies from the roots and from
every send function of the context, then runs its graph. A recv function that runs
sends its gradients to the worker holding the matching send function
(`_backward_step`); that worker, on first sight of the pass, counts its own
dependencies the same way, injects the gradients into the send function and runs
what became ready. Each step is answered only when everything it set off has
finished, so the caller's `backward` returns when every worker's part is done, and
any failure travels back to it.
"""
from __future__ import annotations

import threading
import traceback
from contextlib import contextmanager
from typing import Iterator, List, Optional, Sequence

import numpy as np

import actors
from actors.runtime import Future
from actors.runtime.futures import completed
from actors.runtime.log import get_logger
from engine.autograd.graph import GraphRoot, gradient_edge
from engine.errors import AutogradError
from engine.tensor import Tensor

from .context import AutogradContext, BackwardPass, container
from .errors import ContextActiveError, DistBackwardError

log = get_logger(__name__)

_running = threading.local()


def _me() -> actors.WorkerInfo:
    return actors.get_worker_info()


@contextmanager
def context() -> Iterator[int]:
    """A new distributed autograd context, current in this thread; yields its id.

    Leaving the block releases the context here and, asynchronously, on every worker
    it touched (and transitively on the workers they touched).
    """
    if container.current() is not None:
        raise ContextActiveError("a distributed autograd context is already active in this "
                                 "thread; contexts do not nest")
    ctx = container.create(_me().id)
    log.debug("dist_autograd_context_created", context_id=ctx.id)
    with container.using(ctx):
        try:
            yield ctx.id
        finally:
            release(ctx.id)


def get_gradients(context_id: int) -> dict:
    """``{Tensor: np.ndarray}``: this worker's leaf gradients accumulated in the context."""
    return dict(container.get(context_id, _me().name).grads)


def backward(context_id: int, roots: Sequence[Tensor], retain_graph: bool = False) -> None:
    """Run the backward pass of the context from scalar `roots` on every worker involved.

    Returns once every worker's part has finished. A failure anywhere raises here:
    DistBackwardError naming the worker (with `remote_traceback`), or the
    WorkerLostError (a ConnectionError) of a worker that died.
    """
    me = _me()
    ctx = container.get(context_id, me.name)
    roots = list(roots)
    for root in roots:
        if not isinstance(root, Tensor):
            raise TypeError(f"backward roots must be Tensors, got {type(root).__name__}")
        if not root.requires_grad:
            raise AutogradError("a backward root does not require grad and has no grad_fn")
        if root.data.size != 1:
            raise AutogradError(f"backward roots must be scalars, got shape {root.shape}")
    pass_id = container.new_id(me.id)
    try:
        with ctx.lock:
            part = ctx.backward_pass(pass_id, retain_graph)
            part.task.add_root(GraphRoot([gradient_edge(r) for r in roots],
                                         [np.ones_like(r.data) for r in roots]))
            messages = _run(part)
    except Exception as exc:
        raise _failure(me.name, exc) from exc
    try:
        for future in _send(messages, last_waits_here=True):
            future.wait()
        _warn_if_unfinished(ctx, part)
    finally:
        ctx.passes.pop(pass_id, None)


def _warn_if_unfinished(ctx: AutogradContext, part: BackwardPass) -> None:
    """FAST mode's blind spot, made visible: nodes still waiting when the pass is over.

    A send function whose recv side got no gradient (an RPC output the loss does not
    use) never runs, and nodes that also depend on it get no gradient.
    """
    with ctx.lock:
        waiting = sum(1 for count in part.task.dependencies.values() if count > 0)
    if waiting:
        log.warning("dist_backward_incomplete", context_id=ctx.id, nodes_not_run=waiting,
                    hint="an RPC output the loss does not use leaves its send function "
                         "without a gradient (FAST mode)")


def send_gradients(recv, grads: List[Optional[np.ndarray]]) -> None:
    """The RecvFunction's backward: ship the gradients to the sender's send function.

    The message is only noted here; `_run`'s caller sends it once the context lock is
    released (a worker that answers may need the lock of the same context).
    """
    pass_id, retain_graph, outstanding = _running.state
    outstanding.append((recv.peer, (recv.context_id, pass_id, recv.message_id, list(grads),
                                    retain_graph)))


def _send(messages: list, last_waits_here: bool) -> List[Future]:
    """Send noted gradient messages; with `last_waits_here`, the last one is sent and
    waited for on this thread's own connection (two thread hand-offs fewer)."""
    with container.using(None):  # the engine's own messages are not recorded
        futures = [actors.rpc_async(peer, _backward_step, args=args)
                   for peer, args in messages[:-1 if last_waits_here else None]]
        if last_waits_here and messages:
            peer, args = messages[-1]
            try:
                actors.rpc_sync(peer, _backward_step, args=args)
            except Exception as exc:  # noqa: BLE001 - joins the others' outcome
                from actors.runtime.futures import failed

                futures.append(failed(exc))
    return futures


@actors.async_execution
def _backward_step(context_id: int, pass_id: int, message_id: int,
                   grads: List[Optional[np.ndarray]], retain_graph: bool) -> Future:
    """Runs on the worker holding the send function of `message_id` (see module doc)."""
    me = _me().name
    ctx = container.get(context_id, me)
    try:
        with ctx.lock:
            part = ctx.backward_pass(pass_id, retain_graph)
            send = ctx.sends.get(message_id)
            if send is None:
                raise AutogradError(f"context {context_id} has no send function for "
                                    f"message {message_id}")
            part.task.inject(send, grads)
            messages = _run(part)
    except Exception as exc:
        raise _failure(me, exc) from exc
    return all_done(_send(messages, last_waits_here=False))


def _run(part: BackwardPass) -> list:
    """Run what is ready; returns the gradient messages to send. Hold the context lock."""
    messages: list = []
    _running.state = (part.pass_id, part.retain_graph, messages)
    try:
        part.task.run()
    finally:
        _running.state = None
    return messages


def _failure(worker: str, exc: BaseException) -> BaseException:
    if isinstance(exc, (DistBackwardError, ConnectionError)):
        return exc
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    log.warning("dist_backward_failed", worker=worker, error=f"{type(exc).__name__}: {exc}")
    return DistBackwardError(worker, f"{type(exc).__name__}: {exc}", text)


def all_done(futures: List[Future]) -> Future:
    """A future that completes when all of `futures` have, failing with the first error."""
    if not futures:
        return completed(None)
    combined = Future()
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(done: Future) -> None:
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        exc = done.exception()
        if combined.done():
            return
        if exc is not None:
            combined.set_exception(exc)
        elif last:
            combined.set_result(None)

    for future in futures:
        future.add_done_callback(one_done)
    return combined


# ---- release ---------------------------------------------------------------------

def release(context_id: int, came_from: Optional[int] = None) -> None:
    """Forget the context here and tell every worker it touched to do the same.

    One-way messages (as torch's cleanup): each worker forwards to the workers its
    part touched, except the one it heard from; a worker that no longer has the
    context stops there, which ends cycles.
    """
    ctx: Optional[AutogradContext] = container.release(context_id)
    if ctx is None:
        return
    from actors.rpc.state import current_agent

    agent = current_agent()
    with container.using(None):
        for rank in sorted(ctx.workers - {agent.rank, came_from}):
            agent.notify(rank, release, (context_id, agent.rank), {})
