"""User-defined ops through engine.Function."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.errors import GradientShapeError, GraphFreedError

pytestmark = pytest.mark.timeout(60)


class Square(engine.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class ScaleAndShift(engine.Function):
    """Two outputs and a non-tensor argument."""

    @staticmethod
    def forward(ctx, x, y, factor):
        ctx.factor = factor
        ctx.seen_needs = ctx.needs_input_grad
        return x * factor, x + y

    @staticmethod
    def backward(ctx, grad_scaled, grad_sum):
        return grad_scaled * ctx.factor + grad_sum, grad_sum, None


def test_custom_function_forward_and_backward():
    x = engine.tensor([1.0, 3.0], requires_grad=True)
    y = Square.apply(x)
    assert y.grad_fn.name() == "SquareBackward"
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 6.0])


def test_custom_function_passes_gradcheck(rng):
    x = engine.tensor(rng.standard_normal(4), requires_grad=True)
    assert engine.gradcheck(Square.apply, [x])


def test_custom_function_with_two_outputs_and_a_constant_argument():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = engine.tensor([5.0, 5.0])
    scaled, summed = ScaleAndShift.apply(x, y, 3.0)
    assert scaled.output_nr == 0 and summed.output_nr == 1
    assert scaled.grad_fn.ctx.seen_needs == (True, False, False)
    (scaled.sum() + summed.sum()).backward()
    np.testing.assert_array_equal(x.grad, [4.0, 4.0])


def test_an_unused_output_gets_a_zero_gradient():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    scaled, _ = ScaleAndShift.apply(x, engine.zeros(2), 3.0)
    scaled.sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


def test_saved_tensors_are_freed_after_backward():
    x = engine.tensor([1.0], requires_grad=True)
    y = Square.apply(x)
    y.backward()
    with pytest.raises(GraphFreedError):
        y.backward()


def test_a_function_that_saved_nothing_still_refuses_a_second_backward():
    x = engine.tensor([1.0], requires_grad=True)
    scaled, _ = ScaleAndShift.apply(x, engine.zeros(1), 2.0)
    scaled.backward()
    with pytest.raises(GraphFreedError, match="ScaleAndShiftBackward"):
        scaled.backward()


def test_integer_outputs_do_not_require_grad():
    class ArgMaxAndDouble(engine.Function):
        @staticmethod
        def forward(ctx, x):
            return np.argmax(x), 2 * x

        @staticmethod
        def backward(ctx, grad_index, grad_double):
            return 2 * grad_double

    index, double = ArgMaxAndDouble.apply(engine.tensor([1.0, 5.0], requires_grad=True))
    assert not index.requires_grad and index.item() == 1
    assert double.requires_grad


def test_a_gradient_of_the_wrong_shape_is_an_error():
    class Broken(engine.Function):
        @staticmethod
        def forward(ctx, x):
            return x.copy()

        @staticmethod
        def backward(ctx, grad):
            return np.ones(7)

    x = engine.ones(3, requires_grad=True)
    with pytest.raises(GradientShapeError, match="shape"):
        Broken.apply(x).sum().backward()


def test_a_broadcast_gradient_is_summed_down_to_the_input():
    class Spread(engine.Function):
        @staticmethod
        def forward(ctx, x):
            return np.repeat(x, 2, axis=0)

        @staticmethod
        def backward(ctx, grad):
            return grad.reshape(2, 1, 3).repeat(1, axis=0)

    x = engine.ones(1, 3, requires_grad=True)
    Spread.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad, [[2.0, 2.0, 2.0]])


def test_no_node_is_recorded_under_no_grad():
    x = engine.ones(2, requires_grad=True)
    with engine.no_grad():
        assert Square.apply(x).grad_fn is None
