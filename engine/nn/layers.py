"""Layers: Linear, Sequential, ReLU, LeakyReLU, Tanh, Sigmoid, Identity, Dropout, Flatten,
LayerNorm, Embedding."""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Iterator, Sequence, Union

import numpy as np

from engine.nn import functional as F
from engine.nn.module import Module
from engine.nn.parameter import Parameter
from engine.ops.shape import flatten
from engine.rng import generator
from engine.tensor import Tensor


class Linear(Module):
    """``y = x @ weight.T + bias``; weight is (out_features, in_features), as in torch.

    Weight and bias start uniform in ``±1/sqrt(in_features)`` (torch's default).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 dtype: Any = np.float32) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        rng = generator()
        self.weight = Parameter(
            rng.uniform(-bound, bound, (out_features, in_features)).astype(dtype))
        self.bias = (Parameter(rng.uniform(-bound, bound, out_features).astype(dtype))
                     if bias else None)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Sequential(Module):
    """Run the given modules in order, each on the previous one's output.

    ``Sequential(a, b)`` names them "0", "1"; ``Sequential(OrderedDict(name=module...))``
    gives its own names, as torch's.
    """

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            named = list(modules[0].items())
        else:
            named = [(str(index), module) for index, module in enumerate(modules)]
        for name, module in named:
            self.add_module(name, module)

    def forward(self, x: Any) -> Any:
        for module in self._modules.values():
            x = module(x)
        return x

    def __getitem__(self, index: Union[int, slice]) -> Any:
        if isinstance(index, slice):  # the slice keeps the names, as torch's
            return Sequential(OrderedDict(list(self._modules.items())[index]))
        return list(self._modules.values())[index]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


class ReLU(Module):
    """Elementwise ``max(x, 0)``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class LeakyReLU(Module):
    """Elementwise ``x`` where positive, ``negative_slope * x`` elsewhere."""

    def __init__(self, negative_slope: float = 0.01) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class Identity(Module):
    """Returns its input (a placeholder, as torch's)."""

    def forward(self, x: Any) -> Any:
        return x


class Tanh(Module):
    """Elementwise hyperbolic tangent."""

    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Sigmoid(Module):
    """Elementwise logistic function."""

    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class Dropout(Module):
    """Zero elements with probability ``p`` while training; identity in eval mode."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], not {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Flatten(Module):
    """Merge the axes from ``start_dim`` to ``end_dim`` into one (by default every axis
    but the batch's), as torch's."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return flatten(x, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class LayerNorm(Module):
    """Normalise over the last axes (``normalized_shape``), then scale and shift by the
    learned ``weight`` (ones) and ``bias`` (zeros), as torch's."""

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True,
                 dtype: Any = np.float32) -> None:
        super().__init__()
        shape = ((normalized_shape,) if isinstance(normalized_shape, (int, np.integer))
                 else tuple(normalized_shape))
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter(np.ones(shape, dtype)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(shape, dtype)) if elementwise_affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class Embedding(Module):
    """A table of ``num_embeddings`` learned vectors of ``embedding_dim``, looked up by
    integer index; the weight starts standard normal, as torch's. No ``padding_idx``,
    ``max_norm`` or sparse gradients."""

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype: Any = np.float32) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(
            generator().standard_normal((num_embeddings, embedding_dim)).astype(dtype))

    def forward(self, indices: Any) -> Tensor:
        return F.embedding(indices, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
