"""SMART mode's pure parts: lineage of sends, dependency counts from live sends only, and
the reports that decide whether a pass finished. No workers: graphs are built here."""
import numpy as np
import pytest

import engine
from engine.autograd.graph import GraphRoot, gradient_edge
from engine.dist_autograd.context import RANK_SHIFT, AutogradContext
from engine.dist_autograd.functions import RecvFunction, SendFunction
from engine.dist_autograd.lineage import held_by, lineage_of, live_sends, received
from engine.dist_autograd.outcome import FAST, SMART, merge, unfinished_error, waiting

pytestmark = pytest.mark.timeout(30)


def mid(rank: int, counter: int) -> int:
    return (rank << RANK_SHIFT) | counter


def received_tensor(message_id: int, carried=frozenset()):
    """A tensor as a recv function hands it over: its grad_fn is the RecvFunction."""
    recv = RecvFunction(message_id, None, 1, lambda r, g: None, 0,
                        received(message_id, carried))
    return engine.Tensor(np.array([1.0, 2.0]), True, recv, 0)


def test_a_send_behind_a_recv_carries_that_message_and_its_lineage():
    """y = 2 * r, r received as message (1, 7) whose own lineage is {(0, 3)}."""
    r = received_tensor(mid(1, 7), {mid(0, 3)})
    y = r * 2.0
    assert lineage_of([gradient_edge(y)]) == {mid(1, 7), mid(0, 3)}


def test_a_send_of_leaves_and_local_ops_only_has_an_empty_lineage():
    """y = x * x + 1 with x a local leaf."""
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    assert lineage_of([gradient_edge(x * x + 1.0)]) == frozenset()


def test_the_roots_reach_only_the_recvs_they_use():
    """loss = sum(d); e, received like d, is not used: its message is not live."""
    d = received_tensor(mid(1, 2), {mid(0, 1)})
    e = received_tensor(mid(1, 4), {mid(0, 3)})
    root = GraphRoot([gradient_edge((d * 1.0).sum())], [np.ones(())])
    assert live_sends([root]) == (mid(0, 1), mid(1, 2))
    shared = (d + e).sum()
    assert live_sends([GraphRoot([gradient_edge(shared)], [np.ones(())])]) == (
        mid(0, 1), mid(0, 3), mid(1, 2), mid(1, 4))


def test_a_worker_finds_its_live_sends_by_the_rank_in_their_high_bits():
    assert held_by((mid(0, 1), mid(2, 3), mid(2, 5)), 2) == [mid(2, 3), mid(2, 5)]
    assert held_by((mid(0, 1),), 1) == []


def _context_with_two_sends_sharing_a_leaf():
    """Sends (0, 1) of (a, b) and (0, 3) of (b, c), as the issue's example records them."""
    context = AutogradContext(mid(0, 99))
    a, b, c = (engine.tensor([v], requires_grad=True) for v in (2.0, 3.0, 4.0))
    for message_id, tensors in ((mid(0, 1), (a, b)), (mid(0, 3), (b, c))):
        context.sends[message_id] = SendFunction(message_id,
                                                 [gradient_edge(t) for t in tensors])
    return context, a, b, c


def test_fast_counts_every_send_and_smart_only_the_live_ones():
    """b feeds both sends: FAST waits for two gradients at b, SMART (live: (0, 1)) one."""
    context, a, b, c = _context_with_two_sends_sharing_a_leaf()
    fast = context.backward_pass(1, False)
    smart = context.backward_pass(2, False, live=[mid(0, 1)])
    node_b = gradient_edge(b)[0]
    assert fast.task.dependencies[node_b] == 2 and smart.task.dependencies[node_b] == 1
    assert gradient_edge(c)[0] not in smart.task.dependencies
    smart.task.inject(context.sends[mid(0, 1)], [np.ones(1), np.ones(1)])
    smart.task.run()
    assert smart.waiting() == () and set(context.grads) == {a, b}
    fast.task.inject(context.sends[mid(0, 1)], [np.ones(1), np.ones(1)])
    fast.task.run()
    assert fast.waiting() == (mid(0, 3),)


def test_a_live_id_without_a_send_function_is_an_error_naming_it():
    context, *_ = _context_with_two_sends_sharing_a_leaf()
    with pytest.raises(engine.errors.AutogradError, match=str(mid(1, 5))):
        context.backward_pass(1, False, live=[mid(1, 5)])


def test_the_newest_report_of_each_worker_wins_in_any_order():
    reports = {}
    merge(reports, [(1, 3, ()), (2, 1, (mid(2, 1),))])
    merge(reports, [(1, 2, (mid(1, 4),)), (0, 5, ())])
    assert reports == {0: (0, 5, ()), 1: (1, 3, ()), 2: (2, 1, (mid(2, 1),))}
    assert waiting(reports) == {2: (mid(2, 1),)}


def test_the_fast_error_names_the_sends_their_workers_and_smart_mode():
    stuck = {0: (mid(0, 3),), 1: (mid(1, 4),)}
    error = unfinished_error(stuck, FAST, lambda rank: f"worker{rank}")
    assert error.worker == "worker0"
    for text in ("worker0: message 0x3", "worker1: message 0x1000000000004",
                 "mode='smart'"):
        assert text in str(error)
    assert "mode='smart'" not in str(unfinished_error(stuck, SMART, str))
