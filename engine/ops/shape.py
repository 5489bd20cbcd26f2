"""Shape changes: reshape, flatten, squeeze, unsqueeze, transpose, concatenate, stack."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import numpy as np

from engine.ops.core import Op, as_array, nary, unary
from engine.tensor import Tensor, TensorLike


class Reshape(Op):
    @staticmethod
    def forward(x, shape):
        return x.reshape(shape), x.shape

    @staticmethod
    def backward(shape, grad, needs):
        return (grad.reshape(shape),)


class Transpose(Op):
    @staticmethod
    def forward(x, axes):
        return x.transpose(axes), axes

    @staticmethod
    def backward(axes, grad, needs):
        if axes is None:
            return (grad.transpose(),)
        # argsort inverts the permutation only once negative axes are counted from the end
        return (grad.transpose(np.argsort(np.mod(axes, grad.ndim))),)


class Concatenate(Op):
    @staticmethod
    def forward(arrays, axis):
        bounds = np.cumsum([a.shape[axis] for a in arrays[:-1]])
        return np.concatenate(arrays, axis=axis), (bounds, axis)

    @staticmethod
    def backward(saved, grad, needs):
        bounds, axis = saved
        return tuple(np.split(grad, bounds, axis=axis))


class Stack(Op):
    @staticmethod
    def forward(arrays, axis):
        return np.stack(arrays, axis=axis), axis

    @staticmethod
    def backward(axis, grad, needs):
        return tuple(np.moveaxis(grad, axis, 0))


def reshape(x: TensorLike, shape: Tuple[int, ...]) -> Tensor:
    """Same data in a new shape (one axis may be -1), as ``ndarray.reshape``."""
    return unary(Reshape, x, (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape))


def flatten(x: TensorLike, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge the axes from ``start_dim`` to ``end_dim`` (both included) into one, as
    ``torch.flatten``; a 0-d tensor becomes shape (1,)."""
    shape = np.shape(as_array(x))
    if not shape:
        return reshape(x, (1,))
    start, end = (_axis(d, len(shape), "flatten") for d in (start_dim, end_dim))
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    merged = int(np.prod(shape[start:end + 1]))  # not -1: ambiguous for an empty tensor
    return reshape(x, shape[:start] + (merged,) + shape[end + 1:])


def squeeze(x: TensorLike, dim: Optional[Union[int, Tuple[int, ...]]] = None) -> Tensor:
    """Drop the axes of length 1 (only those among ``dim`` when given; an axis of another
    length there stays, as torch's)."""
    shape = np.shape(as_array(x))
    if dim is None:
        dims = set(range(len(shape)))
    else:
        dims = {_axis(d, max(len(shape), 1), "squeeze")
                for d in ((dim,) if isinstance(dim, (int, np.integer)) else dim)}
    return reshape(x, tuple(n for i, n in enumerate(shape) if n != 1 or i not in dims))


def unsqueeze(x: TensorLike, dim: int) -> Tensor:
    """Insert an axis of length 1 at position ``dim`` (in ``[-ndim - 1, ndim]``)."""
    shape = np.shape(as_array(x))
    position = _axis(dim, len(shape) + 1, "unsqueeze")
    return reshape(x, shape[:position] + (1,) + shape[position:])


def _axis(dim: int, ndim: int, name: str) -> int:
    """``dim`` counted from the front, IndexError outside ``[-ndim, ndim)`` as torch's."""
    if not -ndim <= dim < ndim:
        raise IndexError(f"{name}: dimension {dim} is out of range for {ndim} dimensions")
    return dim % ndim


def transpose(x: TensorLike, axes: Optional[Sequence[int]] = None) -> Tensor:
    """Permute axes as ``numpy.transpose`` (reverse them by default)."""
    return unary(Transpose, x, None if axes is None else tuple(axes))


def concatenate(tensors: Sequence[TensorLike], axis: int = 0) -> Tensor:
    """Join tensors along an existing axis."""
    if not tensors:
        raise ValueError("concatenate needs at least one tensor")
    return nary(Concatenate, list(tensors), axis)


def stack(tensors: Sequence[TensorLike], axis: int = 0) -> Tensor:
    """Join same-shaped tensors along a new axis."""
    if not tensors:
        raise ValueError("stack needs at least one tensor")
    return nary(Stack, list(tensors), axis)
