"""Local backward: turn root tensors and their gradients into a ``GraphTask`` and run it."""
from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from engine.autograd.graph import GraphRoot
from engine.autograd.scheduler import GraphTask, Sink
from engine.errors import AutogradError, GradientShapeError

class _Passes(threading.local):
    """Per thread, the callbacks of each backward pass in progress (nested passes stack)."""

    def __init__(self) -> None:
        self.stack: List[List[Callable[[], None]]] = []


_passes = _Passes()


def queue_callback(callback: Callable[[], None]) -> None:
    """Run `callback()` once the backward pass running in this thread has finished
    (torch's ``Variable._execution_engine.queue_callback``).

    Callable only from inside a pass (a hook); callbacks run in the order queued, after
    every node of the pass, in the same thread; one that raises ends the pass with its
    error, and the callbacks queued after it are not run. A pass that raises runs none.
    """
    stack = _passes.stack
    if not stack:
        raise AutogradError("queue_callback can only be called during a backward pass")
    stack[-1].append(callback)


def root_gradient(tensor: Any, gradient: Any) -> np.ndarray:
    """The gradient a backward pass starts from: ones for a one-element tensor, else a copy
    of ``gradient`` (checked against the tensor's shape, cast to its dtype)."""
    if gradient is None:
        if tensor.data.size != 1:
            raise AutogradError(
                f"gradient can be implicitly created only for one-element tensors; "
                f"pass gradient= for a tensor of shape {tensor.shape}"
            )
        return np.ones(tensor.shape, dtype=tensor.dtype)
    gradient = np.array(getattr(gradient, "data", gradient), dtype=tensor.dtype, copy=True)
    if gradient.shape != tensor.shape:
        raise GradientShapeError(
            f"gradient has shape {gradient.shape} but the tensor has shape {tensor.shape}"
        )
    return gradient


def backward(
    tensors: Sequence[Any],
    grad_tensors: Optional[Sequence[Any]] = None,
    retain_graph: bool = False,
    *,
    accumulate: Optional[Sink] = None,
) -> None:
    """Run one backward pass from several roots at once.

    ``grad_tensors[i]`` is the gradient of ``tensors[i]`` (None: ones, for a
    one-element tensor).  Leaf gradients go to ``accumulate(tensor, grad)``;
    the default adds them to ``tensor.grad``.
    """
    if not isinstance(tensors, (list, tuple)):
        tensors = [tensors]
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif not isinstance(grad_tensors, (list, tuple)):
        grad_tensors = [grad_tensors]
    if len(grad_tensors) != len(tensors):
        raise ValueError(f"got {len(tensors)} tensors but {len(grad_tensors)} gradients")
    edges, grads = [], []
    for index, (tensor, gradient) in enumerate(zip(tensors, grad_tensors)):
        if not hasattr(tensor, "_edge"):
            raise TypeError(f"backward takes Tensors; element {index} is a "
                            f"{type(tensor).__name__}")
        if not tensor.requires_grad:
            raise AutogradError(
                f"element {index} of tensors does not require grad and has no grad_fn"
            )
        edges.append(tensor._edge())
        grads.append(root_gradient(tensor, gradient))
    task = GraphTask(retain_graph=retain_graph, accumulate=accumulate)
    task.add_root(GraphRoot(edges, grads))
    stack = _passes.stack
    callbacks: List[Callable[[], None]] = []
    stack.append(callbacks)
    try:
        task.run()
    finally:
        stack.pop()
    for callback in callbacks:
        callback()
