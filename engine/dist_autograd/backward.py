"""Distributed autograd's public calls: contexts, `backward`, gradients, release.

`backward` runs this worker's part of a pass, in FAST or SMART mode, and drives the
backward messages (`exchange`) until every worker's part is done; a pass that
leaves send functions without a gradient fails (`outcome`). Leaving a context
releases it everywhere it went (`release`).
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

import actors
from actors.runtime.process.log import get_logger
from engine.autograd.graph import GraphRoot, gradient_edge
from engine.errors import AutogradError
from engine.tensor import Tensor

from .context import container
from .errors import ContextActiveError
from .exchange import Exchange, failure
from .lineage import held_by, live_sends
from .outcome import FAST, MODES, SMART, lost_error, unfinished_error, waiting
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


def backward(context_id: int, roots: Sequence[Tensor], retain_graph: bool = False,
             mode: str = FAST) -> None:
    """Run the backward pass of the context from scalar `roots` on every worker involved.

    `mode` "fast" (the default) waits at every send function of the context for one
    gradient; "smart" first finds the send functions the roots reach, on every worker
    (`lineage`), and runs only those: right on graphs with RPC outputs the roots do
    not use. Returns once every worker's part has finished. A failure anywhere raises
    here: DistBackwardError naming the worker (with `remote_traceback`), also when a
    FAST pass leaves send functions without a gradient (naming them) and when a
    worker SMART mode needs is lost; in FAST mode a lost worker raises its
    WorkerLostError (a ConnectionError).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    me = _me()
    ctx = container.get(context_id, me.name)
    roots = _checked(list(roots))
    root = GraphRoot([gradient_edge(r) for r in roots],
                     [np.ones_like(r.data) for r in roots])
    pass_id = container.new_id(me.id)
    try:
        with ctx.lock:
            live = live_sends([root]) if mode == SMART else None
            part = ctx.backward_pass(pass_id, retain_graph,
                                     None if live is None else held_by(live, me.id))
            part.task.add_root(root)
        exchange = Exchange(ctx, part, me.id, requester=None, live=live)
        exchange.drive(exchange.advance([]))
        exchange.reply()  # adds this worker's own report
        stuck = waiting(exchange.reports)
        if stuck:
            raise unfinished_error(stuck, mode, lambda rank: actors.get_worker_info(rank).name)
    except ConnectionError as exc:
        if mode == SMART:
            raise lost_error(getattr(exc, "worker", "?"), exc) from exc
        raise
    except Exception as exc:
        raise failure(me.name, exc) from exc
    finally:
        ctx.passes.pop(pass_id, None)


def _checked(roots: List[Tensor]) -> List[Tensor]:
    """`roots`, once each is known to be a scalar tensor that requires grad."""
    for root in roots:
        if not isinstance(root, Tensor):
            raise TypeError(f"backward roots must be Tensors, got {type(root).__name__}")
        if not root.requires_grad:
            raise AutogradError("a backward root does not require grad and has no grad_fn")
        if root.data.size != 1:
            raise AutogradError(f"backward roots must be scalars, got shape {root.shape}")
    return roots
