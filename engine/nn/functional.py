"""Stateless layer functions and losses (``engine.nn.functional``, torch's ``F``)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from engine.ops import (abs, getitem, linear, log_softmax, mean, nll_loss, relu, sigmoid,
                        softmax, sqrt, sum, tanh, where)
from engine.ops.core import as_array
from engine.ops.loss import binary_cross_entropy_with_logits_elementwise, check_reduction
from engine.rng import generator
from engine.tensor import Tensor, TensorLike

__all__ = ["linear", "relu", "leaky_relu", "tanh", "sigmoid", "softmax", "log_softmax",
           "dropout", "layer_norm", "embedding",
           "mse_loss", "l1_loss", "nll_loss", "cross_entropy", "binary_cross_entropy_with_logits"]


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], not {p}")
    if not training or p == 0.0:
        return x
    keep = generator().random(x.shape) >= p
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return x * (keep * np.asarray(scale, dtype=x.dtype))


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``x`` where positive, ``negative_slope * x`` elsewhere (gradient ``negative_slope``
    at 0, as torch's)."""
    return where(as_array(x) > 0, x, x * negative_slope)


def layer_norm(x: Tensor, normalized_shape: Sequence[int], weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the last ``len(normalized_shape)`` axes to mean 0 and (biased)
    variance 1, then scale by ``weight`` and shift by ``bias``, as torch's."""
    shape = tuple(normalized_shape)
    if np.shape(as_array(x))[-len(shape):] != shape:
        raise ValueError(f"layer_norm: input of shape {np.shape(as_array(x))} does not end "
                         f"with normalized_shape {shape}")
    axes = tuple(range(-len(shape), 0))
    centred = x - mean(x, axis=axes, keepdims=True)
    out = centred / sqrt(mean(centred * centred, axis=axes, keepdims=True) + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def embedding(indices: TensorLike, weight: Tensor) -> Tensor:
    """The rows of ``weight`` at the integer ``indices`` (any shape); a row picked several
    times gets the sum of their gradients."""
    index = np.asarray(as_array(indices))
    if index.dtype.kind not in "iu":
        raise TypeError(f"embedding indices must be integers, not {index.dtype}")
    rows = np.shape(as_array(weight))[0]
    if index.size and (index.min() < 0 or index.max() >= rows):  # numpy would count a
        # negative index from the end; torch refuses it
        raise IndexError(f"embedding index out of range: indices must be in [0, {rows})")
    return getitem(weight, index)


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return sum(loss)
    check_reduction(reduction)
    return loss


def _difference(input: TensorLike, target: TensorLike, name: str) -> Tensor:  # noqa: A002
    """``input - target`` of two tensors of one shape (ValueError otherwise: broadcasting
    would silently compare the wrong elements)."""
    if np.shape(as_array(input)) != np.shape(as_array(target)):
        raise ValueError(
            f"{name} input {np.shape(as_array(input))} and target "
            f"{np.shape(as_array(target))} must have the same shape"
        )
    return input - target if isinstance(input, Tensor) else Tensor(np.asarray(input)) - target


def mse_loss(input: TensorLike, target: TensorLike, reduction: str = "mean") -> Tensor:  # noqa: A002
    """Squared error ``(input - target) ** 2``, averaged (or summed) over all elements."""
    diff = _difference(input, target, "mse_loss")
    return _reduce(diff * diff, reduction)


def l1_loss(input: TensorLike, target: TensorLike, reduction: str = "mean") -> Tensor:  # noqa: A002
    """Absolute error ``|input - target|``, averaged (or summed) over all elements; its
    gradient is 0 where they are equal, as torch's."""
    return _reduce(abs(_difference(input, target, "l1_loss")), reduction)


def cross_entropy(logits: TensorLike, target: TensorLike, reduction: str = "mean") -> Tensor:
    """Cross entropy of integer class ``target`` (N,) given unnormalised ``logits`` (N, C).

    One sample may be given as ``logits`` (C,) and a scalar target.
    """
    ndim = np.ndim(as_array(logits))
    if ndim not in (1, 2):
        raise ValueError(f"cross_entropy takes logits of shape (N, C) or (C,), not {ndim}-D")
    return nll_loss(log_softmax(logits, axis=-1), target, reduction)


def binary_cross_entropy_with_logits(logits: TensorLike, target: TensorLike,
                                     reduction: str = "mean") -> Tensor:
    """Binary cross entropy of probabilities ``target`` given ``logits`` (the same shape),
    computed from the logits without overflow, as torch's; no ``weight`` or
    ``pos_weight``."""
    check_reduction(reduction)  # before the op runs, as the other losses
    return _reduce(binary_cross_entropy_with_logits_elementwise(logits, target), reduction)
