"""`OptimizerWrapper(manager, optimizer)`: an optimizer whose steps commit or not.

`zero_grad()` starts the step's quorum (so it overlaps forward and backward);
`step()` applies the update only if the manager says every member of the quorum
finished the step, and returns whether it did (torchft's contract: a step that does
not commit changes nothing here, and nothing anywhere else either). torchft refuses a
closure; here it runs before the vote, so its gradients are the step's.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from engine.autograd.grad_mode import enable_grad
from engine.optim.optimizer import Optimizer

from .manager import Manager


class OptimizerWrapper:
    """`optimizer`, stepping only on the steps that `manager` commits."""

    def __init__(self, manager: Manager, optimizer: Optimizer):
        self.manager, self.optimizer = manager, optimizer
        manager.register_optimizer(optimizer)

    @property
    def param_groups(self) -> list:
        """The wrapped optimizer's parameter groups (so learning-rate schedules work unchanged)."""
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Start this step's quorum, then clear the gradients."""
        self.manager.start_quorum()
        self.optimizer.zero_grad(set_to_none)

    def step(self, closure: Optional[Callable[[], Any]] = None) -> bool:
        """Apply the update if the step commits; whether it did. A `closure` (torch's
        pattern: clear the gradients, forward, backward) runs first: its all-reduce is
        part of the step voted on, so a failure there fails the step on every member."""
        if closure is not None:
            with enable_grad():
                closure()
        if not self.manager.should_commit():
            return False
        self.optimizer.step()
        return True

    def state_dict(self) -> Dict[str, Any]:
        """The wrapped optimizer's state, as its ``state_dict`` returns it."""
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Load `state_dict` into the wrapped optimizer."""
        self.optimizer.load_state_dict(state_dict)
