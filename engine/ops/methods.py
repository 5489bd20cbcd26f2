"""Bind the ops to ``Tensor`` as operators and methods (``a + b``, ``t.sum()``, ``t.T``).

Every binding calls the same module-level op function a user can call directly;
reflected operators (``2 * t``, ``1 - t``) swap the arguments.  Comparisons are
elementwise and not differentiable: they return a tensor of bools.

In-place forms (``t += x``, ``t[i] = x``) write into ``t.data`` and are allowed only
where no graph would have to be recorded (grad mode off, or neither ``t`` nor ``x``
requiring grad); otherwise they raise, since there are no version counters to keep
saved arrays honest and no node to carry ``x``'s gradient.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Iterator

import numpy as np

from engine.ops import arithmetic, indexing, linalg, pointwise, reduction, shape
from engine.ops.core import as_array
from engine.tensor import Tensor


def _reflected(fn: Callable[[Any, Any], Tensor], name: str, symbol: str
               ) -> Callable[[Any, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return fn(other, self)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``other {symbol} self``: {fn.__name__} with the arguments swapped."
    return method


def _comparison(compare: Callable[[Any, Any], Any], name: str, symbol: str
                ) -> Callable[[Any, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return Tensor(np.asarray(compare(self.data, as_array(other))))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``self {symbol} other`` elementwise: a tensor of bools, not differentiable."
    return method


def _in_place(ufunc: np.ufunc, name: str) -> Callable[[Any, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        self._check_in_place(other)
        ufunc(self.data, as_array(other), out=self.data, casting="same_kind")
        return self

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place ``{name}`` on the data (not recorded in any graph)."
    return method


def _setitem(self: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value`` on the data (not recorded in any graph)."""
    self._check_in_place(value)
    self.data[index] = as_array(value)


def _iterate(self: Tensor) -> Iterator[Tensor]:
    """Iterate over the first axis (each item is ``self[i]``, recorded like any getitem)."""
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (indexing.getitem(self, i) for i in range(len(self)))


def _flatten_shape(args: tuple) -> Any:
    """``t.reshape(2, 3)`` and ``t.reshape((2, 3))`` both mean shape (2, 3)."""
    return args[0] if len(args) == 1 and not isinstance(args[0], (int, np.integer)) else args


def _reshape(self: Tensor, *dims: Any) -> Tensor:
    """Same data in a new shape: ``t.reshape(2, 3)`` or ``t.reshape((2, 3))``."""
    return shape.reshape(self, _flatten_shape(dims))


def _permute(self: Tensor, *dims: Any) -> Tensor:
    """torch's ``permute``: the axes in the given order (``transpose(axes)`` here)."""
    return shape.transpose(self, _flatten_shape(dims))


def _view(self: Tensor, *dims: Any) -> Tensor:
    """torch's ``view``: ``reshape`` here (a copy where numpy must copy, never an error
    for a non-contiguous tensor)."""
    return shape.reshape(self, _flatten_shape(dims))


def _view_as(self: Tensor, other: Tensor) -> Tensor:
    """Same data in ``other``'s shape."""
    return shape.reshape(self, other.shape)


def _converter(dtype: Any, name: str) -> Callable[[Tensor], Tensor]:
    def method(self: Tensor) -> Tensor:
        return pointwise.cast(self, dtype)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"The values as {np.dtype(dtype).name} (``cast``), as torch's ``{name}()``."
    return method


def names_the_cpu(device: Any) -> bool:
    """Whether `device` is torch's name of the CPU ("cpu", "cpu:0"), the one device here."""
    return isinstance(device, str) and device.split(":")[0] == "cpu"


def _to(self: Tensor, target: Any) -> Tensor:
    """torch's ``to``: a dtype converts (``cast``); the device "cpu" (where every tensor
    lives) returns the tensor itself; any other device is a ValueError."""
    if names_the_cpu(target):
        return self
    if isinstance(target, str):
        raise ValueError(f"to({target!r}): tensors live on the CPU only")
    return pointwise.cast(self, target)


