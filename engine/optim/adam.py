"""Adam and AdamW (torch's documented rules, amsgrad included)."""
from __future__ import annotations

from typing import Any, Dict, Iterable, Tuple

import numpy as np

from engine.optim.optimizer import Optimizer
from engine.tensor import Tensor


class Adam(Optimizer):
    """torch.optim.Adam's update, at step t::

        g = grad (negated when maximize) + weight_decay * p       (L2, Adam only)
        m = beta1 * m + (1 - beta1) * g ;  v = beta2 * v + (1 - beta2) * g**2
        v_max = max(v_max, v) when amsgrad (used in place of v below)
        p = p - lr * (m / (1 - beta1**t)) / (sqrt(v / (1 - beta2**t)) + eps)
    """

    decoupled_weight_decay = False

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False,
                 maximize: bool = False) -> None:
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError("lr, eps and weight_decay must be non-negative")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def update(self, param: Tensor, grad: np.ndarray, group: Dict[str, Any],
               state: Dict[str, Any]) -> None:
        lr, (beta1, beta2), decay = group["lr"], group["betas"], group["weight_decay"]
        if group["maximize"]:
            grad = -grad
        if decay:
            if self.decoupled_weight_decay:
                param.data *= 1 - lr * decay
            else:
                grad = grad + decay * param.data
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(param.data)
            state["exp_avg_sq"] = np.zeros_like(param.data)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = np.zeros_like(param.data)
        state["step"] += 1
        t = state["step"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m *= beta1
        m += (1 - beta1) * grad
        v *= beta2
        v += (1 - beta2) * grad * grad
        if group["amsgrad"]:
            np.maximum(state["max_exp_avg_sq"], v, out=state["max_exp_avg_sq"])
            v = state["max_exp_avg_sq"]
        denom = np.sqrt(v / (1 - beta2 ** t))
        denom += group["eps"]
        param.data -= (lr / (1 - beta1 ** t)) * (m / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p = p * (1 - lr * weight_decay)`` before the
    Adam step, which then uses the raw gradient (torch.optim.AdamW; default decay 1e-2)."""

    decoupled_weight_decay = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False,
                 maximize: bool = False) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize)

