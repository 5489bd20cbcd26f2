"""Optimizers against hand-computed steps of torch's documented update rules."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.optim import SGD, Adam, AdamW

pytestmark = pytest.mark.timeout(60)


def _param(*values):
    return engine.nn.Parameter(np.array(values, dtype=np.float64))


def _step(optimizer, param, grad):
    param.grad = np.array(grad, dtype=np.float64)
    optimizer.step()


def test_plain_sgd_moves_against_the_gradient():
    p = _param(1.0, 2.0)
    _step(SGD([p], lr=0.1), p, [0.5, -1.0])
    np.testing.assert_allclose(p.data, [0.95, 2.1])


def test_sgd_momentum_starts_with_the_gradient_then_accumulates():
    p = _param(1.0)
    opt = SGD([p], lr=0.1, momentum=0.9)
    _step(opt, p, [1.0])  # buffer = 1
    _step(opt, p, [1.0])  # buffer = 0.9 * 1 + 1 = 1.9
    np.testing.assert_allclose(p.data, [1.0 - 0.1 - 0.19])


def test_sgd_dampening_scales_new_gradients_after_the_first_step():
    p = _param(0.0)
    opt = SGD([p], lr=1.0, momentum=0.5, dampening=0.5)
    _step(opt, p, [2.0])  # buffer = 2
    _step(opt, p, [2.0])  # buffer = 0.5 * 2 + 0.5 * 2 = 2
    np.testing.assert_allclose(p.data, [-4.0])


def test_sgd_nesterov_looks_ahead_along_the_buffer():
    p = _param(1.0)
    opt = SGD([p], lr=0.1, momentum=0.9, nesterov=True)
    _step(opt, p, [1.0])  # buffer 1, step 1 + 0.9 * 1 = 1.9
    _step(opt, p, [1.0])  # buffer 1.9, step 1 + 0.9 * 1.9 = 2.71
    np.testing.assert_allclose(p.data, [1.0 - 0.19 - 0.271])


def test_sgd_weight_decay_adds_decay_times_the_parameter():
    p = _param(2.0)
    _step(SGD([p], lr=0.1, weight_decay=0.5), p, [1.0])  # g = 1 + 0.5 * 2 = 2
    np.testing.assert_allclose(p.data, [1.8])


def test_sgd_maximize_climbs():
    p = _param(1.0)
    _step(SGD([p], lr=0.1, maximize=True), p, [1.0])
    np.testing.assert_allclose(p.data, [1.1])


def test_sgd_maximize_negates_the_gradient_before_weight_decay():
    p = _param(1.0)
    _step(SGD([p], lr=0.1, weight_decay=0.5, maximize=True), p, [0.0])  # g = -0 + 0.5 * 1
    np.testing.assert_allclose(p.data, [0.95])  # torch's value: decay still shrinks p


def test_sgd_maximize_with_nesterov_and_weight_decay_follows_torch_step_by_step():
    p = _param(1.0)
    opt = SGD([p], lr=0.1, momentum=0.9, weight_decay=0.5, nesterov=True, maximize=True)
    # step 1: g = -1 + 0.5 * 1 = -0.5, buffer -0.5, step -0.5 + 0.9 * -0.5 = -0.95
    # step 2: g = -1 + 0.5 * 1.095 = -0.4525, buffer 0.9 * -0.5 + g = -0.9025,
    #         step g + 0.9 * -0.9025 = -1.26475 (torch.optim.SGD gives the same p and buffer)
    for expected_p, expected_buffer in [(1.095, -0.5), (1.221475, -0.9025)]:
        _step(opt, p, [1.0])
        np.testing.assert_allclose(p.data, [expected_p])
        np.testing.assert_allclose(opt.state[p]["momentum_buffer"], [expected_buffer])


@pytest.mark.parametrize("options", [
    dict(momentum=0.9), dict(momentum=0.9, dampening=0.3), dict(momentum=0.9, nesterov=True),
    dict(weight_decay=0.5), dict(momentum=0.9, weight_decay=0.5, nesterov=True),
], ids=str)
def test_sgd_maximize_is_minimizing_the_negated_gradient(options):
    rng = np.random.default_rng(0)
    up, down = _param(1.0, -2.0), _param(1.0, -2.0)
    climbing = SGD([up], lr=0.1, maximize=True, **options)
    descending = SGD([down], lr=0.1, **options)
    for _ in range(4):
        grad = rng.standard_normal(2)
        _step(climbing, up, grad)
        _step(descending, down, -grad)
        np.testing.assert_allclose(up.data, down.data, rtol=0, atol=1e-15)


def test_sgd_rejects_nesterov_without_momentum():
    with pytest.raises(ValueError, match="Nesterov"):
        SGD([_param(1.0)], lr=0.1, nesterov=True)


def test_adam_two_steps_follow_the_bias_corrected_rule():
    p = _param(1.0)
    opt = Adam([p], lr=0.1)
    _step(opt, p, [1.0])
    # step 1: m = 0.1, v = 0.001, m_hat = 1, v_hat = 1 -> p -= 0.1 * 1 / (1 + 1e-8)
    expected = 1.0 - 0.1 / (1.0 + 1e-8)
    np.testing.assert_allclose(p.data, [expected])
    _step(opt, p, [3.0])
    m = 0.9 * 0.1 + 0.1 * 3.0                    # 0.39
    v = 0.999 * 0.001 + 0.001 * 9.0              # 0.009999
    m_hat, v_hat = m / (1 - 0.9 ** 2), v / (1 - 0.999 ** 2)
    expected -= 0.1 * m_hat / (np.sqrt(v_hat) + 1e-8)
    np.testing.assert_allclose(p.data, [expected], rtol=1e-12)


def test_adam_weight_decay_is_added_to_the_gradient():
    p = _param(2.0)
    _step(Adam([p], lr=0.1, weight_decay=0.5), p, [-1.0])  # g = -1 + 1 = 0
    np.testing.assert_allclose(p.data, [2.0])


def test_adam_amsgrad_keeps_the_largest_second_moment():
    p = _param(0.0)
    opt = Adam([p], lr=0.1, amsgrad=True)
    _step(opt, p, [3.0])
    after_first = p.data.copy()
    _step(opt, p, [0.0])
    m = 0.9 * 0.1 * 3.0
    v_max = 0.001 * 9.0                          # larger than 0.999 * 0.009
    step = 0.1 * (m / (1 - 0.81)) / (np.sqrt(v_max / (1 - 0.999 ** 2)) + 1e-8)
    np.testing.assert_allclose(p.data, after_first - step, rtol=1e-12)


def test_adamw_decays_the_parameter_before_the_adam_step():
    p = _param(2.0)
    _step(AdamW([p], lr=0.1, weight_decay=0.5), p, [1.0])
    np.testing.assert_allclose(p.data, [2.0 * (1 - 0.05) - 0.1 / (1 + 1e-8)])
    assert AdamW([_param(1.0)]).defaults["weight_decay"] == 1e-2


def test_param_groups_take_their_own_options_and_the_defaults():
    a, b = _param(1.0), _param(1.0)
    opt = SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    a.grad, b.grad = np.ones(1), np.ones(1)
    opt.step()
    np.testing.assert_allclose([a.data[0], b.data[0]], [0.9, 0.0])
    with pytest.raises(ValueError, match="more than one"):
        opt.add_param_group({"params": [a]})


def test_a_parameter_listed_twice_warns_as_in_torch_and_is_stepped_twice():
    p, q = _param(0.0), _param(0.0)
    with pytest.warns(UserWarning, match="^optimizer contains a parameter group with duplicate"):
        opt = SGD([p, p], lr=0.1)
    _step(opt, p, [1.0])
    np.testing.assert_allclose(p.data, [-0.2])  # torch.optim.SGD([p, p]) gives -0.2 too
    with pytest.warns(UserWarning, match="duplicate parameters"):
        opt.add_param_group({"params": [q, q]})
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [q]})


def test_parameters_without_gradients_are_skipped():
    a, b = _param(1.0), _param(1.0)
    _step(SGD([a, b], lr=0.1), a, [1.0])
    np.testing.assert_allclose(b.data, [1.0])


def test_step_can_read_gradients_from_a_mapping_instead_of_grad():
    p = _param(1.0)
    p.grad = np.array([100.0])
    SGD([p], lr=0.1).step(grads={p: np.array([1.0])})
    np.testing.assert_allclose(p.data, [0.9])


def test_zero_grad_sets_gradients_to_none_or_zero():
    p = _param(1.0)
    opt = SGD([p], lr=0.1)
    p.grad = np.ones(1)
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad, [0.0])
    opt.zero_grad()
    assert p.grad is None


def test_state_dict_round_trip_continues_identically():
    p, q = _param(1.0, -1.0), _param(1.0, -1.0)
    first, second = Adam([p], lr=0.1), Adam([q], lr=0.5)
    for grad in ([1.0, 2.0], [0.5, -1.0]):
        _step(first, p, grad)
        _step(second, q, grad)
    q.data[...] = p.data
    second.load_state_dict(first.state_dict())
    assert second.param_groups[0]["lr"] == 0.1
    _step(first, p, [1.0, 1.0])
    _step(second, q, [1.0, 1.0])
    np.testing.assert_array_equal(p.data, q.data)
    saved = first.state_dict()
    assert saved["param_groups"][0]["params"] == [0] and saved["state"][0]["step"] == 3


def test_closure_is_evaluated_with_grad_enabled():
    p = _param(3.0)
    opt = SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with engine.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 9.0
    np.testing.assert_allclose(p.data, [3.0 - 0.6])


def test_a_tensor_or_a_non_leaf_given_as_parameters_is_refused_with_torchs_messages():
    leaf = engine.ones(3, 2)  # iterating it would give its rows, leaves of their own
    with pytest.raises(TypeError, match="iterable of Tensors or dicts, but got a Tensor"):
        SGD(leaf, lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        SGD([engine.ones(2, requires_grad=True) * 2], lr=0.1)
