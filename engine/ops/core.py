"""How an op runs: the ``Op`` unit (forward beside backward), its graph node, and the
three call paths (unary, binary, n-ary) that run forward and record the node.

An op is a class with two static methods:

- ``forward(*arrays, *params) -> (out, saved)``: plain numpy; ``saved`` is whatever
  backward needs (references, no copies).  N-ary ops get their arrays as one list.
- ``backward(saved, grad, needs) -> tuple``: one gradient (or None) per array
  input, each already reduced to that input's shape; ``needs[i]`` says whether
  input ``i`` wants one.  It must not modify ``grad``.

Inputs may be Tensors, ndarrays, lists (made arrays) or Python scalars; only Tensors
that require grad get an edge.  Python scalars are passed to numpy as they are, so
``t * 2.0`` keeps ``t``'s dtype (numpy's rules for Python scalars).  A node is
recorded only when grad mode is on and some input requires grad; the mode is read
once per call.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from engine.autograd.grad_mode import grad_state
from engine.autograd.graph import FREED, NO_EDGE, Edge, Node
from engine.errors import GraphFreedError
from engine.tensor import Tensor

ndarray = np.ndarray
_asarray = np.asarray


class Op:
    """A differentiable primitive: a forward on arrays and its backward rule beside it."""

    @staticmethod
    def forward(*args: Any) -> Tuple[np.ndarray, Any]:
        """Compute the output from plain arrays; return ``(out, saved)``, `saved` being what
        backward needs.

        Array inputs come first, then the op's parameters; an n-ary op gets its arrays as
        one list. Keep references in `saved`, not copies.
        """
        raise NotImplementedError

    @staticmethod
    def backward(saved: Any, grad: np.ndarray, needs: Tuple[bool, ...]) -> tuple:
        """One gradient (or None) per array input from the output's gradient `grad`.

        Each gradient has its input's shape; ``needs[i]`` says whether input i wants one.
        `grad` must not be modified.
        """
        raise NotImplementedError


class OpNode(Node):
    """The backward node of one op call: the op, what forward saved, and which inputs need grad."""

    __slots__ = ("op", "saved", "needs")

    def __init__(self, op: type, saved: Any, next_edges: Tuple[Edge, ...],
                 needs: Tuple[bool, ...]) -> None:
        self.op = op
        self.saved = saved
        self.next_edges = next_edges
        self.needs = needs

    def apply(self, grads: List[Optional[np.ndarray]]) -> tuple:
        grad = grads[0]
        if grad is None:
            return (None,) * len(self.next_edges)
        saved = self.saved
        if saved is FREED:
            raise GraphFreedError(
                f"{self.name()}: trying to backward through the graph a second time; its "
                "saved arrays were freed by the first backward (pass retain_graph=True to it)"
            )
        return self.op.backward(saved, grad, self.needs)

    def release(self) -> None:
        self.saved = FREED

    def name(self) -> str:
        return self.op.__name__ + "Backward"


_NEEDS_ONE = (True,)


def unary(op: type, x: Any, *params: Any) -> Tensor:
    """Run a one-input op on ``x`` (params are passed to forward, never differentiated)."""
    if not isinstance(x, Tensor):
        x = Tensor(_asarray(x))
    out, saved = op.forward(x.data, *params)
    if out.__class__ is not ndarray:
        out = _asarray(out)
    if x.requires_grad and grad_state.enabled:
        return Tensor(out, True, OpNode(op, saved, (x._edge(),), _NEEDS_ONE))
    return Tensor(out)


def binary(op: type, a: Any, b: Any, *params: Any) -> Tensor:
    """Run a two-input op; hand-specialized twin of ``nary`` (the hot path of arithmetic)."""
    if isinstance(a, Tensor):
        data_a, grad_a = a.data, a.requires_grad
    else:
        data_a, grad_a = _constant(a), False
    if isinstance(b, Tensor):
        data_b, grad_b = b.data, b.requires_grad
    else:
        data_b, grad_b = _constant(b), False
    out, saved = op.forward(data_a, data_b, *params)
    if out.__class__ is not ndarray:
        out = _asarray(out)
    if (grad_a or grad_b) and grad_state.enabled:
        edges = (a._edge() if grad_a else NO_EDGE, b._edge() if grad_b else NO_EDGE)
        return Tensor(out, True, OpNode(op, saved, edges, (grad_a, grad_b)))
    return Tensor(out)


def nary(op: type, inputs: Sequence[Any], *params: Any) -> Tensor:
    """Run an op over a sequence of inputs; forward receives the arrays as one list."""
    recording = grad_state.enabled
    arrays, edges, needs = [], [], []
    for x in inputs:
        if isinstance(x, Tensor):
            arrays.append(x.data)
            if recording and x.requires_grad:
                edges.append(x._edge())
                needs.append(True)
                continue
        else:
            arrays.append(_constant(x))
        edges.append(NO_EDGE)
        needs.append(False)
    out, saved = op.forward(arrays, *params)
    if out.__class__ is not ndarray:
        out = _asarray(out)
    if True in needs:
        return Tensor(out, True, OpNode(op, saved, tuple(edges), tuple(needs)))
    return Tensor(out)


def _constant(x: Any) -> Any:
    """A non-Tensor input as forward and backward see it: a list or tuple becomes an array
    (backward rules read its shape and compute with it, as forward's numpy did), a Python
    scalar stays one, so ``t * 2.0`` keeps ``t``'s dtype."""
    return _asarray(x) if isinstance(x, (list, tuple)) else x


def as_array(x: Any) -> Any:
    """The ndarray behind a Tensor; anything else unchanged."""
    return x.data if isinstance(x, Tensor) else x
