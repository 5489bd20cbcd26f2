"""Adagrad (torch's rule: learning-rate decay, weight decay, initial accumulator)."""
from __future__ import annotations

from typing import Any, Dict, Iterable

import numpy as np

from engine.optim.optimizer import Optimizer, non_negative, penalized
from engine.tensor import Tensor


class Adagrad(Optimizer):
    """torch.optim.Adagrad's update, at step t::

        g = grad (negated when maximize) + weight_decay * p
        s = s + g**2            (s starts at initial_accumulator_value)
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    torch fills each parameter's state at construction; here it is made at the
    parameter's first step, so ``state_dict()`` lists only parameters that have stepped.
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, maximize: bool = False) -> None:
        numbers = non_negative(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                               initial_accumulator_value=initial_accumulator_value, eps=eps)
        super().__init__(params, dict(numbers, maximize=maximize))

    def update(self, param: Tensor, grad: np.ndarray, group: Dict[str, Any],
               state: Dict[str, Any]) -> None:
        grad = penalized(param, grad, group)
        if not state:
            state["step"] = 0
            state["sum"] = np.full_like(param.data, group["initial_accumulator_value"])
        state["step"] += 1
        rate = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        total = state["sum"]
        total += grad * grad
        std = np.sqrt(total)
        std += group["eps"]
        param.data -= rate * (grad / std)
