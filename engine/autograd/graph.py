"""The backward graph: nodes, edges, leaf accumulators and the root node.

A ``Node`` is one step of the backward pass.  Its contract, which the scheduler and
the distributed engine rely on:

- ``next_edges``: a tuple of ``(Node | None, input_nr)``, one per gradient that
  ``apply`` returns; ``input_nr`` is the input slot of that node the gradient goes
  to.  ``(None, 0)`` means "nobody needs this gradient".
- ``num_inputs``: how many gradients ``apply`` receives (one per forward output).
- ``apply(grads)``: ``grads`` is a list of ``num_inputs`` arrays (``None`` where no
  gradient arrived); returns a sequence aligned with ``next_edges``.  It must not
  modify the arrays it receives: the same array may be handed to several nodes.
- ``release()``: drop saved forward state after a pass without ``retain_graph``.

Every leaf tensor that requires grad is reached through its ``AccumulateGrad``
node, whose ``variable`` is that tensor.  The scheduler never calls
``AccumulateGrad.apply``: it hands the gradient to the task's ``accumulate``
callback instead, which is how distributed autograd sends leaf gradients to a
context rather than to ``.grad``.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

Edge = Tuple[Optional["Node"], int]
"""Where a gradient goes: (the node that takes it, which of its inputs); torch's edge."""
NO_EDGE: Edge = (None, 0)
"""The edge of an input that takes no gradient (a constant, or a tensor not requiring grad)."""


class _Freed:
    """Stands for saved state that an earlier backward released."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "FREED"


FREED = _Freed()
"""Stands in for a node's saved state once a backward without ``retain_graph`` released it."""


def gradient_edge(tensor: Any) -> Edge:
    """Where ``tensor``'s gradient enters the graph: ``(tensor.grad_fn, output_nr)`` for a
    non-leaf, ``(its AccumulateGrad node, 0)`` for a leaf that requires grad."""
    return tensor._edge()


class Node:
    """One step of the backward pass (see the module docstring for the contract)."""

    __slots__ = ("next_edges",)
    num_inputs = 1

    def apply(self, grads: List[Optional[np.ndarray]]) -> Sequence[Optional[np.ndarray]]:
        """Map the gradients of this node's outputs to those of its inputs."""
        raise NotImplementedError

    def release(self) -> None:
        """Free saved forward state; a later ``apply`` raises ``GraphFreedError``."""

    def name(self) -> str:
        """A readable name such as ``MulBackward``."""
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{self.name()}>"


class AccumulateGrad(Node):
    """The backward end of a leaf tensor that requires grad."""

    __slots__ = ("variable", "__weakref__")

    def __init__(self, variable: Any) -> None:
        self.variable = variable
        self.next_edges = ()

    def apply(self, grads: List[Optional[np.ndarray]]) -> Tuple[()]:
        """Add ``grads[0]`` to ``variable.grad`` (what the scheduler's default sink does)."""
        from engine.autograd.accumulate import IntoGrad

        IntoGrad()(self.variable, grads[0])
        return ()


class GraphRoot(Node):
    """The entry of a local pass: hands the caller's gradients to the root edges."""

    __slots__ = ("grads",)
    num_inputs = 0

    def __init__(self, edges: Sequence[Edge], grads: Sequence[Optional[np.ndarray]]) -> None:
        if len(edges) != len(grads):
            raise ValueError(f"GraphRoot got {len(edges)} edges but {len(grads)} gradients")
        self.next_edges = tuple(edges)
        self.grads = tuple(grads)

    def apply(self, grads: List[Optional[np.ndarray]]) -> Tuple[Optional[np.ndarray], ...]:
        return self.grads
