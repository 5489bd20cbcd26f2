"""The backward engine: dependency counting, accumulation, retain_graph, many roots, depth."""
from __future__ import annotations

import gc
import sys
import threading

import numpy as np
import pytest

import engine
from engine.autograd import FREED, GraphRoot, GraphTask, count_dependencies, gradient_edge
from engine.errors import AutogradError, GradientShapeError, GraphFreedError
from engine.ops import OpNode

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def applied(monkeypatch):
    """Names of the op nodes that ran, in order."""
    names = []
    original = OpNode.apply

    def spy(self, grads):
        names.append(self.name())
        return original(self, grads)

    monkeypatch.setattr(OpNode, "apply", spy)
    return names


def _design_note_graph():
    a = engine.rand(3, 3, requires_grad=True)
    b = engine.rand(3, 3, requires_grad=True)
    c = engine.rand(3, 3, requires_grad=True)
    d = a + b
    e = b * c
    return a, b, c, d, e


def test_design_note_example_gives_ones_to_a_and_b_and_nothing_to_c():
    a, b, c, d, _ = _design_note_graph()
    d.sum().backward()
    np.testing.assert_array_equal(a.grad, np.ones((3, 3)))
    np.testing.assert_array_equal(b.grad, np.ones((3, 3)))
    assert c.grad is None


def test_mul_never_runs_when_the_root_does_not_reach_it(applied):
    _, _, _, d, e = _design_note_graph()
    d.sum().backward()
    assert applied == ["SumBackward", "AddBackward"]
    assert e.grad_fn.saved is not FREED  # never ran, so never released


def test_dependencies_count_one_per_incoming_edge_from_reachable_nodes():
    _, _, _, d, e = _design_note_graph()
    root = d.sum()
    counts = count_dependencies([root.grad_fn])
    assert counts[d.grad_fn] == 1
    assert e.grad_fn not in counts
    shared = d * d  # two edges into d's node
    assert count_dependencies([shared.grad_fn])[d.grad_fn] == 2


def test_gradients_accumulate_across_backward_calls():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [6.0, 6.0])
    x.grad = None
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])


def test_a_0d_leafs_accumulated_gradient_stays_an_array_that_zero_grad_can_clear():
    x = engine.tensor(2.0, dtype=np.float64, requires_grad=True)
    opt = engine.optim.SGD([x], lr=0.1)
    for _ in range(2):
        (x * x).backward()
    assert isinstance(x.grad, np.ndarray) and x.grad.shape == () and x.grad == 8.0
    opt.zero_grad(set_to_none=False)
    (x * x).backward()
    assert x.grad == 4.0  # not 12: the zeroing reached the gradient


