"""Distributed autograd's public calls: contexts, `backward`, gradients, release.

`backward` runs this worker's part of a FAST-mode pass and drives the backward
messages (`exchange`) until every worker's part is done. Leaving a context
releases it everywhere it went (`release`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

import actors
from actors.runtime.process.log import get_logger
from engine.autograd.graph import GraphRoot, gradient_edge
from engine.errors import AutogradError
from engine.tensor import Tensor

from .context import AutogradContext, BackwardPass, container
from .errors import ContextActiveError
from .exchange import Exchange, failure
from .release import release

log = get_logger(__name__)


def _me() -> actors.WorkerInfo:
    return actors.get_worker_info()


def context() -> "ContextScope":
    """A new distributed autograd context, current in this thread; ``with`` yields its id.

    Leaving the block releases the context here and, asynchronously, on every worker
    it touched (and transitively on the workers they touched).
    """
    return ContextScope()


class ContextScope:
    """The ``with`` block of `context()` (a class: it wraps every training step)."""

    __slots__ = ("_using", "_id")

    def __enter__(self) -> int:
        if container.current() is not None:
            raise ContextActiveError("a distributed autograd context is already active in "
                                     "this thread; contexts do not nest")
        ctx = container.create(_me().id)
        log.debug("dist_autograd_context_created", context_id=ctx.id)
        self._id, self._using = ctx.id, container.using(ctx)
        self._using.__enter__()
        return ctx.id

    def __exit__(self, *exc: object) -> None:
        try:
            self._using.__exit__(*exc)
        finally:
            release(self._id)


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
        exchange = Exchange(ctx, part, me.id, requester=None)
        exchange.drive(exchange.advance([]))
        _warn_if_unfinished(ctx, part)
    except Exception as exc:
        raise failure(me.name, exc) from exc
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
