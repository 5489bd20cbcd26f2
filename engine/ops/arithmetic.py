"""Broadcasting arithmetic: add, sub, mul, div, neg, pow."""
from __future__ import annotations

import numpy as np

from engine.broadcasting import unbroadcast
from engine.ops.core import Op, binary, unary
from engine.tensor import Tensor, TensorLike


class Add(Op):
    @staticmethod
    def forward(a, b):
        return a + b, (a, b)

    @staticmethod
    def backward(saved, grad, needs):
        a, b = saved
        return (unbroadcast(grad, a.shape) if needs[0] else None,
                unbroadcast(grad, b.shape) if needs[1] else None)


class Sub(Op):
    @staticmethod
    def forward(a, b):
        return a - b, (a, b)

    @staticmethod
    def backward(saved, grad, needs):
        a, b = saved
        return (unbroadcast(grad, a.shape) if needs[0] else None,
                unbroadcast(-grad, b.shape) if needs[1] else None)


class Mul(Op):
    @staticmethod
    def forward(a, b):
        return a * b, (a, b)

    @staticmethod
    def backward(saved, grad, needs):
        a, b = saved
        return (unbroadcast(grad * b, a.shape) if needs[0] else None,
                unbroadcast(grad * a, b.shape) if needs[1] else None)


class Div(Op):
    @staticmethod
    def forward(a, b):
        return a / b, (a, b)

    @staticmethod
    def backward(saved, grad, needs):
        a, b = saved
        grad_a = grad / b
        return (unbroadcast(grad_a, a.shape) if needs[0] else None,
                unbroadcast(-grad_a * a / b, b.shape) if needs[1] else None)


class Neg(Op):
    @staticmethod
    def forward(x):
        return -x, None

    @staticmethod
    def backward(saved, grad, needs):
        return (-grad,)


class Pow(Op):
    @staticmethod
    def forward(a, b):
        out = a ** b
        return out, (a, b, out)

    @staticmethod
    def backward(saved, grad, needs):
        a, b, out = saved
        grad_a = grad_b = None
        # torch's convention at a zero base: d/da is 0 where b == 0 (a ** 0 is constant) and
        # d/db is 0 where a == 0 and b >= 0, instead of the 0 * inf = nan of the formulas;
        # numpy would warn about those products although np.where discards them.
        with np.errstate(divide="ignore", invalid="ignore"):
            if needs[0]:
                grad_a = np.where(b == 0, 0, grad * b * a ** (b - 1))
                grad_a = unbroadcast(grad_a, a.shape)
            if needs[1]:  # in out's dtype, so a Python-scalar base keeps float32 float32
                log_a = np.log(a, dtype=out.dtype)
                grad_b = np.where((a == 0) & (b >= 0), 0, grad * out * log_a)
                grad_b = unbroadcast(grad_b, b.shape)
        return grad_a, grad_b


def add(a: TensorLike, b: TensorLike) -> Tensor:
    """``a + b`` with numpy broadcasting."""
    return binary(Add, a, b)


def sub(a: TensorLike, b: TensorLike) -> Tensor:
    """``a - b`` with numpy broadcasting."""
    return binary(Sub, a, b)


def mul(a: TensorLike, b: TensorLike) -> Tensor:
    """``a * b`` elementwise, with numpy broadcasting."""
    return binary(Mul, a, b)


def div(a: TensorLike, b: TensorLike) -> Tensor:
    """``a / b`` elementwise, with numpy broadcasting."""
    return binary(Div, a, b)


def neg(x: TensorLike) -> Tensor:
    """``-x``."""
    return unary(Neg, x)


def pow(a: TensorLike, b: TensorLike) -> Tensor:  # noqa: A001 - torch's name
    """``a ** b`` elementwise; the gradient for ``b`` needs ``a > 0``, or ``a == 0`` and
    ``b >= 0`` (where it is 0, as in torch)."""
    return binary(Pow, a, b)
