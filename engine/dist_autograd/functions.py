"""The send and recv functions: where a distributed graph crosses between workers.

A `SendFunction` sits on the worker that sent tensors requiring grad; its edges
lead to those tensors' backward nodes, and the gradients it passes on arrive from
the matching `RecvFunction`, over RPC. The `RecvFunction` is the `grad_fn` of the
received tensors; in backward it sends their gradients to the sender. It also keeps
the message's lineage: the send functions that become live if it is reached
(see `lineage`).
"""
from __future__ import annotations

from typing import Any, Callable, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np

from engine.autograd.graph import Edge, Node


class SendFunction(Node):
    """Passes the gradients delivered for message `message_id` on to the sent tensors."""

    __slots__ = ("message_id", "num_inputs")

    def __init__(self, message_id: int, edges: Sequence[Edge]):
        self.message_id = message_id
        self.next_edges = tuple(edges)
        self.num_inputs = len(edges)

    def apply(self, grads: List[Optional[np.ndarray]]) -> Sequence[Optional[np.ndarray]]:
        return grads

    def name(self) -> str:
        return "SendBackward"


class RecvFunction(Node):
    """Sends the gradients of the received tensors back to the worker that sent them."""

    __slots__ = ("message_id", "peer", "num_inputs", "context_id", "lineage", "_send")

    def __init__(self, message_id: int, peer: Any, count: int,
                 send: Callable[["RecvFunction", List[Optional[np.ndarray]]], None],
                 context_id: int, lineage: FrozenSet[int] = frozenset()):
        self.message_id = message_id
        self.lineage = lineage
        self.peer = peer
        self.context_id = context_id
        self.num_inputs = count
        self.next_edges = ()
        self._send = send

    def apply(self, grads: List[Optional[np.ndarray]]) -> Tuple[()]:
        self._send(self, grads)
        return ()

    def name(self) -> str:
        return "RecvBackward"