def test_a_function_gets_an_array_for_a_0d_output_used_twice():
    received = []

    class Square(engine.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            received.append(type(grad))
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = engine.tensor(3.0, dtype=np.float64, requires_grad=True)
    y = Square.apply(x)
    (y * y + y).backward()
    assert received == [np.ndarray] and x.grad == (2 * 9.0 + 1) * 6.0


def test_backward_passes_on_several_threads_lose_no_gradient_of_a_shared_leaf():
    # as an RPC server's handler threads training one model; torch's accumulation is
    # thread-safe too. Large arrays: numpy lets other threads run while it adds them
    w = engine.tensor(np.zeros(1_000_000), requires_grad=True)
    threads, passes = 4, 20
    start = threading.Barrier(threads)

    def train() -> None:
        start.wait(10)
        for _ in range(passes):
            (w * 1.0).sum().backward()

    workers = [threading.Thread(target=train) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert w.grad.min() == w.grad.max() == threads * passes


def test_a_tensor_used_twice_gets_the_sum_of_both_paths():
    x = engine.tensor([2.0], requires_grad=True)
    y = x * x + x
    y.backward(np.ones(1))
    np.testing.assert_array_equal(x.grad, [5.0])


def test_second_backward_through_a_freed_graph_raises_a_clear_error():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(GraphFreedError, match="second time"):
        y.backward()


def test_retain_graph_allows_a_second_backward():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad, [4.0, 8.0])


def test_backward_from_several_roots_at_once_sums_their_contributions():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y, z = x * 2, x * x
    engine.backward([y, z], [np.ones(2), np.array([1.0, 10.0])])
    np.testing.assert_array_equal(x.grad, [2.0 + 2.0, 2.0 + 40.0])


def test_a_root_reachable_from_another_root_runs_after_it():
    x = engine.tensor([3.0], requires_grad=True)
    y = x * 2
    z = y * y
    engine.backward([z, y], [np.ones(1), np.ones(1)])
    np.testing.assert_array_equal(x.grad, [2 * 2 * 6.0 + 2.0])


def test_backward_on_a_leaf_accumulates_its_gradient():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    x.backward(np.array([3.0, 4.0]))
    np.testing.assert_array_equal(x.grad, [3.0, 4.0])


def test_backward_needs_a_gradient_for_a_non_scalar_root():
    x = engine.ones(3, requires_grad=True)
    with pytest.raises(AutogradError, match="one-element"):
        (x * 2).backward()
    with pytest.raises(GradientShapeError, match="shape"):
        (x * 2).backward(np.ones(4))


def test_backward_of_a_tensor_that_does_not_require_grad_raises():
    with pytest.raises(AutogradError, match="does not require grad"):
        engine.ones(1).backward()
    with pytest.raises(TypeError, match="ndarray"):
        engine.backward([np.ones(1)])


def test_two_leaves_never_share_one_gradient_array():
    a = engine.ones(3, requires_grad=True)
    b = engine.ones(3, requires_grad=True)
    c = engine.tensor([1.0, 2.0, 3.0])
    ((a + b) * c).sum().backward()
    assert a.grad is not b.grad
    a.grad[...] = 0
    np.testing.assert_array_equal(b.grad, [1.0, 2.0, 3.0])


def test_the_callers_gradient_array_is_never_stored_as_a_grad():
    x = engine.ones(3, requires_grad=True)
    seed = np.ones(3)
    (x + 0).backward(seed)
    assert x.grad is not seed


def test_leaf_gradients_take_the_leaf_dtype():
    x = engine.ones(2, requires_grad=True)  # float32
    (x * np.array([1.0, 2.0])).sum().backward()  # float64 on the way back
    assert x.grad.dtype == np.float32


def test_a_chain_of_ten_thousand_ops_backpropagates_without_recursion():
    limit = sys.getrecursionlimit()
    x = engine.tensor([1.0], dtype=np.float64, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad, [1.0001 ** 10_000])
    del y
    gc.collect()
    assert sys.getrecursionlimit() == limit


def test_a_custom_sink_receives_leaf_gradients_instead_of_grad():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    received = {}
    engine.backward([(x * 3).sum()], accumulate=lambda t, g: received.__setitem__(t, g))
    assert x.grad is None
    np.testing.assert_array_equal(received[x], [3.0, 3.0])


def test_an_injected_root_waits_for_its_pending_gradient():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = x * 5  # stands for a send function: its gradient comes from outside
    task = GraphTask()
    task.add_root(y.grad_fn, pending=1)
    task.run()
    assert x.grad is None
    task.inject(y.grad_fn, [np.array([1.0, 1.0])])
    task.run()
    np.testing.assert_array_equal(x.grad, [5.0, 5.0])


def test_local_roots_and_injected_roots_share_one_dependency_count():
    x = engine.tensor([1.0], requires_grad=True)
    local, remote = x * 2, x * 3
    task = GraphTask()
    task.add_root(GraphRoot([gradient_edge(local)], [np.ones(1)]))
    task.add_root(remote.grad_fn, pending=1)
    task.run()
    assert x.grad is None  # x's accumulator still waits for the remote path
    task.inject(remote.grad_fn, [np.ones(1)])
    task.run()
    np.testing.assert_array_equal(x.grad, [5.0])


def test_injecting_into_a_node_outside_the_pass_raises():
    x = engine.tensor([1.0], requires_grad=True)
    with pytest.raises(AutogradError, match="not part of this backward pass"):
        GraphTask().inject((x * 2).grad_fn, [np.ones(1)])


def test_an_error_in_backward_names_the_node(monkeypatch):
    x = engine.tensor([1.0], requires_grad=True)
    y = engine.exp(x).sum()

    def broken(saved, grad, needs):
        raise ArithmeticError("boom")

    monkeypatch.setattr(engine.ops.pointwise.Exp, "backward", staticmethod(broken))
    with pytest.raises(ArithmeticError) as info:
        y.backward()
    assert "ExpBackward" in "".join(getattr(info.value, "__notes__", []))


def test_a_float32_graph_backpropagates_in_float32(monkeypatch):
    dtypes = set()
    original = OpNode.apply

    def spy(self, grads):
        out = original(self, grads)
        dtypes.update(np.asarray(g).dtype for g in out if g is not None)
        return out

    monkeypatch.setattr(OpNode, "apply", spy)
    x = engine.rand(3, 4, requires_grad=True)
    y = (2 ** x).max(axis=1) + engine.sigmoid(x).mean() / engine.sqrt(x + 1).sum()
    engine.log_softmax(y, axis=0).sum().backward()
    assert dtypes == {np.dtype(np.float32)}
