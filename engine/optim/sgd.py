"""SGD with momentum, dampening, Nesterov momentum and L2 weight decay (torch's rule)."""
from __future__ import annotations

from typing import Any, Dict, Iterable

import numpy as np

from engine.optim.optimizer import Optimizer, penalized
from engine.tensor import Tensor


class SGD(Optimizer):
    """torch.optim.SGD's update::

        g = grad (negated when maximize) + weight_decay * p
        b = g (first step), else momentum * b + (1 - dampening) * g
        g = g + momentum * b if nesterov else b          (when momentum != 0)
        p = p - lr * g
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 maximize: bool = False) -> None:
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError("lr, momentum and weight_decay must be non-negative")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum needs momentum > 0 and dampening = 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def update(self, param: Tensor, grad: np.ndarray, group: Dict[str, Any],
               state: Dict[str, Any]) -> None:
        grad = penalized(param, grad, group)
        momentum = group["momentum"]
        if momentum:
            buffer = state.get("momentum_buffer")
            if buffer is None:
                buffer = state["momentum_buffer"] = np.array(grad, copy=True)
            else:
                buffer *= momentum
                buffer += (1 - group["dampening"]) * grad
            grad = grad + momentum * buffer if group["nesterov"] else buffer
        param.data -= group["lr"] * grad
