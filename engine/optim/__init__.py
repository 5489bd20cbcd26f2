"""Optimizers: SGD, Adam, AdamW, RMSprop, Adagrad on a shared ``Optimizer`` base;
learning-rate schedulers in ``engine.optim.lr_scheduler``.

``DistributedOptimizer`` (in ``engine.optim.distributed``, which imports the RPC
layer) is loaded only when asked for, so ``import engine`` stays free of ``actors``.
"""
from typing import Any, List

from engine.optim import lr_scheduler  # noqa: F401 - engine.optim.lr_scheduler, as torch
from engine.optim.adagrad import Adagrad
from engine.optim.adam import Adam, AdamW
from engine.optim.optimizer import Optimizer, read_gradient
from engine.optim.rmsprop import RMSprop
from engine.optim.sgd import SGD

# lr_scheduler, a submodule with its own reference page, is imported but not re-exported
__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "read_gradient",
           "DistributedOptimizer"]


def __getattr__(name: str) -> Any:
    if name == "DistributedOptimizer":
        from engine.optim.distributed import DistributedOptimizer

        return DistributedOptimizer
    raise AttributeError(f"module 'engine.optim' has no attribute {name!r}")


def __dir__() -> List[str]:
    """The loaded names and the one loaded on first use, for help() and completion."""
    return sorted(set(globals()) | set(__all__))
