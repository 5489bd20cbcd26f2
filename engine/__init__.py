"""actorgrad's local autograd engine: tensors on numpy, differentiable ops, ``nn`` and ``optim``.

    import engine
    x = engine.randn(4, 3, requires_grad=True)
    loss = (x @ engine.ones(3, 2)).relu().sum()
    loss.backward()            # x.grad is an ndarray of shape (4, 3)

This package never imports ``actors`` or ``store``.  Distributed autograd lives in
``engine.dist_autograd`` and builds on the hooks in ``engine.autograd.scheduler``.
"""
import numpy as _np

from engine.tensor import Tensor
from engine import ops  # binds operators and methods onto Tensor
from engine.autograd import (
    backward,
    enable_grad,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from engine.autograd.function import Function, FunctionCtx
from engine.autograd.gradcheck import gradcheck
from engine.errors import AutogradError, GradcheckError, GradientShapeError, GraphFreedError
from engine.factories import (
    arange,
    from_numpy,
    ones,
    ones_like,
    rand,
    rand_like,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from engine.ops import (
    abs,
    add,
    argmax,
    argmin,
    cast,
    clip,
    concatenate,
    div,
    exp,
    flatten,
    getitem,
    linear,
    log,
    log_softmax,
    matmul,
    max,
    mean,
    min,
    mul,
    neg,
    nll_loss,
    pow,
    relu,
    reshape,
    sigmoid,
    softmax,
    sqrt,
    squeeze,
    stack,
    sub,
    sum,
    tanh,
    transpose,
    unsqueeze,
    where,
)
from engine.rng import manual_seed
from engine.serialization import load, save
from engine import nn, optim

float32 = _np.float32
"""numpy's float32, the factories' default dtype, as torch's."""
float64 = _np.float64
"""numpy's float64."""
int64 = _np.int64
"""numpy's int64 (class indices for `nll_loss` and `cross_entropy`)."""

__all__ = [
    "Tensor", "tensor", "from_numpy", "zeros", "ones", "rand", "randn", "arange",
    "zeros_like", "ones_like", "rand_like", "randn_like", "manual_seed", "save", "load",
    "float32", "float64", "int64",
    "add", "sub", "mul", "div", "neg", "pow", "matmul", "linear",
    "exp", "log", "sqrt", "abs", "relu", "tanh", "sigmoid", "clip", "cast",
    "sum", "mean", "max", "min", "argmax", "argmin", "softmax", "log_softmax",
    "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "concatenate", "stack",
    "getitem", "where", "nll_loss",
    "backward", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
    "Function", "FunctionCtx", "gradcheck",
    "AutogradError", "GraphFreedError", "GradientShapeError", "GradcheckError",
    "nn", "optim", "ops",
]
