"""Making tensors: ``tensor``, ``from_numpy``, ``zeros``, ``ones``, ``rand``, ``randn``,
their ``*_like`` forms, and ``arange``.

Factories default to float32, as in torch.  ``tensor(ndarray)`` copies and keeps the
array's dtype, and so does ``tensor`` of a numpy scalar; ``tensor`` of Python floats
gives float32, of Python ints int64.
``from_numpy`` shares the array instead of copying it.
"""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from engine.rng import generator
from engine.tensor import Tensor

DEFAULT_DTYPE = np.dtype(np.float32)


def _leaf(data: np.ndarray, requires_grad: bool) -> Tensor:
    t = Tensor(data)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _shape(dims: Tuple[Any, ...]) -> Tuple[int, ...]:
    """``zeros(2, 3)`` and ``zeros((2, 3))`` both mean shape (2, 3)."""
    if len(dims) == 1 and not isinstance(dims[0], (int, np.integer)):
        return tuple(dims[0])
    return tuple(dims)


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (array, nested lists, scalar or Tensor)."""
    if isinstance(data, Tensor):
        data = data.data
    # a numpy scalar (np.float64 is a float too) has its dtype, as an array: torch keeps it
    if isinstance(data, (np.ndarray, np.generic)) or dtype is not None:
        array = np.array(data, dtype=dtype, copy=True)
    else:
        array = np.array(data)
        if array.dtype == np.float64 and not _holds_float64(data):
            array = array.astype(DEFAULT_DTYPE)
    return _leaf(array, requires_grad)


def _holds_float64(data: Any) -> bool:
    """Whether nested lists hold a float64 numpy value: torch infers float64 from those
    and the default dtype from Python floats."""
    pending = [data]
    while pending:
        item = pending.pop()
        if isinstance(item, (list, tuple)):
            pending.extend(item)
        elif isinstance(item, (np.ndarray, np.generic)) and item.dtype == np.float64:
            return True
    return False


def from_numpy(array: np.ndarray, requires_grad: bool = False) -> Tensor:
    """A leaf tensor that shares ``array`` (no copy)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects an np.ndarray, not {type(array).__name__}")
    return _leaf(array, requires_grad)


def zeros(*shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros."""
    return _leaf(np.zeros(_shape(shape), dtype=dtype), requires_grad)


def ones(*shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False) -> Tensor:
    """A tensor of ones."""
    return _leaf(np.ones(_shape(shape), dtype=dtype), requires_grad)


def rand(*shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False) -> Tensor:
    """Uniform samples from [0, 1), drawn from the engine's generator (``manual_seed``)."""
    return _leaf(generator().random(_shape(shape), dtype=np.dtype(dtype).type), requires_grad)


def randn(*shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False) -> Tensor:
    """Standard normal samples, drawn from the engine's generator (``manual_seed``)."""
    dtype = np.dtype(dtype).type
    return _leaf(generator().standard_normal(_shape(shape), dtype=dtype), requires_grad)


def arange(start: Any, end: Any = None, step: Any = 1, *, dtype: Any = None,
           requires_grad: bool = False) -> Tensor:
    """``start, start + step, ...`` up to ``end`` excluded (``arange(n)``: 0 to n - 1), as
    torch's: int64 when every bound is an int, else float32, unless ``dtype`` says.

    With a fractional step the length is torch's and a value may differ from torch's in
    its last bit (torch's rounding depends on its vectorised loop).
    """
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    integral = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                   for v in (start, end, step))
    if dtype is None:
        dtype = np.int64 if integral else DEFAULT_DTYPE
    # in float64, then cast: the nearest to the exact values
    values = np.arange(start, end, step, dtype=np.int64 if integral else np.float64)
    return _leaf(values.astype(dtype), requires_grad)


def _like(factory: Any, other: Any, dtype: Any, requires_grad: bool) -> Tensor:
    dtype = other.dtype if dtype is None else dtype
    return factory(np.shape(other), dtype=dtype, requires_grad=requires_grad)


def zeros_like(other: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros with ``other``'s shape and (by default) dtype."""
    return _like(zeros, other, dtype, requires_grad)


def ones_like(other: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones with ``other``'s shape and (by default) dtype."""
    return _like(ones, other, dtype, requires_grad)


def rand_like(other: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Uniform [0, 1) samples with ``other``'s shape and (by default) dtype."""
    return _like(rand, other, dtype, requires_grad)


def randn_like(other: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples with ``other``'s shape and (by default) dtype."""
    return _like(randn, other, dtype, requires_grad)


__all__ = ["tensor", "from_numpy", "zeros", "ones", "rand", "randn", "arange",
           "zeros_like", "ones_like", "rand_like", "randn_like"]
