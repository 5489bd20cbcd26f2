"""User-defined ops, torch style: subclass ``Function``, write forward and backward on ndarrays.

``forward(ctx, *args)`` receives each Tensor argument as its ndarray (other
arguments unchanged) and returns an ndarray or a tuple of them.
``backward(ctx, *grads)`` receives one gradient per output (zeros for an output
that got none) and returns one ndarray or None per forward argument.  A gradient
whose shape broadcasts to its input's is summed down to it; any other shape is an
error.  ``ctx.save_for_backward(*arrays)`` / ``ctx.saved_tensors`` carry arrays
across; ``ctx.needs_input_grad`` says which arguments want a gradient; any other
attribute may be set on ``ctx`` freely.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

import numpy as np

from engine.autograd.grad_mode import grad_state
from engine.autograd.graph import NO_EDGE, Node
from engine.broadcasting import unbroadcast
from engine.errors import GradientShapeError, GraphFreedError
from engine.tensor import Tensor

ndarray = np.ndarray


class FunctionCtx:
    """What forward leaves for backward."""

    def __init__(self, needs_input_grad: Tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self._saved: Optional[Tuple[Any, ...]] = ()

    def save_for_backward(self, *arrays: Any) -> None:
        """Keep ``arrays`` for backward (they are not copied)."""
        self._saved = arrays

    @property
    def saved_tensors(self) -> Tuple[Any, ...]:
        """The arrays given to ``save_for_backward``."""
        if self._saved is None:
            raise GraphFreedError(
                "saved tensors were freed by an earlier backward; pass retain_graph=True to it"
            )
        return self._saved


class FunctionNode(Node):
    """The backward node of one ``Function.apply`` call."""

    __slots__ = ("function", "ctx", "num_inputs", "output_meta", "input_shapes", "freed")

    def __init__(self, function: type, ctx: FunctionCtx, next_edges: Tuple[Any, ...],
                 outputs: List[np.ndarray], inputs: List[Any]) -> None:
        self.function = function
        self.ctx = ctx
        self.next_edges = next_edges
        self.num_inputs = len(outputs)
        self.output_meta = [(o.shape, o.dtype) for o in outputs]
        self.input_shapes = [getattr(x, "shape", None) for x in inputs]
        self.freed = False

    def apply(self, grads: List[Optional[np.ndarray]]) -> Tuple[Optional[np.ndarray], ...]:
        if self.freed:
            raise GraphFreedError(
                f"{self.name()}: trying to backward through the graph a second time; it was "
                "released by the first backward (pass retain_graph=True to it)"
            )
        grads = [np.zeros(shape, dtype) if g is None else g
                 for g, (shape, dtype) in zip(grads, self.output_meta)]
        result = self.function.backward(self.ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        expected = len(self.input_shapes)
        if len(result) < expected or any(r is not None for r in result[expected:]):
            raise GradientShapeError(
                f"{self.name()} returned {len(result)} gradients; forward took {expected} arguments"
            )
        saved = self.ctx._saved or ()
        return tuple(self._check(i, g, saved) for i, g in enumerate(result[:expected]))

    def _check(self, index: int, grad: Any, saved: Tuple[Any, ...]) -> Optional[np.ndarray]:
        if grad is None or self.next_edges[index][0] is None:
            return None
        grad = np.asarray(grad)
        if any(grad is s for s in saved):
            grad = grad.copy()  # never let a leaf's .grad alias a saved forward array
        shape = self.input_shapes[index]
        if grad.shape != shape:
            try:
                target = np.broadcast_shapes(shape, grad.shape)
            except ValueError:
                target = None
            if target != grad.shape:
                raise GradientShapeError(
                    f"{self.name()} returned a gradient of shape {grad.shape} for argument "
                    f"{index}, which has shape {shape}"
                )
            grad = unbroadcast(grad, shape)
        return grad

    def release(self) -> None:
        self.ctx._saved = None
        self.freed = True

    def name(self) -> str:
        return self.function.__name__ + "Backward"


class Function:
    """Base class for user-defined differentiable ops (see the module docstring)."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """Compute the outputs from the arguments' arrays; override it (a static method).

        `ctx` carries what backward needs (`FunctionCtx`); each Tensor argument arrives as
        its ndarray, others unchanged. Return an ndarray or a tuple of them; `apply` wraps
        them in Tensors.
        """
        raise NotImplementedError

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: np.ndarray) -> Any:
        """Return the gradients of the inputs from those of the outputs; override it (a static
        method).

        One gradient arrives per output (zeros for an output that got none); return one
        ndarray or None per forward argument, as torch's `Function.backward` does.
        """
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any) -> Union[Tensor, Tuple[Tensor, ...]]:
        """Run forward on the arguments' arrays and record a node when grad is needed."""
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        arrays = [a.data if isinstance(a, Tensor) else a for a in args]
        ctx = FunctionCtx(needs)
        result = cls.forward(ctx, *arrays)
        single = not isinstance(result, tuple)
        outputs = [np.asarray(r) for r in ((result,) if single else result)]
        node = None
        if any(needs) and grad_state.enabled:
            edges = tuple(a._edge() if need else NO_EDGE for a, need in zip(args, needs))
            node = FunctionNode(cls, ctx, edges, outputs, arrays)
        tensors = tuple(_wrap(out, node, nr) for nr, out in enumerate(outputs))
        return tensors[0] if single else tensors


def _wrap(out: np.ndarray, node: Optional[FunctionNode], output_nr: int) -> Tensor:
    """Output ``output_nr`` of a Function call; only floating-point outputs join the graph."""
    if node is not None and out.dtype.kind in "fc":
        return Tensor(out, True, node, output_nr)
    return Tensor(out)
