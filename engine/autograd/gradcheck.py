"""``gradcheck``: compare backward's Jacobian with central finite differences.

The analytical Jacobian is built one output element at a time with a
``GraphTask`` whose leaf sink records gradients in a dict, so ``.grad`` is left
untouched.  Inputs to check must be float64 leaves that require grad.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from engine.autograd.grad_mode import no_grad
from engine.autograd.graph import GraphRoot
from engine.autograd.scheduler import GraphTask
from engine.errors import GradcheckError
from engine.tensor import Tensor


def _as_tuple(x: Any) -> Tuple[Any, ...]:
    return x if isinstance(x, tuple) else (x,)


def _analytical(outputs: Sequence[Tensor], checked: List[Tensor]) -> List[List[np.ndarray]]:
    """jac[o][i] has shape (outputs[o].size, checked[i].size)."""
    jac = [[np.zeros((out.data.size, x.data.size)) for x in checked] for out in outputs]
    for o, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        edge = out._edge()
        for k in range(out.data.size):
            seed = np.zeros(out.shape, dtype=out.dtype)
            seed.flat[k] = 1
            received: Dict[Tensor, np.ndarray] = {}

            def sink(tensor: Tensor, grad: Any, received: Dict = received) -> None:
                if grad is not None:
                    received[tensor] = received.get(tensor, 0) + grad

            task = GraphTask(retain_graph=True, accumulate=sink)
            task.add_root(GraphRoot([edge], [seed]))
            task.run()
            for i, x in enumerate(checked):
                if x in received:
                    jac[o][i][k] = np.asarray(received[x]).ravel()
    return jac


def _numerical(fn: Callable[..., Any], inputs: Tuple[Any, ...], checked: List[Tensor],
               eps: float) -> List[List[np.ndarray]]:
    def evaluate() -> List[np.ndarray]:
        with no_grad():
            return [np.array(o.data, dtype=np.float64) for o in _as_tuple(fn(*inputs))]

    sizes = [o.size for o in evaluate()]
    jac = [[np.zeros((n, x.data.size)) for x in checked] for n in sizes]
    for i, x in enumerate(checked):
        # writes through .flat reach x's array in C order even when it is not contiguous
        # (reshape(-1) would then perturb a copy)
        flat = x.data.flat
        for j in range(x.data.size):
            original = flat[j]
            flat[j] = original + eps
            plus = evaluate()
            flat[j] = original - eps
            minus = evaluate()
            flat[j] = original
            for o in range(len(sizes)):
                jac[o][i][:, j] = ((plus[o] - minus[o]) / (2 * eps)).ravel()
    return jac


def gradcheck(fn: Callable[..., Any], inputs: Any, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3) -> bool:
    """Check ``fn``'s gradients at ``inputs`` against finite differences.

    Returns True, or raises ``GradcheckError`` naming the output, the input, the
    largest difference and where it is.  Every input that requires grad is checked
    and must be a float64 leaf.
    """
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    checked = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck needs at least one input with requires_grad=True")
    for x in checked:
        position = next(n for n, y in enumerate(inputs) if y is x)
        if x.dtype != np.float64:
            raise ValueError(f"gradcheck input {position} is {x.dtype}; use float64")
        if not x.is_leaf:
            raise ValueError(f"gradcheck input {position} is not a leaf tensor")
    outputs = _as_tuple(fn(*inputs))
    analytical = _analytical(outputs, checked)
    numerical = _numerical(fn, inputs, checked, eps)
    for o, (rows_a, rows_n) in enumerate(zip(analytical, numerical)):
        for i, (a, n) in enumerate(zip(rows_a, rows_n)):
            excess = np.abs(a - n) - (atol + rtol * np.abs(n))
            if excess.size and excess.max() > 0:
                k, j = np.unravel_index(np.argmax(excess), excess.shape)
                position = next(p for p, y in enumerate(inputs) if y is checked[i])
                raise GradcheckError(
                    f"Jacobian mismatch for output {o} with respect to input {position} "
                    f"(shape {checked[i].shape}): max difference {np.abs(a - n).max():.3g} "
                    f"at output element {k}, input element "
                    f"{tuple(map(int, np.unravel_index(j, checked[i].shape)))}: "
                    f"analytical {a[k, j]:.6g}, "
                    f"numerical {n[k, j]:.6g}"
                )
    return True
