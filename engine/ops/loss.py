"""Loss primitives that are one op rather than a composition: nll_loss."""
from __future__ import annotations

import numpy as np

from engine.ops.core import Op, as_array, unary
from engine.ops.shape import reshape
from engine.tensor import Tensor, TensorLike

REDUCTIONS = ("mean", "sum", "none")


class NLLLoss(Op):
    @staticmethod
    def forward(log_probs, target, reduction):
        rows = np.arange(len(target))
        picked = log_probs[rows, target]
        if reduction == "none":
            out = -picked
        else:
            out = picked.sum() * (-1 / len(rows) if reduction == "mean" else -1)
        return out, (log_probs.shape, rows, target, reduction)

    @staticmethod
    def backward(saved, grad, needs):
        shape, rows, target, reduction = saved
        out = np.zeros(shape, dtype=grad.dtype)
        scale = -grad / len(rows) if reduction == "mean" else -grad
        out[rows, target] = scale
        return (out,)


def nll_loss(log_probs: TensorLike, target: TensorLike, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of integer class ``target`` (N,) under ``log_probs`` (N, C).

    A single sample may be given as ``log_probs`` (C,) and a scalar target.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, not {reduction!r}")
    target = np.asarray(as_array(target))
    if target.dtype.kind not in "iu":
        raise TypeError(f"nll_loss target must hold integer class indices, not {target.dtype}")
    if target.ndim == 0:
        loss = unary(NLLLoss, reshape(log_probs, (1, -1)), target.reshape(1), reduction)
        return reshape(loss, ()) if reduction == "none" else loss
    return unary(NLLLoss, log_probs, target, reduction)

