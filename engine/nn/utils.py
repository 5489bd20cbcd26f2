"""Gradient clipping (torch.nn.utils'): ``clip_grad_norm_`` and ``clip_grad_value_``.

Both act on the ``.grad`` of each parameter that has one and skip the others. A
clipped gradient is a new array (``grad = grad * coef``), not written in place: the
engine never changes a gradient array under someone who read it (docs/ENGINE.md).
"""
from __future__ import annotations

from typing import Iterable, Union

import numpy as np

from engine.tensor import Tensor

Parameters = Union[Tensor, Iterable[Tensor]]


def _with_grads(parameters: Parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [param for param in parameters if param.grad is not None]


def clip_grad_norm_(parameters: Parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False) -> Tensor:
    """Scale the gradients by ``min(max_norm / (total_norm + 1e-6), 1)``, where
    ``total_norm`` is the ``norm_type``-norm of all of them taken together (``inf``: the
    largest magnitude); returns ``total_norm`` as a 0-d tensor, as torch's.

    A NaN or infinite norm scales the gradients by it unless ``error_if_nonfinite``,
    which raises RuntimeError and leaves them unchanged.
    """
    params = _with_grads(parameters)
    norm_type = float(norm_type)
    if not params:
        return Tensor(np.asarray(0.0, dtype=np.float32))
    norms = [np.linalg.norm(np.asarray(p.grad).ravel(), norm_type) for p in params]
    total = np.asarray(np.linalg.norm(np.asarray(norms), norm_type))
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            f"non-finite, so it cannot be clipped. To disable this error and scale the "
            f"gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    coef = np.minimum(float(max_norm) / (total + 1e-6), 1.0)
    with np.errstate(invalid="ignore"):  # an infinite norm: inf * 0 is NaN, as torch's
        for param in params:
            grad = np.asarray(param.grad)
            param.grad = grad * coef.astype(grad.dtype)
    return Tensor(total)


def clip_grad_value_(parameters: Parameters, clip_value: float) -> None:
    """Limit every gradient element to ``[-clip_value, clip_value]``, as torch's."""
    clip_value = float(clip_value)
    for param in _with_grads(parameters):
        grad = np.asarray(param.grad)
        param.grad = np.clip(grad, -clip_value, clip_value).astype(grad.dtype, copy=False)


__all__ = ["clip_grad_norm_", "clip_grad_value_"]
