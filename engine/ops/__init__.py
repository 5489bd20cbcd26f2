"""Differentiable ops, each a small ``Op`` unit; importing this package binds the
operators and methods onto ``Tensor``."""
from engine.ops import methods as _methods  # noqa: F401  (binds Tensor operators)
from engine.ops.arithmetic import add, div, mul, neg, pow, sub
from engine.broadcasting import unbroadcast
from engine.ops.core import Op, OpNode
from engine.ops.indexing import getitem, where
from engine.ops.linalg import linear, matmul
from engine.ops.loss import nll_loss
from engine.ops.pointwise import abs, cast, clip, exp, log, relu, sigmoid, sqrt, tanh
from engine.ops.reduction import argmax, argmin, log_softmax, max, mean, min, softmax, sum
from engine.ops.shape import (concatenate, flatten, reshape, squeeze, stack, transpose,
                              unsqueeze)

__all__ = [
    "Op", "OpNode", "unbroadcast",
    "add", "sub", "mul", "div", "neg", "pow", "matmul", "linear",
    "exp", "log", "sqrt", "abs", "relu", "tanh", "sigmoid", "clip", "cast",
    "sum", "mean", "max", "min", "argmax", "argmin", "softmax", "log_softmax",
    "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "concatenate", "stack",
    "getitem", "where", "nll_loss",
]
