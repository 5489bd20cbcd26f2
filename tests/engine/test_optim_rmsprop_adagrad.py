"""RMSprop and Adagrad step by step against torch.optim's, every option they take."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.optim import Adagrad, RMSprop

pytestmark = pytest.mark.timeout(60)

START = [np.array([1.0, -2.0, 0.5]), np.array([[0.3], [-0.7]])]
STEPS = 6
# torch 2.13, float64: the first parameter after the last step of a _trajectory
EXPECTED_RMSPROP = [0.4393320438017937, -1.611001111743615, 0.09186622342133191]
EXPECTED_ADAGRAD = [0.7362011760680699, -1.8244273952441032, 0.3000378810792459]


def _gradients(step):
    rng = np.random.default_rng(step)
    return [rng.standard_normal(p.shape) for p in START]


def _trajectory(space, name, options):
    """The parameters after each of STEPS steps, two groups (the second at lr 0.003)."""
    if space is engine:
        params = [engine.nn.Parameter(p.copy()) for p in START]
    else:
        params = [space.tensor(p.copy(), requires_grad=True) for p in START]
    optimizer = getattr(space.optim, name)(
        [{"params": params[:1]}, {"params": params[1:], "lr": 0.003}], **options)
    seen = []
    for step in range(STEPS):
        for param, grad in zip(params, _gradients(step)):
            param.grad = grad if space is engine else space.tensor(grad)
        optimizer.step()
        seen.append([np.array(p.data if space is engine else p.detach().numpy())
                     for p in params])
    return seen, optimizer


RMSPROP = [dict(), dict(lr=0.05, alpha=0.9), dict(momentum=0.8), dict(centered=True),
           dict(centered=True, momentum=0.5, weight_decay=0.1),
           dict(maximize=True, weight_decay=0.01, eps=1e-3)]
ADAGRAD = [dict(), dict(lr=0.1, lr_decay=0.05), dict(weight_decay=0.2),
           dict(initial_accumulator_value=0.5, eps=1e-3), dict(maximize=True, lr_decay=0.01)]


@pytest.mark.parametrize("name, options", [("RMSprop", o) for o in RMSPROP] +
                         [("Adagrad", o) for o in ADAGRAD],
                         ids=[f"RMSprop-{o}" for o in RMSPROP] +
                         [f"Adagrad-{o}" for o in ADAGRAD])
def test_each_step_matches_torchs(name, options):
    torch = pytest.importorskip("torch")
    ours, our_optimizer = _trajectory(engine, name, options)
    theirs, their_optimizer = _trajectory(torch, name, options)
    for step, (mine, other) in enumerate(zip(ours, theirs)):
        for a, b in zip(mine, other):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14, err_msg=f"step {step}")
    our_state, their_state = our_optimizer.state_dict(), their_optimizer.state_dict()
    for index, state in our_state["state"].items():
        assert set(state) == set(their_state["state"][index])  # torch's names
        assert state["step"] == int(their_state["state"][index]["step"])
    for group, their_group in zip(our_state["param_groups"], their_state["param_groups"]):
        assert {k: v for k, v in group.items() if k in options} == \
            {k: their_group[k] for k in options}


def test_rmsprop_centered_with_momentum_gives_torchs_numbers():
    ours, _ = _trajectory(engine, "RMSprop", RMSPROP[4])
    np.testing.assert_allclose(ours[-1][0], EXPECTED_RMSPROP, rtol=1e-12)


def test_adagrad_with_decay_gives_torchs_numbers():
    ours, _ = _trajectory(engine, "Adagrad", ADAGRAD[1])
    np.testing.assert_allclose(ours[-1][0], EXPECTED_ADAGRAD, rtol=1e-12)


@pytest.mark.parametrize("make", [
    lambda p: RMSprop(p, lr=-1.0), lambda p: RMSprop(p, alpha=-0.1),
    lambda p: RMSprop(p, momentum=-0.5), lambda p: Adagrad(p, lr_decay=-1.0),
    lambda p: Adagrad(p, initial_accumulator_value=-1.0)])
def test_negative_hyperparameters_are_refused_as_torch_does(make):
    with pytest.raises(ValueError, match="Invalid"):
        make([engine.nn.Parameter(np.zeros(1))])


def test_options_torch_has_and_these_do_not_raise_instead_of_being_ignored():
    param = engine.nn.Parameter(np.zeros(1))
    with pytest.raises(TypeError):
        RMSprop([param], foreach=True)
    with pytest.raises(TypeError):
        Adagrad([param], fused=True)
