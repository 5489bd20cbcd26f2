"""An MLP learns a generated two-spirals data set."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import nn
from engine.nn import functional as F

pytestmark = pytest.mark.timeout(60)


def two_spirals(n_per_arm: int, noise: float, rng: np.random.Generator):
    """Two interleaved spiral arms of 1.5 turns in [-1, 1]^2, labels 0 and 1."""
    t = np.sqrt(rng.uniform(0, 1, n_per_arm)) * 3 * np.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / (3 * np.pi)
    x = np.concatenate([arm, -arm]) + rng.normal(0, noise, (2 * n_per_arm, 2))
    y = np.repeat(np.array([0, 1]), n_per_arm)
    return x.astype(np.float32), y


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    with engine.no_grad():
        return float((model(engine.from_numpy(x)).data.argmax(axis=1) == y).mean())


def test_mlp_learns_two_spirals_to_at_least_95_percent_held_out_accuracy():
    engine.manual_seed(0)
    x, y = two_spirals(200, 0.04, np.random.default_rng(0))
    x_test, y_test = two_spirals(200, 0.04, np.random.default_rng(1))
    model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 2))
    optimizer = engine.optim.Adam(model.parameters(), lr=0.01)
    inputs = engine.from_numpy(x)
    assert accuracy(model, x_test, y_test) < 0.75
    losses = []
    for _ in range(400):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]
    assert accuracy(model, x_test, y_test) >= 0.95
