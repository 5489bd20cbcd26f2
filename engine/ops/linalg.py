"""Matrix products: matmul (numpy's rules, 1-D and batched) and the fused ``linear``."""
from __future__ import annotations

from typing import Optional

from engine.broadcasting import unbroadcast
from engine.ops.core import Op, binary, nary
from engine.tensor import Tensor, TensorLike


class MatMul(Op):
    @staticmethod
    def forward(a, b):
        return a @ b, (a, b)

    @staticmethod
    def backward(saved, grad, needs):
        a, b = saved
        if a.ndim == 1 and b.ndim == 1:  # dot product: grad is 0-d
            return (grad * b if needs[0] else None, grad * a if needs[1] else None)
        # Promote 1-D operands the way matmul does, so one batched rule covers all cases.
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        if a.ndim == 1:
            grad = grad[..., None, :]
        if b.ndim == 1:
            grad = grad[..., None]
        grad_a = grad_b = None
        if needs[0]:
            grad_a = unbroadcast(grad @ b2.swapaxes(-1, -2), a2.shape)
            if a.ndim == 1:
                grad_a = grad_a.reshape(a.shape)
        if needs[1]:
            grad_b = unbroadcast(a2.swapaxes(-1, -2) @ grad, b2.shape)
            if b.ndim == 1:
                grad_b = grad_b.reshape(b.shape)
        return grad_a, grad_b


class Linear(Op):
    @staticmethod
    def forward(arrays):
        x, weight, bias = arrays
        out = x @ weight.T
        if bias is not None:
            out += bias
        return out, (x, weight)

    @staticmethod
    def backward(saved, grad, needs):
        x, weight = saved
        grad_x = grad @ weight if needs[0] else None
        grad_w = grad_b = None
        if needs[1]:
            if grad.ndim == 2:
                grad_w = grad.T @ x
            else:  # 1-D or batched input: fold the leading axes into one
                grad_w = grad.reshape(-1, grad.shape[-1]).T @ x.reshape(-1, x.shape[-1])
        if needs[2]:
            grad_b = grad.sum(axis=0 if grad.ndim == 2 else tuple(range(grad.ndim - 1)))
        return grad_x, grad_w, grad_b


def matmul(a: TensorLike, b: TensorLike) -> Tensor:
    """Matrix product with numpy's ``@`` rules (1-D operands, broadcast batch axes)."""
    return binary(MatMul, a, b)


def linear(x: TensorLike, weight: TensorLike, bias: Optional[TensorLike] = None) -> Tensor:
    """``x @ weight.T + bias`` as one op; ``weight`` is (out_features, in_features)."""
    return nary(Linear, (x, weight, bias))
