"""Learning-rate schedulers (torch.optim.lr_scheduler's): StepLR, MultiStepLR,
ExponentialLR, CosineAnnealingLR and LambdaLR on an ``LRScheduler`` base, and
ReduceLROnPlateau, which follows a metric instead of the epochs.

A scheduler writes each parameter group's ``lr``; call its ``step()`` once per epoch,
after the optimizer's. The rules are torch's recursive ones (each new rate computed
from the group's current ``lr``, so a rate set by hand between steps is taken up, and
the numbers are torch's to the last bit); ``LambdaLR`` scales the initial rates.
"""
from __future__ import annotations

import math
import types
from collections import Counter
from typing import Any, Callable, Dict, Iterable, List, Sequence, Union

from engine.optim.optimizer import Optimizer


class LRScheduler:
    """Base class: subclasses compute the next rates in ``get_lr()``.

    Construction records each group's ``initial_lr`` (with ``last_epoch=-1``) and takes
    the first step, as torch's, so ``get_last_lr()`` holds the rates of epoch 0.
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for index, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups"
                                   f"[{index}] when resuming scheduler with last_epoch >= 0 "
                                   f"(load the optimizer's state_dict first)")
        self.base_lrs: List[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> List[float]:
        """The rates of epoch ``last_epoch``, one per parameter group (subclasses)."""
        raise NotImplementedError

    def _current(self) -> List[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def step(self) -> None:
        """Move to the next epoch and write its rates into the optimizer's groups.

        torch's deprecated ``step(epoch)`` is not here: restore a schedule with
        ``load_state_dict``.
        """
        self._step_count += 1
        self.last_epoch += 1
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr: List[float] = self._current()

    def get_last_lr(self) -> List[float]:
        """The rates the last ``step()`` (or the construction) wrote, one per group."""
        return self._last_lr

    def state_dict(self) -> Dict[str, Any]:
        """Every attribute but the optimizer (torch's keys: ``base_lrs``, ``last_epoch``,
        ``_step_count``, ``_last_lr`` and the scheduler's parameters)."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Take the attributes of a ``state_dict()`` (the optimizer's state is separate)."""
        self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """Multiply each group's rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> List[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]


class MultiStepLR(LRScheduler):
    """Multiply each group's rate by ``gamma`` at each epoch listed in ``milestones`` (by
    ``gamma ** n`` at an epoch listed n times)."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> List[float]:
        if self.last_epoch not in self.milestones:
            return self._current()
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [lr * factor for lr in self._current()]


class ExponentialLR(LRScheduler):
    """Multiply each group's rate by ``gamma`` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> List[float]:
        if self._is_initial:
            return self._current()
        return [lr * self.gamma for lr in self._current()]


class CosineAnnealingLR(LRScheduler):
    """Anneal each rate from its initial value to ``eta_min`` along half a cosine over
    ``T_max`` epochs, then back up over the next ``T_max`` (torch's SGDR without
    restarts)::

        lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> List[float]:
        epoch, period, low = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._current()
        if self._step_count == 1 and epoch > 0:  # resumed: the closed form
            return [low + (base - low) * (1 + math.cos(epoch * math.pi / period)) / 2
                    for base in self.base_lrs]
        if (epoch - 1 - period) % (2 * period) == 0:  # at the bottom: the ratio is 0 / 0
            return [lr + (base - low) * (1 - math.cos(math.pi / period)) / 2
                    for base, lr in zip(self.base_lrs, self._current())]
        ratio = (1 + math.cos(math.pi * epoch / period)) / (
            1 + math.cos(math.pi * (epoch - 1) / period))
        return [ratio * (lr - low) + low for lr in self._current()]


class LambdaLR(LRScheduler):
    """Each group's rate is its initial rate times ``lr_lambda(epoch)`` (one function
    for every group, or a list of one per group).

    ``state_dict()`` keeps the state of a callable object, and None for a plain
    function or lambda, as torch's.
    """

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Union[Callable[[int], float], Sequence[Callable[[int], float]]],
                 last_epoch: int = -1) -> None:
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but "
                                 f"got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> List[float]:
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> Dict[str, Any]:
        state = {key: value for key, value in self.__dict__.items()
                 if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(attributes)


class ReduceLROnPlateau(LRScheduler):
    """Multiply each group's rate by ``factor`` (not below its ``min_lr``) once the metric
    given to ``step(metric)`` has not improved for more than ``patience`` epochs, then
    wait ``cooldown`` epochs before counting again, as torch's.

    The metric improves when it beats the best by ``threshold``: relative
    (``best * (1 - threshold)`` in ``mode="min"``) or absolute (``best - threshold``).
    A reduction smaller than ``eps`` is skipped.
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: Union[float, Sequence[float]] = 0,
                 eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        groups = optimizer.param_groups
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(groups):
                raise ValueError(f"expected {len(groups)} min_lrs, got {len(min_lr)}")
            self.min_lrs = list(min_lr)
        else:
            self.min_lrs = [min_lr] * len(groups)
        self.optimizer, self.factor, self.patience, self.cooldown = (optimizer, factor,
                                                                     patience, cooldown)
        self.mode, self.threshold, self.threshold_mode, self.eps = (mode, threshold,
                                                                    threshold_mode, eps)
        self.last_epoch = 0
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self._last_lr = self._current()

    def get_lr(self) -> List[float]:
        """The groups' current rates (the metric, not the epoch, decides the next)."""
        return self._current()

    def step(self, metrics: Any) -> None:  # type: ignore[override]
        """Count one epoch whose metric was `metrics` (a number or a one-element tensor),
        and reduce the rates if it ends a plateau."""
        current = float(metrics)
        self.last_epoch += 1
        if self._is_better(current):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in the cooldown do not count
        if self.num_bad_epochs > self.patience:
            for group, low in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(group["lr"])
                new = max(old * self.factor, low)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self._current()

    def _is_better(self, current: float) -> bool:
        best, threshold = self.best, self.threshold
        if self.mode == "min":
            return current < (best * (1 - threshold) if self.threshold_mode == "rel"
                              else best - threshold)
        return current > (best * (1 + threshold) if self.threshold_mode == "rel"
                          else best + threshold)


__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR",
           "ReduceLROnPlateau"]
