"""Shape helpers for gradients: undo numpy broadcasting, re-expand reductions."""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np


def unbroadcast(grad: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` over the axes numpy broadcasting added or stretched, back to ``shape``."""
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1
    )
    return grad.sum(axis=axes, keepdims=True).reshape(shape)


def reduced_shape(shape: Tuple[int, ...], axis: Any) -> Tuple[int, ...]:
    """``shape`` with the reduced ``axis`` (None: all, int or tuple) kept as size 1."""
    if axis is None:
        return (1,) * len(shape)
    axes = axis if isinstance(axis, tuple) else (axis,)
    ndim = len(shape)
    kept = {a % ndim for a in axes} if ndim else set()
    return tuple(1 if i in kept else n for i, n in enumerate(shape))


def expand_to(grad: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
    """A fresh array of ``shape`` filled by broadcasting ``grad`` (cheaper than broadcast_to)."""
    out = np.empty(shape, dtype=grad.dtype)
    out[...] = grad
    return out
