"""One-input elementwise functions: exp, log, sqrt, abs, relu, tanh, sigmoid, clip, and
the dtype conversion cast."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from engine.broadcasting import unbroadcast
from engine.ops.core import Op, nary, unary
from engine.tensor import Tensor, TensorLike


class Exp(Op):
    @staticmethod
    def forward(x):
        out = np.exp(x)
        return out, out

    @staticmethod
    def backward(out, grad, needs):
        return (grad * out,)


class Log(Op):
    @staticmethod
    def forward(x):
        return np.log(x), x

    @staticmethod
    def backward(x, grad, needs):
        return (grad / x,)


class Sqrt(Op):
    @staticmethod
    def forward(x):
        out = np.sqrt(x)
        return out, out

    @staticmethod
    def backward(out, grad, needs):
        return (grad / (out + out),)


class Abs(Op):
    @staticmethod
    def forward(x):
        return np.abs(x), x

    @staticmethod
    def backward(x, grad, needs):
        return (grad * np.sign(x),)


class Relu(Op):
    @staticmethod
    def forward(x):
        out = np.maximum(x, 0)
        return out, out

    @staticmethod
    def backward(out, grad, needs):
        return (grad * (out > 0),)


class Tanh(Op):
    @staticmethod
    def forward(x):
        out = np.tanh(x)
        return out, out

    @staticmethod
    def backward(out, grad, needs):
        return (grad * (1 - out * out),)


class Sigmoid(Op):
    @staticmethod
    def forward(x):
        out = np.tanh(x * 0.5)  # 1 / (1 + exp(-x)) without overflow warnings
        out += 1
        out *= 0.5
        return out, out

    @staticmethod
    def backward(out, grad, needs):
        return (grad * out * (1 - out),)


class Clip(Op):
    @staticmethod
    def forward(arrays):
        x, low, high = arrays
        return np.clip(x, low, high), (x, low, high)

    @staticmethod
    def backward(saved, grad, needs):
        x, low, high = saved
        # torch's clamp rule: x keeps the gradient where it ties a bound, and where
        # low > high the result is high, so high gets it there rather than low
        takes_low = takes_high = None
        if low is None:
            takes_x, takes_high = x <= high, x > high
        elif high is None:
            takes_x, takes_low = x >= low, x < low
        else:
            takes_x = (x >= low) & (x <= high)
            takes_low = (x < low) & (low < high)
            takes_high = (x > high) | (high < low)
        return tuple(unbroadcast(np.where(takes, grad, 0), np.shape(array)) if need else None
                     for need, takes, array in zip(needs, (takes_x, takes_low, takes_high), saved))


class Cast(Op):
    @staticmethod
    def forward(x, dtype):
        return x.astype(dtype), x.dtype

    @staticmethod
    def backward(dtype, grad, needs):
        return (grad.astype(dtype),)


def exp(x: TensorLike) -> Tensor:
    """``e ** x`` elementwise."""
    return unary(Exp, x)


def log(x: TensorLike) -> Tensor:
    """Natural logarithm, elementwise."""
    return unary(Log, x)


def sqrt(x: TensorLike) -> Tensor:
    """Square root, elementwise."""
    return unary(Sqrt, x)


def abs(x: TensorLike) -> Tensor:  # noqa: A001 - torch's name
    """Absolute value; its gradient at 0 is 0 (``sign``), as in torch."""
    return unary(Abs, x)


def relu(x: TensorLike) -> Tensor:
    """``max(x, 0)``; gradient 0 at 0, as in torch."""
    return unary(Relu, x)


def tanh(x: TensorLike) -> Tensor:
    """Hyperbolic tangent, elementwise."""
    return unary(Tanh, x)


def sigmoid(x: TensorLike) -> Tensor:
    """Logistic function ``1 / (1 + e ** -x)``, elementwise."""
    return unary(Sigmoid, x)


def clip(x: TensorLike, min: Optional[TensorLike] = None,  # noqa: A002 - torch/numpy names
         max: Optional[TensorLike] = None) -> Tensor:  # noqa: A002
    """Limit values to ``[min, max]`` (``max`` wins where ``min > max``), as torch's ``clamp``.

    The gradient passes to ``x`` where ``min <= x <= max``, and to a bound that is a
    Tensor where ``x`` lies beyond it (to ``max`` alone where ``min > max``).
    """
    if min is None and max is None:
        raise ValueError("clip needs at least one of min and max")
    return nary(Clip, [x, min, max])


def cast(x: TensorLike, dtype: Any) -> Tensor:
    """The values converted to ``dtype`` (``x.float()``, ``x.long()`` and the like, torch's
    ``x.to(dtype)``). The gradient flows back converted to ``x``'s dtype; a conversion
    to an integer or bool dtype is outside any graph, as torch's."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        return Tensor(np.asarray(x.data if isinstance(x, Tensor) else x).astype(dtype))
    return unary(Cast, x, dtype)
