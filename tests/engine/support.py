"""Helpers shared by the engine tests."""
from __future__ import annotations

import numpy as np

import engine


def leaf64(rng: np.random.Generator, shape, positive: bool = False) -> engine.Tensor:
    """A float64 leaf requiring grad; values in [0.5, 1.5] when ``positive``."""
    data = rng.uniform(0.5, 1.5, shape) if positive else rng.standard_normal(shape)
    return engine.tensor(np.asarray(data, dtype=np.float64), requires_grad=True)
