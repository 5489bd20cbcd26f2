"""Parameter initialisation (torch.nn.init's): each function fills a tensor in place,
drawing from the engine's generator (``engine.manual_seed``), and returns it.

The tensor's data is written directly, outside any graph, as torch's functions run
under ``no_grad``; its dtype is kept. The formulas are torch's; the draws are not
(another generator), so weights match torch's in distribution, not in value.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from engine.rng import generator
from engine.tensor import Tensor

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: Optional[float] = None) -> float:
    """The gain torch recommends for `nonlinearity` (``leaky_relu`` takes its negative
    slope as `param`, 0.01 by default)."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fans(tensor: Tensor) -> Tuple[int, int]:
    """(fan_in, fan_out) of a weight of shape (out, in, *kernel), as torch's."""
    shape = tensor.shape
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than "
                         "2 dimensions")
    receptive = int(np.prod(shape[2:]))
    return shape[1] * receptive, shape[0] * receptive


def _fill(tensor: Tensor, values: np.ndarray) -> Tensor:
    tensor.data[...] = values
    return tensor


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill with draws from the uniform distribution on ``[a, b)``."""
    return _fill(tensor, generator().uniform(a, b, tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill with draws from the normal distribution of `mean` and `std`."""
    return _fill(tensor, generator().normal(mean, std, tensor.shape))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with `val`."""
    return _fill(tensor, val)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return _fill(tensor, 0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return _fill(tensor, 1)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot's uniform: ``U(-a, a)``, ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fans(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot's normal: ``N(0, std)``, ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(tensor)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu") -> Tensor:
    """He's uniform: ``U(-b, b)``, ``b = gain * sqrt(3 / fan)`` (`a`: leaky_relu's slope)."""
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu") -> Tensor:
    """He's normal: ``N(0, std)``, ``std = gain / sqrt(fan)`` (`a`: leaky_relu's slope)."""
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity))


__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]
