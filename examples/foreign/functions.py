"""The functions the foreign clients call by name: plain numpy, exposed with `actors.expose`.

Served by ``python -m actors.worker --no-pickle --import examples.foreign.functions``.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

import actors


@actors.expose("scale")
def scale(values: np.ndarray, factor: float) -> np.ndarray:
    """`values` times `factor`, in the dtype it came in."""
    return (values * factor).astype(values.dtype)


@actors.expose("stats")
def stats(values: np.ndarray) -> Dict[str, float]:
    """Summary statistics of an array of any shape."""
    return {"mean": float(values.mean()), "std": float(values.std()),
            "min": float(values.min()), "max": float(values.max()), "count": int(values.size)}
