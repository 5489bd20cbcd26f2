"""RMSprop (torch's rule: momentum, centered, weight decay, maximize)."""
from __future__ import annotations

from typing import Any, Dict, Iterable

import numpy as np

from engine.optim.optimizer import Optimizer, non_negative, penalized
from engine.tensor import Tensor


class RMSprop(Optimizer):
    """torch.optim.RMSprop's update::

        g = grad (negated when maximize) + weight_decay * p
        v = alpha * v + (1 - alpha) * g**2
        avg = sqrt(v - m**2) + eps, m = alpha * m + (1 - alpha) * g   when centered
        avg = sqrt(v) + eps                                           otherwise
        b = momentum * b + g / avg ;  p = p - lr * b                  when momentum > 0
        p = p - lr * g / avg                                          otherwise
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False, maximize: bool = False) -> None:
        numbers = non_negative(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                               momentum=momentum)
        super().__init__(params, dict(numbers, centered=centered, maximize=maximize))

    def update(self, param: Tensor, grad: np.ndarray, group: Dict[str, Any],
               state: Dict[str, Any]) -> None:
        alpha, momentum = group["alpha"], group["momentum"]
        grad = penalized(param, grad, group)
        if not state:
            state["step"] = 0
            state["square_avg"] = np.zeros_like(param.data)
            if momentum > 0:
                state["momentum_buffer"] = np.zeros_like(param.data)
            if group["centered"]:
                state["grad_avg"] = np.zeros_like(param.data)
        state["step"] += 1
        square_avg = state["square_avg"]
        square_avg *= alpha
        square_avg += (1 - alpha) * grad * grad
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg *= alpha
            grad_avg += (1 - alpha) * grad
            avg = np.sqrt(square_avg - grad_avg * grad_avg)
        else:
            avg = np.sqrt(square_avg)
        avg += group["eps"]
        if momentum > 0:
            buffer = state["momentum_buffer"]
            buffer *= momentum
            buffer += grad / avg
            param.data -= group["lr"] * buffer
        else:
            param.data -= group["lr"] * (grad / avg)
