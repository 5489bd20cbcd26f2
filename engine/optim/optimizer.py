"""``Optimizer``: parameter groups, per-parameter state, ``step``/``zero_grad``/``state_dict``.

Subclasses implement ``update(param, grad, group, state)`` for one parameter; the
base class finds each parameter's gradient through ``read_gradient`` only, so the
distributed optimizer can run a local optimizer on a context's gradients:
``optimizer.step(grads=dist_autograd.get_gradients(context_id))``.
Updates are in place on ``param.data``.
"""
from __future__ import annotations

import copy
import warnings
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

import numpy as np

from engine.autograd.grad_mode import no_grad
from engine.tensor import Tensor

Gradients = Mapping[Tensor, np.ndarray]


def read_gradient(param: Tensor, grads: Optional[Gradients] = None) -> Optional[np.ndarray]:
    """The gradient ``step`` uses for ``param``: ``grads[param]`` when a mapping is given,
    else ``param.grad`` (None: the parameter is skipped)."""
    if grads is None:
        return param.grad
    return grads.get(param)


def non_negative(**numbers: float) -> Dict[str, float]:
    """`numbers`, each checked as torch's optimizers check theirs: ValueError for a
    negative one."""
    for name, value in numbers.items():
        if value < 0:
            raise ValueError(f"Invalid {name} value: {value}")
    return numbers


def penalized(param: Tensor, grad: np.ndarray, group: Dict[str, Any]) -> np.ndarray:
    """The gradient that torch's SGD, RMSprop and Adagrad step with: negated under
    ``maximize``, plus ``weight_decay * param`` (an L2 penalty) when it is set."""
    if group["maximize"]:
        grad = -grad
    if group["weight_decay"]:
        grad = grad + group["weight_decay"] * param.data
    return grad


class Optimizer:
    """Base class: holds ``param_groups`` (dicts with ``params`` and hyper-parameters)."""

    def __init__(self, params: Iterable[Any], defaults: Dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.state: Dict[Tensor, Dict[str, Any]] = {}
        self.param_groups: List[Dict[str, Any]] = []
        if isinstance(params, Tensor):  # list() would make each of its rows a parameter
            raise TypeError("params argument given to the optimizer should be an iterable "
                            "of Tensors or dicts, but got a Tensor")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: Dict[str, Any]) -> None:
        """Add a group; options it does not set take the optimizer's defaults.

        A parameter listed twice in the group is a UserWarning (as in torch) and is
        updated twice per step; one already in another group is a ValueError.
        """
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for param in params:
            if not isinstance(param, Tensor):
                raise TypeError(f"optimizers take leaf Tensors, got {type(param).__name__}")
            if not param.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor (an op's output); "
                                 "optimize the leaves it was computed from")
        if len({id(p) for p in params}) != len(params):
            # torch 2.x warns and keeps them (an error is planned, pytorch/pytorch#40967);
            # the message starts as torch's so the same warning filters apply
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "each is updated once per time it is listed", UserWarning,
                          stacklevel=2)
        known = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in known for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        full = {**self.defaults, **group, "params": params}
        self.param_groups.append(full)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of all parameters (``grad = None``, or zero in place)."""
        for group in self.param_groups:
            for param in group["params"]:
                if set_to_none:
                    param.grad = None
                elif param.grad is not None:
                    param.grad.fill(0)

    def step(self, closure: Optional[Callable[[], Any]] = None,
             grads: Optional[Gradients] = None) -> Any:
        """Update every parameter that has a gradient; returns ``closure()``'s loss if given.

        ``grads`` maps parameters to gradients to use instead of ``.grad``.
        """
        loss = None
        if closure is not None:
            from engine.autograd.grad_mode import enable_grad

            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for param in group["params"]:
                    grad = read_gradient(param, grads)
                    if grad is not None:
                        self.update(param, np.asarray(grad), group,
                                    self.state.setdefault(param, {}))
        return loss

    def update(self, param: Tensor, grad: np.ndarray, group: Dict[str, Any],
               state: Dict[str, Any]) -> None:
        """Apply one step to ``param.data`` in place (subclasses)."""
        raise NotImplementedError

    # -- state ----------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """torch's layout: ``state`` keyed by parameter index, ``param_groups`` with indices."""
        index: Dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            ids = []
            for param in group["params"]:
                index.setdefault(id(param), len(index))
                ids.append(index[id(param)])
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        state = {index[id(p)]: copy.deepcopy(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore hyper-parameters and per-parameter state saved by ``state_dict``."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"state_dict has {len(saved_groups)} parameter groups, "
                             f"optimizer has {len(self.param_groups)}")
        by_index: Dict[int, Tensor] = {}
        for saved, group in zip(saved_groups, self.param_groups):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError("a parameter group's size differs from the saved state")
            by_index.update(zip(saved["params"], group["params"]))
            group.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {by_index[int(i)]: copy.deepcopy(s)
                      for i, s in state_dict["state"].items()}

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for n, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {n}")
            lines.extend(f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params")
        return "\n".join(lines + [")"])
