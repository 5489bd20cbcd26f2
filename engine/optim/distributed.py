"""`DistributedOptimizer`: one local optimizer per parameter owner, stepped over RPC.

Each owner of parameters (held by RRefs) gets its own local optimizer, created
there with `remote`; `step(context_id)` runs all of them concurrently, each with the
gradients that distributed autograd accumulated on its owner in that context. Local
optimizers on one worker take one process-wide lock while stepping, so concurrent
DistributedOptimizers that update the same parameters do it one after the other.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Sequence, Type

import actors

from .optimizer import Optimizer

_step_lock = threading.Lock()


class _LocalOptimizer:
    """Lives on a parameter owner: the local optimizer over the parameters it owns."""

    def __init__(self, optimizer_class: Type[Optimizer], param_rrefs: Sequence[Any],
                 args: tuple, kwargs: dict):
        params = [rref.local_value() for rref in param_rrefs]
        self.optimizer = optimizer_class(params, *args, **kwargs)

    def step(self, context_id: int) -> None:
        from engine import dist_autograd

        grads = dist_autograd.get_gradients(context_id)
        with _step_lock:
            self.optimizer.step(grads=grads)


def _step(local_optimizer: Any, context_id: int) -> None:
    local_optimizer.local_value().step(context_id)


class DistributedOptimizer:
    """`optimizer_class(params, *args, **kwargs)` on every owner of `param_rrefs`, made
    before the constructor returns (an owner's error raises here)."""

    def __init__(self, optimizer_class: Type[Optimizer], param_rrefs: Sequence[Any],
                 *args: Any, **kwargs: Any):
        by_owner: Dict[str, List[Any]] = {}
        for rref in param_rrefs:
            by_owner.setdefault(rref.owner_name(), []).append(rref)
        self.remote_optimizers = [
            actors.remote(owner, _LocalOptimizer, args=(optimizer_class, rrefs, args, kwargs))
            for owner, rrefs in by_owner.items()]
        # As torch's: an optimizer an owner cannot make (a bad argument) raises here,
        # not at the first step after a whole forward and backward.
        actors.wait_all([optimizer.confirmed() for optimizer in self.remote_optimizers])

    def step(self, context_id: int) -> None:
        """Apply every owner's gradients of `context_id`, concurrently; errors raise here."""
        actors.wait_all([actors.rpc_async(opt.owner(), _step, args=(opt, context_id))
                         for opt in self.remote_optimizers])
