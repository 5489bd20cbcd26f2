"""gradcheck itself: it passes correct gradients and names the culprit otherwise."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.errors import GradcheckError

pytestmark = pytest.mark.timeout(60)


class WrongSquare(engine.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x)
        return x ** 2 + y

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad, 1.5 * grad  # y's gradient should be grad


def test_gradcheck_returns_true_for_correct_gradients(rng):
    x = engine.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    assert engine.gradcheck(lambda t: (t * t).sum(axis=0), x) is True


def test_gradcheck_names_the_input_and_the_max_difference(rng):
    x = engine.tensor(rng.standard_normal(3), requires_grad=True)
    y = engine.tensor(rng.standard_normal(3), requires_grad=True)
    with pytest.raises(GradcheckError, match=r"input 1 .*max difference 0\.5"):
        engine.gradcheck(WrongSquare.apply, (x, y))
    x2, y2 = (engine.tensor(np.ones((2, 2)), requires_grad=True) for _ in range(2))
    with pytest.raises(GradcheckError, match=r"input element \(0, 0\): analytical 1\.5"):
        engine.gradcheck(WrongSquare.apply, (x2, y2))


def test_gradcheck_perturbs_an_input_whose_array_is_not_contiguous(rng):
    transposed = engine.from_numpy(rng.standard_normal((3, 2)).T, requires_grad=True)
    assert engine.gradcheck(lambda t: (t * t).sum(axis=0), transposed) is True
    with pytest.raises(GradcheckError, match="input 1"):
        engine.gradcheck(WrongSquare.apply, (transposed, engine.from_numpy(
            rng.standard_normal((3, 2)).T, requires_grad=True)))


def test_gradcheck_refuses_float32_inputs():
    with pytest.raises(ValueError, match="float64"):
        engine.gradcheck(engine.exp, engine.ones(2, requires_grad=True))


def test_gradcheck_leaves_grad_untouched(rng):
    x = engine.tensor(rng.standard_normal(3), requires_grad=True)
    engine.gradcheck(engine.tanh, x)
    assert x.grad is None
    assert np.isfinite(x.data).all()
