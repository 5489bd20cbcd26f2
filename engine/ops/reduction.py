"""Reductions along axes: sum, mean, max, min, softmax, log_softmax, and the indices
argmax and argmin (not differentiable).

``axis`` is None (all axes), an int or a tuple of ints, as in numpy.  ``max`` and
``min`` split the gradient evenly between tied extremes (torch's ``amax`` rule).
"""
from __future__ import annotations

from typing import Optional, Tuple, Union

import numpy as np

from engine.broadcasting import expand_to, reduced_shape
from engine.ops.core import Op, as_array, unary
from engine.tensor import Tensor, TensorLike

Axis = Optional[Union[int, Tuple[int, ...]]]


class Sum(Op):
    @staticmethod
    def forward(x, axis, keepdims):
        return np.sum(x, axis=axis, keepdims=keepdims), (x.shape, axis)

    @staticmethod
    def backward(saved, grad, needs):
        shape, axis = saved
        return (expand_to(grad.reshape(reduced_shape(shape, axis)), shape),)


class Mean(Op):
    @staticmethod
    def forward(x, axis, keepdims):
        if not x.size:  # torch's nan, without numpy's "Mean of empty slice" warnings; the
            # gradient is empty, whatever it is divided by
            return np.sum(x, axis=axis, keepdims=keepdims) * np.nan, (x.shape, axis, 1)
        out = np.mean(x, axis=axis, keepdims=keepdims)
        return out, (x.shape, axis, x.size // np.size(out))

    @staticmethod
    def backward(saved, grad, needs):
        shape, axis, count = saved
        return (expand_to(grad.reshape(reduced_shape(shape, axis)) / count, shape),)


class Max(Op):
    reduce = staticmethod(np.max)

    @classmethod
    def forward(cls, x, axis, keepdims):
        out = cls.reduce(x, axis=axis, keepdims=keepdims)
        return out, (x, out, axis)

    @staticmethod
    def backward(saved, grad, needs):
        x, out, axis = saved
        kept = reduced_shape(x.shape, axis)
        hits = x == np.reshape(out, kept)
        share = grad.reshape(kept) / np.sum(hits, axis=axis, keepdims=True, dtype=grad.dtype)
        return (hits * share,)


class Min(Max):
    reduce = staticmethod(np.min)


class Softmax(Op):
    @staticmethod
    def forward(x, axis):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        e /= e.sum(axis=axis, keepdims=True)
        return e, (e, axis)

    @staticmethod
    def backward(saved, grad, needs):
        out, axis = saved
        return (out * (grad - (grad * out).sum(axis=axis, keepdims=True)),)


class LogSoftmax(Op):
    @staticmethod
    def forward(x, axis):
        shifted = x - x.max(axis=axis, keepdims=True)
        shifted -= np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
        return shifted, (shifted, axis)

    @staticmethod
    def backward(saved, grad, needs):
        out, axis = saved
        return (grad - np.exp(out) * grad.sum(axis=axis, keepdims=True),)


def sum(x: TensorLike, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Sum over ``axis`` (all axes by default)."""
    return unary(Sum, x, axis, keepdims)


def mean(x: TensorLike, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Arithmetic mean over ``axis`` (all axes by default)."""
    return unary(Mean, x, axis, keepdims)


def max(x: TensorLike, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Largest value over ``axis``; ties share the gradient evenly."""
    return unary(Max, x, axis, keepdims)


def min(x: TensorLike, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Smallest value over ``axis``; ties share the gradient evenly."""
    return unary(Min, x, axis, keepdims)


def softmax(x: TensorLike, axis: int = -1) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis``, computed stably."""
    return unary(Softmax, x, axis)


def log_softmax(x: TensorLike, axis: int = -1) -> Tensor:
    """``log(softmax(x))`` along ``axis``, computed stably."""
    return unary(LogSoftmax, x, axis)


def argmax(x: TensorLike, axis: Optional[int] = None, keepdims: bool = False) -> Tensor:
    """Index of the largest value along ``axis`` (of the flattened tensor by default), an
    int64 tensor outside any graph; the first of tied values, and NaN counts as largest,
    as in torch."""
    return Tensor(np.argmax(as_array(x), axis=axis, keepdims=keepdims).astype(np.int64))


def argmin(x: TensorLike, axis: Optional[int] = None, keepdims: bool = False) -> Tensor:
    """Index of the smallest value along ``axis`` (of the flattened tensor by default), an
    int64 tensor outside any graph; the first of tied values, and NaN counts as smallest,
    as in torch."""
    return Tensor(np.argmin(as_array(x), axis=axis, keepdims=keepdims).astype(np.int64))
