"""`OptimizerWrapper(manager, optimizer)`: an optimizer whose steps commit or not.

`zero_grad()` starts the step's quorum (so it overlaps forward and backward);
`step()` applies the update only if the manager says every member of the quorum
finished the step, and returns whether it did (torchft's contract: a step that does
not commit changes nothing here, and nothing anywhere else either).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

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
        """Apply the update if the step commits; whether it did."""
        if not self.manager.should_commit():
            return False
        self.optimizer.step(closure)
        return True

    def state_dict(self) -> Dict[str, Any]:
        """The wrapped optimizer's state, as its ``state_dict`` returns it."""
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Load `state_dict` into the wrapped optimizer."""
        self.optimizer.load_state_dict(state_dict)
