"""Loss primitives that are one op rather than a composition: nll_loss, and the
elementwise binary cross entropy with logits."""
from __future__ import annotations

import numpy as np

from engine.ops.core import Op, as_array, binary, unary
from engine.ops.shape import reshape
from engine.tensor import Tensor, TensorLike

REDUCTIONS = ("mean", "sum", "none")


def check_reduction(reduction: str) -> None:
    """ValueError unless `reduction` is one of REDUCTIONS, as torch's losses say."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, not {reduction!r}")
TORCH_IGNORE_INDEX = -100


class NLLLoss(Op):
    @staticmethod
    def forward(log_probs, target, reduction):
        rows = np.arange(len(target))
        picked = log_probs[rows, target]
        if reduction == "none":
            out = -picked
        else:
            out = picked.sum() * -_weight(len(rows), reduction)
        return out, (log_probs.shape, rows, target, reduction)

    @staticmethod
    def backward(saved, grad, needs):
        shape, rows, target, reduction = saved
        out = np.zeros(shape, dtype=grad.dtype)
        out[rows, target] = grad * -_weight(len(rows), reduction)
        return (out,)


class BCEWithLogits(Op):
    @staticmethod
    def forward(logits, target):
        # max(x, 0) - x * y + log(1 + exp(-|x|)): log(1 + exp(-x)) + (1 - y) * x without
        # overflow for large |x|
        out = np.maximum(logits, 0) - logits * target + np.log1p(np.exp(-np.abs(logits)))
        return out, (logits, target)

    @staticmethod
    def backward(saved, grad, needs):
        logits, target = saved
        probability = 0.5 * (np.tanh(0.5 * logits) + 1)  # sigmoid without overflow warnings
        return (grad * (probability - target) if needs[0] else None,
                grad * -logits if needs[1] else None)


def _weight(count: int, reduction: str) -> float:
    """What each sample's loss counts for: 1 / N in a mean, nan for an empty batch (whose
    mean torch makes nan too), else 1."""
    if reduction != "mean":
        return 1.0
    return 1.0 / count if count else np.nan


def _check_shapes(shape: tuple, target_shape: tuple) -> None:
    # numpy indexing would broadcast a target of another shape against the rows (an
    # (N, 1) target, one of another length) and return a number instead of an error
    if len(shape) == 2 and target_shape != shape[:1]:
        raise ValueError(f"nll_loss: log_probs of shape {shape} take a target of shape "
                         f"({shape[0]},), one class index per row, not {target_shape}")
    if len(shape) == 1 and target_shape != ():
        raise ValueError(f"nll_loss: log_probs of shape {shape} take a 0-d target (one "
                         f"class index), not one of shape {target_shape}")
    if len(shape) not in (1, 2):
        raise ValueError(f"nll_loss takes log_probs of shape (N, C) or (C,), not {shape}")


def _check_classes(target: np.ndarray, classes: int) -> None:
    # numpy indexing would read a negative target from the end, so a -100 meant as torch's
    # ignore_index would silently become class 100 (or the last class for -1)
    outside = target[(target < 0) | (target >= classes)]
    if (outside == TORCH_IGNORE_INDEX).any():
        raise IndexError(
            f"Target {TORCH_IGNORE_INDEX} is out of bounds: ignore_index (torch's default "
            f"{TORCH_IGNORE_INDEX}) is not supported; leave those samples out of the batch")
    if outside.size:
        raise IndexError(f"Target {outside.flat[0]} is out of bounds for {classes} classes")


def nll_loss(log_probs: TensorLike, target: TensorLike, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of integer class ``target`` (N,) under ``log_probs`` (N, C).

    A single sample may be given as ``log_probs`` (C,) and a scalar target; any other
    shapes raise ValueError. A target outside ``[0, C)`` raises IndexError: there is no
    ``ignore_index``.
    """
    check_reduction(reduction)
    target = np.asarray(as_array(target))
    if target.dtype.kind not in "iu":
        raise TypeError(f"nll_loss target must hold integer class indices, not {target.dtype}")
    shape = np.shape(as_array(log_probs))
    _check_shapes(shape, target.shape)
    _check_classes(target, shape[-1])
    if target.ndim == 0:
        loss = unary(NLLLoss, reshape(log_probs, (1, -1)), target.reshape(1), reduction)
        return reshape(loss, ()) if reduction == "none" else loss
    return unary(NLLLoss, log_probs, target, reduction)



def binary_cross_entropy_with_logits_elementwise(logits: TensorLike, target: TensorLike
                                                 ) -> Tensor:
    """``-(y * log(sigmoid(x)) + (1 - y) * log(1 - sigmoid(x)))`` for each element, computed
    from the logits ``x`` without overflow; ``logits`` and ``target`` have one shape."""
    if np.shape(as_array(logits)) != np.shape(as_array(target)):
        raise ValueError(f"binary_cross_entropy_with_logits: target size "
                         f"{np.shape(as_array(target))} must be the same as input size "
                         f"{np.shape(as_array(logits))}")
    return binary(BCEWithLogits, logits, target)
