"""nn.init's formulas (gains, fans, bounds, spreads) against torch's, and Module.apply."""
from __future__ import annotations

import math

import numpy as np
import pytest

import engine
from engine import nn
from engine.nn import init

pytestmark = pytest.mark.timeout(60)

GAINS = [("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None),
         ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None), ("conv2d", None)]


@pytest.mark.parametrize("nonlinearity, param", GAINS)
def test_calculate_gain_is_torchs(nonlinearity, param):
    # torch 2.13's values
    expected = {"tanh": 5 / 3, "relu": math.sqrt(2), "selu": 0.75,
                "leaky_relu": math.sqrt(2 / (1 + (0.01 if param is None else param) ** 2))}
    assert init.calculate_gain(nonlinearity, param) == expected.get(nonlinearity, 1.0)
    try:
        import torch
    except ImportError:
        return
    assert init.calculate_gain(nonlinearity, param) == \
        torch.nn.init.calculate_gain(nonlinearity, param)


@pytest.mark.parametrize("name, kwargs, bound, std", [
    # weight (200, 100, 3): fan_in 300, fan_out 600
    ("xavier_uniform_", dict(gain=2.0), 2 * math.sqrt(6 / 900), None),
    ("xavier_normal_", dict(), None, math.sqrt(2 / 900)),
    ("kaiming_uniform_", dict(a=math.sqrt(5)), math.sqrt(6 / (1 + 5)) / math.sqrt(300), None),
    ("kaiming_uniform_", dict(mode="fan_out", nonlinearity="relu"), math.sqrt(6 / 600), None),
    ("kaiming_normal_", dict(nonlinearity="relu"), None, math.sqrt(2 / 300)),
    ("uniform_", dict(a=-0.3, b=0.3), 0.3, None),
    ("normal_", dict(mean=0.0, std=0.02), None, 0.02),
])
def test_each_initialiser_draws_from_torchs_distribution(name, kwargs, bound, std):
    engine.manual_seed(0)
    weight = nn.Parameter(np.zeros((200, 100, 3), dtype=np.float32))
    assert getattr(init, name)(weight, **kwargs) is weight
    assert weight.dtype == np.float32 and weight.requires_grad and weight.grad_fn is None
    values = weight.data
    if bound is not None:  # uniform: inside the bound, up to it, a spread of bound / sqrt(3)
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.999 * bound
        std = bound / math.sqrt(3)
    assert abs(values.std() / std - 1) < 0.01 and abs(values.mean()) < 0.01 * std
    try:
        import torch
    except ImportError:
        return
    theirs = getattr(torch.nn.init, name)(torch.zeros(200, 100, 3), **kwargs).numpy()
    assert abs(values.std() / theirs.std() - 1) < 0.02


def test_fills_and_refusals_are_torchs():
    weight = nn.Parameter(np.ones((2, 3)))
    assert init.zeros_(weight).data.tolist() == [[0.0] * 3] * 2
    assert init.constant_(weight, 0.5).data.tolist() == [[0.5] * 3] * 2
    assert init.ones_(weight).data.tolist() == [[1.0] * 3] * 2
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(nn.Parameter(np.zeros(3)))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(weight, mode="fan_avg")
    with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
        init.calculate_gain("gelu")


def test_apply_visits_children_before_their_parent_as_torch_and_initialises():
    model = nn.Sequential(nn.Linear(4, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 2)))
    visited = []
    assert model.apply(lambda m: visited.append(type(m).__name__)) is model
    # torch 2.13's order for the same model
    assert visited == ["Linear", "ReLU", "Linear", "Sequential", "Sequential"]

    def initialise(module):
        if isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            init.constant_(module.bias, 0.01)

    model.apply(initialise)
    assert model[1][1].bias.data.tolist() == pytest.approx([0.01, 0.01])
