"""Gradient clipping against torch.nn.utils' numbers."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.nn.utils import clip_grad_norm_, clip_grad_value_

pytestmark = pytest.mark.timeout(60)

GRADS = [np.array([[3.0, -4.0], [0.5, 1.0]]), np.array([12.0, 0.0]), None]


def _params(space, grads=GRADS):
    params = []
    for grad in grads:
        shape = (2,) if grad is None else grad.shape
        if space is engine:
            param = engine.nn.Parameter(np.zeros(shape))
            param.grad = None if grad is None else grad.copy()
        else:
            param = space.zeros(shape, dtype=space.float64, requires_grad=True)
            param.grad = None if grad is None else space.tensor(grad)
        params.append(param)
    return params


def _grads(params):
    return [None if p.grad is None else np.asarray(p.grad) for p in params]


@pytest.mark.parametrize("max_norm, norm_type", [(1.0, 2.0), (100.0, 2.0), (5.0, 1.0),
                                                 (2.0, float("inf")), (3.0, 3.0)])
def test_clip_grad_norm_scales_and_returns_the_norm_as_torchs(max_norm, norm_type):
    torch = pytest.importorskip("torch")
    ours, theirs = _params(engine), _params(torch)
    norm = clip_grad_norm_(ours, max_norm, norm_type)
    their_norm = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    assert isinstance(norm, engine.Tensor) and norm.shape == ()
    np.testing.assert_allclose(norm.item(), their_norm.item(), rtol=1e-14)
    for mine, other in zip(_grads(ours), _grads(theirs)):
        if other is None:
            assert mine is None
        else:
            np.testing.assert_allclose(mine, other, rtol=1e-14)


def test_clip_grad_norm_gives_torchs_numbers():
    params = _params(engine)
    norm = clip_grad_norm_(params, 1.0)
    # torch 2.13, float64: the total norm and the gradients scaled by 1 / (norm + 1e-6)
    assert norm.item() == 13.047988350699889
    np.testing.assert_allclose(params[0].grad, [[0.22992048195066017, -0.30656064260088023],
                                                [0.03832008032511003, 0.07664016065022006]],
                               rtol=1e-15)
    np.testing.assert_allclose(params[1].grad, [0.9196819278026407, 0.0], rtol=1e-15)
    assert params[2].grad is None


def test_a_gradient_read_before_clipping_does_not_change_and_dtypes_stay():
    param = engine.nn.Parameter(np.zeros(2, dtype=np.float32))
    before = param.grad = np.array([30.0, 40.0], dtype=np.float32)
    clip_grad_norm_(param, 5.0)
    np.testing.assert_array_equal(before, [30.0, 40.0])
    np.testing.assert_allclose(param.grad, [3.0, 4.0], rtol=1e-6)
    assert param.grad.dtype == np.float32
    clip_grad_value_(param, 3.5)
    assert param.grad.tolist() == [3.0, 3.5] and param.grad.dtype == np.float32


def test_a_nonfinite_norm_raises_only_when_asked_and_then_changes_nothing():
    params = _params(engine, [np.array([np.inf, 1.0])])
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    assert params[0].grad.tolist() == [np.inf, 1.0]
    assert clip_grad_norm_(params, 1.0).item() == np.inf  # torch scales by it: 0 and 0
    np.testing.assert_array_equal(params[0].grad, [np.nan, 0.0])
    assert clip_grad_norm_([engine.nn.Parameter(np.zeros(1))], 1.0).item() == 0.0


def test_clip_grad_value_clamps_each_element_as_torchs():
    torch = pytest.importorskip("torch")
    ours, theirs = _params(engine), _params(torch)
    clip_grad_value_(ours, 2.0)
    torch.nn.utils.clip_grad_value_(theirs, 2.0)
    for mine, other in zip(_grads(ours), _grads(theirs)):
        assert (mine is None) == (other is None)
        if mine is not None:
            np.testing.assert_array_equal(mine, other)
