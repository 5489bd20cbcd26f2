"""Where leaf gradients go: the default sink (``tensor.grad``) and the merge rule.

A sink is any callable ``sink(tensor, grad)``; the scheduler calls it once per
gradient that reaches a leaf's ``AccumulateGrad`` node.  ``IntoGrad`` (the default)
adds to ``tensor.grad``, then calls the tensor's post-accumulate-grad hooks (what
DistributedDataParallel starts its bucket all-reduces from); distributed autograd
passes a sink that adds to its context instead, using ``merge_gradient`` so that it
follows the same rules:

- the stored array has the leaf's shape and dtype (a float64 gradient for a float32
  leaf is cast, as torch does);
- a fresh, writeable, unshared gradient array is stored as is (no copy); anything
  else (a view, a read-only broadcast, an array already stored for another leaf in
  the same pass) is copied, so two leaves never share one gradient array; an array a
  node returns for several inputs reaches each as a view (the scheduler's
  ``_unaliased``), so a stored ``.grad`` is never an array still on its way to another
  node, which a hook changing ``.grad`` in place would corrupt;
- a second gradient is added out of place, never into an array that might still be
  in flight.
"""
from __future__ import annotations

import threading
from typing import Any, Optional, Set

import numpy as np

from engine.errors import GradientShapeError

ndarray = np.ndarray


def add_gradients(held: Any, grad: Any, dtype: Any = None) -> np.ndarray:
    """``held + grad`` as a new ndarray, also for 0-d gradients: numpy makes the sum of two
    0-d arrays a scalar, which nothing can change in place (``grad.fill(0)`` would do
    nothing)."""
    total = np.add(held, grad, dtype=dtype)
    return total if total.__class__ is ndarray else np.asarray(total)


def merge_gradient(
    existing: Optional[np.ndarray], grad: np.ndarray, like: Any, claimed: Set[int]
) -> np.ndarray:
    """Return the new stored gradient for tensor ``like`` after adding ``grad`` to ``existing``.

    ``claimed`` holds the ids of arrays already stored during this pass; it is updated.
    """
    if grad.shape != like.shape:
        raise GradientShapeError(
            f"gradient of shape {grad.shape} for a tensor of shape {like.shape}"
        )
    if existing is not None:
        return add_gradients(existing, grad, existing.dtype)
    if (
        grad.__class__ is ndarray
        and grad.base is None
        and grad.dtype == like.dtype
        and grad.flags.writeable
        and id(grad) not in claimed
    ):
        claimed.add(id(grad))
        return grad
    return np.array(grad, dtype=like.dtype, copy=True)


# Backward passes on several threads may reach one leaf (an RPC server's handlers
# training one model): reading and replacing its .grad must not interleave, or one
# pass's gradient is lost. torch's accumulation is thread-safe too.
_into_grad_lock = threading.Lock()


class IntoGrad:
    """The default leaf sink: accumulate into ``tensor.grad``."""

    __slots__ = ("claimed",)

    def __init__(self) -> None:
        self.claimed: Set[int] = set()

    def __call__(self, tensor: Any, grad: Optional[np.ndarray]) -> None:
        if grad is not None:
            with _into_grad_lock:
                tensor.grad = merge_gradient(tensor.grad, grad, tensor, self.claimed)
            hooks = tensor.post_accumulate_grad_hooks
            if hooks:
                for hook in list(hooks):
                    hook(tensor)
