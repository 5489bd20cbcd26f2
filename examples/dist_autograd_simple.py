"""The distributed autograd design note's example, end to end, with its closed form.

Two workers: this one ("worker0") sends t1 and t2 to worker1, which adds them;
t3 = t1 + t2 comes back, is multiplied by a local t4 and summed. Backward crosses
back to worker1 and home again; the gradients match the closed form
d loss/d t1 = d loss/d t2 = t4 and d loss/d t4 = t1 + t2.
Run: ``python examples/dist_autograd_simple.py``.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from _world import world  # noqa: E402

import actors  # noqa: E402
import engine  # noqa: E402
from engine import dist_autograd  # noqa: E402


def main() -> None:
    with world(2, name="worker0"):
        with dist_autograd.context() as context_id:
            t1 = engine.rand(3, 3, requires_grad=True)
            t2 = engine.rand(3, 3, requires_grad=True)
            t3 = actors.rpc_sync("worker1", engine.add, args=(t1, t2))
            t4 = engine.rand(3, 3, requires_grad=True)
            loss = engine.mul(t3, t4).sum()
            print(f"context {context_id:#x}: loss = {loss.item():.4f}")
            dist_autograd.backward(context_id, [loss])
            grads = dist_autograd.get_gradients(context_id)
            checks = {
                "d loss/d t1 == t4": np.allclose(grads[t1], t4.data),
                "d loss/d t2 == t4": np.allclose(grads[t2], t4.data),
                "d loss/d t4 == t1 + t2": np.allclose(grads[t4], t1.data + t2.data),
                "t1.grad untouched (None)": t1.grad is None,
            }
        for name, ok in checks.items():
            print(f"{'ok  ' if ok else 'FAIL'} {name}")
    if not all(checks.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
