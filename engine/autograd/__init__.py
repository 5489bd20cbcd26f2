"""Autograd machinery: the graph (``Node``, ``AccumulateGrad``), the scheduler
(``count_dependencies``, ``GraphTask``), grad mode, ``Function`` and ``gradcheck``.

The scheduler is the hook that distributed autograd drives; see
``engine.autograd.scheduler`` and docs/ENGINE.md.  The graph, scheduler and grad
mode know nothing of ``Tensor``; ``Function`` and ``gradcheck`` build on it, so they
are loaded on first use (``engine.tensor`` itself imports this package).
"""
from typing import Any, List

from engine.autograd.accumulate import IntoGrad, merge_gradient
from engine.autograd.backward import backward, queue_callback, root_gradient
from engine.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from engine.autograd.graph import (
    FREED,
    NO_EDGE,
    AccumulateGrad,
    Edge,
    GraphRoot,
    Node,
    gradient_edge,
)
from engine.autograd.scheduler import GraphTask, count_dependencies

_ON_TENSOR = {
    "Function": "engine.autograd.function",
    "FunctionCtx": "engine.autograd.function",
    "FunctionNode": "engine.autograd.function",
    "gradcheck": "engine.autograd.gradcheck",
}


def __getattr__(name: str) -> Any:
    if name in _ON_TENSOR:
        import importlib

        return getattr(importlib.import_module(_ON_TENSOR[name]), name)
    raise AttributeError(f"module 'engine.autograd' has no attribute {name!r}")


def __dir__() -> List[str]:
    """The loaded names and the ones loaded on first use, for help() and completion."""
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "Node", "AccumulateGrad", "GraphRoot", "Edge", "NO_EDGE", "FREED", "gradient_edge",
    "GraphTask", "count_dependencies", "backward", "queue_callback", "root_gradient",
    "IntoGrad", "merge_gradient",
    "Function", "FunctionCtx", "FunctionNode",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "gradcheck",
]
