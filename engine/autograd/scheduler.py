"""The backward scheduler: dependency counting and the ready-queue loop (pure graph logic).

This module knows nothing of tensors or ops; it moves gradients between ``Node``
objects (see ``engine.autograd.graph``).  The local ``backward`` uses it with one
``GraphRoot``; distributed autograd drives it directly.

Hook API (what distributed autograd builds on)
----------------------------------------------
``count_dependencies(roots, counts=None) -> counts``
    For every node reachable from ``roots``, how many gradients it will receive
    (one per edge from a reachable node).  Passing an existing ``counts`` extends
    it with the nodes newly reachable from ``roots``, without counting twice.

``task = GraphTask(retain_graph=False, accumulate=None)``
    One backward pass.  ``accumulate(tensor, grad)`` receives every gradient that
    reaches a leaf's ``AccumulateGrad`` node (default: ``IntoGrad()``, which adds
    to ``tensor.grad``; see ``engine.autograd.accumulate``).

``task.add_root(node, grads=None, pending=0)``
    Start the pass at ``node`` too (any Node: a ``GraphRoot``, a send function).
    ``grads`` are its own incoming gradients (one per input); ``pending`` is the
    number of ``inject`` calls it must still wait for (FAST mode: 1 per send).
    Dependencies of newly reachable nodes are counted here.

``task.inject(node, grads)``
    Deliver gradients that arrive from outside the local graph (an RPC); counts as
    one of ``node``'s pending dependencies.

``task.run()``
    Execute every node that is ready, until none is.  Call it again after more
    ``inject`` calls.  A node runs when its count reaches zero; nodes the roots do
    not reach never run.  ``GraphTask`` is not thread-safe: callers serialize
    ``add_root``/``inject``/``run`` on one task.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np

from engine.autograd.accumulate import IntoGrad, add_gradients
from engine.autograd.graph import AccumulateGrad, Node
from engine.errors import AutogradError

Sink = Callable[[Any, Optional[np.ndarray]], None]


def count_dependencies(
    roots: Iterable[Node], counts: Optional[Dict[Node, int]] = None
) -> Dict[Node, int]:
    """Count, for every node reachable from ``roots``, the gradients it will receive."""
    if counts is None:
        counts = {}
    stack = [root for root in roots if root not in counts]
    for root in stack:
        counts[root] = 0
    while stack:
        node = stack.pop()
        for nxt, _ in node.next_edges:
            if nxt is None:
                continue
            seen = counts.get(nxt)
            if seen is None:
                counts[nxt] = 1
                stack.append(nxt)
            else:
                counts[nxt] = seen + 1
    return counts


class GraphTask:
    """One backward pass: dependency counts, input buffers and a ready queue."""

    __slots__ = ("dependencies", "buffers", "ready", "retain_graph", "accumulate", "_roots")

    def __init__(self, *, retain_graph: bool = False, accumulate: Optional[Sink] = None) -> None:
        self.dependencies: Dict[Node, int] = {}
        self.buffers: Dict[Node, List[Optional[np.ndarray]]] = {}
        self.ready: List[tuple] = []
        self.retain_graph = retain_graph
        self.accumulate: Sink = accumulate if accumulate is not None else IntoGrad()
        self._roots: List[Node] = []

    def add_root(
        self,
        node: Node,
        grads: Optional[Sequence[Optional[np.ndarray]]] = None,
        *,
        pending: int = 0,
    ) -> None:
        """Start the pass at ``node`` too, with its own ``grads`` and ``pending`` injections."""
        count_dependencies((node,), self.dependencies)
        self.dependencies[node] += pending
        if grads is not None:
            self._merge(node, grads)
        if pending == 0:
            self._roots.append(node)

    def inject(self, node: Node, grads: Sequence[Optional[np.ndarray]]) -> None:
        """Deliver gradients from outside the local graph; satisfies one pending dependency."""
        count = self.dependencies.get(node)
        if count is None:
            raise AutogradError(f"{node!r} is not part of this backward pass; add it as a root")
        if count <= 0:
            raise AutogradError(f"{node!r} received more gradients than it waits for")
        self._merge(node, grads)
        self.dependencies[node] = count - 1
        if count == 1:
            self.ready.append((node, self.buffers.pop(node)))

    def run(self) -> None:
        """Execute ready nodes until none is left."""
        dependencies, buffers, ready = self.dependencies, self.buffers, self.ready
        for root in self._roots:
            if dependencies[root] == 0:
                ready.append((root, buffers.pop(root, None) or [None] * root.num_inputs))
        self._roots.clear()
        accumulate, retain_graph = self.accumulate, self.retain_graph
        node = None
        try:
            while ready:
                node, grads = ready.pop()
                if node.__class__ is AccumulateGrad:
                    accumulate(node.variable, grads[0])
                    continue
                outputs = node.apply(grads)
                if len(outputs) > 1:
                    outputs = _unaliased(outputs)
                if not retain_graph:
                    node.release()
                for (nxt, slot), grad in zip(node.next_edges, outputs):
                    if nxt is None:
                        continue
                    count = dependencies[nxt] - 1
                    dependencies[nxt] = count
                    inputs = buffers.get(nxt)
                    if inputs is None:
                        if count == 0 and nxt.num_inputs == 1:  # sole producer: no buffer
                            if nxt.__class__ is AccumulateGrad:
                                accumulate(nxt.variable, grad)
                            else:
                                ready.append((nxt, [grad]))
                            continue
                        inputs = buffers[nxt] = [None] * nxt.num_inputs
                    if grad is not None:
                        held = inputs[slot]
                        inputs[slot] = grad if held is None else add_gradients(held, grad)
                    if count == 0:
                        ready.append((nxt, buffers.pop(nxt)))
        except Exception as exc:
            if node is not None and hasattr(exc, "add_note"):
                exc.add_note(f"(raised in the backward of {node.name()})")
            raise

    def _merge(self, node: Node, grads: Sequence[Optional[np.ndarray]]) -> None:
        if len(grads) != node.num_inputs:
            raise AutogradError(
                f"{node!r} takes {node.num_inputs} gradients, got {len(grads)}"
            )
        inputs = self.buffers.setdefault(node, [None] * node.num_inputs)
        for slot, grad in enumerate(grads):
            if grad is not None:
                held = inputs[slot]
                inputs[slot] = grad if held is None else add_gradients(held, grad)


def _unaliased(grads: Sequence[Optional[np.ndarray]]) -> Sequence[Optional[np.ndarray]]:
    """`grads`, with an array given for several inputs (``a + b`` gives ``grad`` to both)
    replaced by a view for each: a leaf stores a copy of a view, never the array itself,
    so a hook that changes its ``.grad`` in place cannot change what the other inputs
    still have to receive. (Scalars cannot change: they stay as they are.)"""
    seen: set = set()
    shared: set = set()
    for grad in grads:
        if isinstance(grad, np.ndarray):
            (shared if id(grad) in seen else seen).add(id(grad))
    if not shared:
        return grads
    return [grad.view() if id(grad) in shared else grad for grad in grads]