def _cpu(self: Tensor) -> Tensor:
    """The tensor itself: every tensor lives on the CPU (torch's ``cpu()`` of a CPU tensor)."""
    return self


def _transpose(self: Tensor, *axes: Any) -> Tensor:
    """Permute axes as ``ndarray.transpose`` (reverse them when none are given)."""
    return shape.transpose(self, _flatten_shape(axes) if axes else None)

OPERATORS = {
    "__add__": arithmetic.add,
    "__radd__": _reflected(arithmetic.add, "__radd__", "+"),
    "__sub__": arithmetic.sub,
    "__rsub__": _reflected(arithmetic.sub, "__rsub__", "-"),
    "__mul__": arithmetic.mul,
    "__rmul__": _reflected(arithmetic.mul, "__rmul__", "*"),
    "__truediv__": arithmetic.div,
    "__rtruediv__": _reflected(arithmetic.div, "__rtruediv__", "/"),
    "__pow__": arithmetic.pow,
    "__rpow__": _reflected(arithmetic.pow, "__rpow__", "**"),
    "__matmul__": linalg.matmul,
    "__rmatmul__": _reflected(linalg.matmul, "__rmatmul__", "@"),
    "__neg__": arithmetic.neg,
    "__abs__": pointwise.abs,
    "__getitem__": indexing.getitem,
    "__lt__": _comparison(operator.lt, "__lt__", "<"),
    "__le__": _comparison(operator.le, "__le__", "<="),
    "__gt__": _comparison(operator.gt, "__gt__", ">"),
    "__ge__": _comparison(operator.ge, "__ge__", ">="),
    "__eq__": _comparison(operator.eq, "__eq__", "=="),
    "__ne__": _comparison(operator.ne, "__ne__", "!="),
    "__iadd__": _in_place(np.add, "__iadd__"),
    "__isub__": _in_place(np.subtract, "__isub__"),
    "__imul__": _in_place(np.multiply, "__imul__"),
    "__itruediv__": _in_place(np.true_divide, "__itruediv__"),
    "__setitem__": _setitem,
    "__iter__": _iterate,
}

COMPARISONS = {name: _comparison(compare, name, symbol) for name, compare, symbol in [
    ("eq", operator.eq, "=="), ("ne", operator.ne, "!="), ("lt", operator.lt, "<"),
    ("le", operator.le, "<="), ("gt", operator.gt, ">"), ("ge", operator.ge, ">=")]}

CONVERSIONS = {name: _converter(dtype, name) for name, dtype in [
    ("float", np.float32), ("double", np.float64), ("long", np.int64), ("int", np.int32),
    ("bool", np.bool_)]}

METHODS = {
    "add": arithmetic.add, "sub": arithmetic.sub, "mul": arithmetic.mul,
    "div": arithmetic.div, "pow": arithmetic.pow, "neg": arithmetic.neg,
    "matmul": linalg.matmul,
    "exp": pointwise.exp, "log": pointwise.log, "sqrt": pointwise.sqrt,
    "abs": pointwise.abs, "relu": pointwise.relu, "tanh": pointwise.tanh,
    "sigmoid": pointwise.sigmoid, "clip": pointwise.clip, "cast": pointwise.cast,
    "sum": reduction.sum, "mean": reduction.mean, "max": reduction.max,
    "min": reduction.min, "softmax": reduction.softmax,
    "log_softmax": reduction.log_softmax,
    "argmax": reduction.argmax, "argmin": reduction.argmin,
    "reshape": _reshape, "view": _view, "view_as": _view_as, "flatten": shape.flatten,
    "squeeze": shape.squeeze, "unsqueeze": shape.unsqueeze, "permute": _permute,
    "to": _to, "cpu": _cpu,
    "transpose": _transpose,
}


def bind() -> None:
    """Attach the operators, methods, comparisons and conversions to Tensor (idempotent)."""
    for name, fn in {**OPERATORS, **METHODS, **COMPARISONS, **CONVERSIONS}.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(shape.transpose, doc="All axes reversed, as ``ndarray.T``.")
    Tensor.__hash__ = object.__hash__  # elementwise __eq__ must not drop identity hashing


bind()
