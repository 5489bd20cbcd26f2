"""The scheduler hooks drive a two-"worker" backward the way FAST-mode distributed autograd
will: send/recv nodes, per-context leaf gradients, injected gradients, no ``.grad`` writes."""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import pytest

import engine
from engine.autograd import GraphRoot, GraphTask, Node, gradient_edge, merge_gradient

pytestmark = pytest.mark.timeout(60)


class Send(Node):
    """Sender side of an RPC: its gradients arrive by message and flow to the sent tensors."""

    __slots__ = ("num_inputs",)

    def __init__(self, tensors):
        self.next_edges = tuple(gradient_edge(t) for t in tensors)
        self.num_inputs = len(tensors)

    def apply(self, grads):
        return grads


class Recv(Node):
    """Receiver side: its gradients go back to the peer's matching Send."""

    __slots__ = ("num_inputs", "outbox", "peer", "message_id")

    def __init__(self, count, outbox, peer, message_id):
        self.next_edges = ()
        self.num_inputs = count
        self.outbox, self.peer, self.message_id = outbox, peer, message_id

    def apply(self, grads):
        self.outbox.append((self.peer, self.message_id, list(grads)))
        return ()


class Worker:
    """One worker's share of a distributed autograd context."""

    def __init__(self, outbox: List[Tuple[int, int, list]]):
        self.outbox = outbox
        self.sends: Dict[int, Send] = {}
        self.grads: Dict[engine.Tensor, np.ndarray] = {}
        self.claimed: set = set()
        self.task = None

    def rpc(self, tensors, peer_worker, message_id, my_id):
        """Ship tensors to ``peer_worker``; return its received copies (with a Recv grad_fn)."""
        self.sends[message_id] = Send(tensors)
        recv = Recv(len(tensors), peer_worker.outbox, my_id, message_id)
        return [engine.Tensor(t.data.copy(), True, recv, nr) for nr, t in enumerate(tensors)]

    def accumulate(self, tensor, grad):
        self.grads[tensor] = merge_gradient(self.grads.get(tensor), grad, tensor, self.claimed)

    def start(self, roots=()):
        """First sight of the backward pass: count from local roots and every send."""
        self.task = GraphTask(accumulate=self.accumulate)
        if roots:
            edges = [gradient_edge(r) for r in roots]
            self.task.add_root(GraphRoot(edges, [np.ones(r.shape, r.dtype) for r in roots]))
        for send in self.sends.values():
            self.task.add_root(send, pending=1)

    def receive(self, message_id, grads):
        if self.task is None:
            self.start()
        self.task.inject(self.sends[message_id], grads)
        self.task.run()


def test_fast_mode_backward_over_two_workers_matches_the_local_gradients():
    mail: List[Tuple[int, int, list]] = []
    w0, w1 = Worker(mail), Worker(mail)
    workers = [w0, w1]

    t1 = engine.rand(3, 3, requires_grad=True)
    t2 = engine.rand(3, 3, requires_grad=True)
    t4 = engine.rand(3, 3, requires_grad=True)
    # t3 = rpc_sync("worker1", add, (t1, t2)): request 1 goes out, response 2 comes back.
    r1, r2 = w0.rpc([t1, t2], w1, message_id=1, my_id=0)
    (t3,) = w1.rpc([engine.add(r1, r2)], w0, message_id=2, my_id=1)
    loss = (t3 * t4).sum()

    w0.start(roots=[loss])
    w0.task.run()
    while mail:  # deliver gradient messages until every worker is idle
        peer, message_id, grads = mail.pop(0)
        workers[peer].receive(message_id, grads)

    assert t1.grad is None and t2.grad is None and t4.grad is None
    assert set(w0.grads) == {t1, t2, t4} and w1.grads == {}
    np.testing.assert_allclose(w0.grads[t1], t4.data)
    np.testing.assert_allclose(w0.grads[t2], t4.data)
    np.testing.assert_allclose(w0.grads[t4], t1.data + t2.data, rtol=1e-6)
    assert w0.grads[t1] is not w0.grads[t2]
