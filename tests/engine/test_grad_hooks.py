"""Post-accumulate-grad hooks: what DistributedDataParallel starts its all-reduces from."""
import numpy as np
import pytest

import engine
from engine import AutogradError, Tensor

pytestmark = pytest.mark.timeout(30)


def test_a_post_accumulate_grad_hook_sees_the_accumulated_gradient_once_per_pass():
    leaf = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    seen = []
    handle = leaf.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.copy()))
    ((leaf * 3).sum() + (leaf * leaf).sum()).backward()  # two paths into one leaf
    assert [s.tolist() for s in seen] == [[5.0, 7.0]]
    handle.remove()
    (leaf.sum()).backward()
    assert len(seen) == 1
    with pytest.raises(AutogradError, match="leaves"):
        (leaf * 2).register_post_accumulate_grad_hook(print)


def test_a_hook_on_a_tensor_that_does_not_require_grad_is_refused_as_in_torch():
    frozen = Tensor(np.array([1.0, 2.0]))  # its hook could never run
    with pytest.raises(AutogradError, match="doesn't require gradient"):
        frozen.register_post_accumulate_grad_hook(print)


def test_a_post_accumulate_grad_hook_does_not_run_when_gradients_go_to_a_sink():
    leaf = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    seen, sunk = [], []
    leaf.register_post_accumulate_grad_hook(seen.append)
    engine.backward([(leaf * 2).sum()], accumulate=lambda tensor, grad: sunk.append(grad))
    assert seen == [] and leaf.grad is None and [g.tolist() for g in sunk] == [[2.0, 2.0]]


def test_a_queued_callback_runs_once_after_every_node_of_the_pass():
    from engine.autograd import queue_callback

    first = Tensor(np.array([1.0]), requires_grad=True)
    second = Tensor(np.array([2.0]), requires_grad=True)
    order = []
    first.register_post_accumulate_grad_hook(
        lambda t: (order.append("first"), queue_callback(lambda: order.append(
            ("done", first.grad is not None, second.grad is not None)))))
    second.register_post_accumulate_grad_hook(lambda t: order.append("second"))
    (first * second).sum().backward()
    assert sorted(order[:2]) == ["first", "second"] and order[2:] == [("done", True, True)]
    (first * second).sum().backward()
    assert len(order) == 6  # queued again in the second pass, not left over from the first
    with pytest.raises(AutogradError, match="during a backward pass"):
        queue_callback(print)


def test_a_hook_that_changes_grad_in_place_leaves_the_gradients_still_on_their_way_alone():
    # a + b hands one gradient array to both inputs; a's hook runs before b's path does
    a = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = Tensor(np.array([1.0, 1.0]), requires_grad=True)
    a.register_post_accumulate_grad_hook(lambda t: t.grad.fill(0))
    (a + c * 3.0).sum().backward()
    np.testing.assert_array_equal(a.grad, [0.0, 0.0])
    np.testing.assert_array_equal(c.grad, [3.0, 3.0])  # torch's too

    class Both(engine.Function):  # a user op that returns one array for two inputs
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    a.grad = c.grad = None
    Both.apply(a, c * 2.0).sum().backward()
    np.testing.assert_array_equal(c.grad, [2.0, 2.0])
