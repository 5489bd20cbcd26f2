"""Selecting elements: getitem (basic and integer-array indexing) and where."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.broadcasting import unbroadcast
from engine.ops.core import Op, as_array, binary, unary
from engine.tensor import Tensor, TensorLike

_BASIC = (int, np.integer, slice, type(None), type(Ellipsis))


def _is_basic(index: Any) -> bool:
    """True when ``index`` selects a view (ints, slices, None, ...), so no element repeats."""
    if isinstance(index, tuple):
        return all(isinstance(i, _BASIC) for i in index)
    return isinstance(index, _BASIC)


def _normalize(index: Any) -> Any:
    """Replace Tensors inside an index by their arrays, and lists by int arrays."""
    if isinstance(index, tuple):
        return tuple(_normalize(i) for i in index)
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, list):
        return np.asarray(index)
    return index


class GetItem(Op):
    @staticmethod
    def forward(x, index):
        return x[index], (x.shape, index, _is_basic(index))

    @staticmethod
    def backward(saved, grad, needs):
        shape, index, basic = saved
        out = np.zeros(shape, dtype=grad.dtype)
        if basic:
            out[index] = grad
        else:  # repeated indices must add up
            np.add.at(out, index, grad)
        return (out,)


class Where(Op):
    @staticmethod
    def forward(a, b, condition):
        return np.where(condition, a, b), (a, b, condition)

    @staticmethod
    def backward(saved, grad, needs):
        a, b, condition = saved
        return (unbroadcast(np.where(condition, grad, 0), np.shape(a)) if needs[0] else None,
                unbroadcast(np.where(condition, 0, grad), np.shape(b)) if needs[1] else None)


def getitem(x: TensorLike, index: Any) -> Tensor:
    """``x[index]`` with numpy semantics (basic, integer-array and boolean indexing)."""
    return unary(GetItem, x, _normalize(index))


def where(condition: TensorLike, a: TensorLike, b: TensorLike) -> Tensor:
    """Elements of ``a`` where ``condition`` holds, else of ``b`` (broadcasting)."""
    return binary(Where, a, b, as_array(condition))
