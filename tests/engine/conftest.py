"""Shared fixtures for the engine tests."""
from __future__ import annotations

import numpy as np
import pytest

import engine


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded numpy generator (and a seeded engine generator)."""
    engine.manual_seed(1234)
    return np.random.default_rng(1234)
