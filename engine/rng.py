"""The engine's random number generator (factories, ``nn`` initialisation, dropout)."""
from __future__ import annotations

from typing import Optional

import numpy as np

_generator = np.random.default_rng()


def manual_seed(seed: Optional[int]) -> np.random.Generator:
    """Reseed the engine's generator (None: fresh entropy) and return it."""
    global _generator
    _generator = np.random.default_rng(seed)
    return _generator


def generator() -> np.random.Generator:
    """The generator factories draw from."""
    return _generator
