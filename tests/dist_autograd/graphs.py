"""Small random programs over three workers, run over RPC or in one process.

A program is ``(ops, outputs)``: each op appends one value (or, for a call, every
value the callee returns) to the list that starts with the program's arguments;
``outputs`` are the indices it returns. Ops:

- ``("add", i, j)``, ``("mul", i, j)``, ``("scale", i, k)``, ``("tanh", i)``;
- ``("leaf", label, values)``: a new leaf requiring grad, made where the op runs;
- ``("call", worker, program, indices)``: run `program` on `worker` with those values.

Callees return several values and callers use some of them or none, values are
passed twice or to several calls, and calls nest (also back to the caller's worker):
the graphs FAST mode cannot run and SMART mode must.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

import actors
import engine
from engine import dist_autograd

WORKERS = 3
_leaves: Dict[str, engine.Tensor] = {}  # the leaves made on this worker, by label


def generate(rng: np.random.Generator, name: str, arguments: int = 3,
             depth: int = 0, worker: int = 0, counter=None) -> tuple:
    """A random program taking `arguments` values, running on `worker`."""
    counter = counter if counter is not None else [0]
    ops: List[tuple] = []
    size = arguments
    for _ in range(int(rng.integers(2, 6))):
        kind = rng.choice(["add", "mul", "scale", "tanh", "leaf", "call", "call"])
        if depth == 0 and not ops:  # every graph crosses workers
            kind = "call"
        if kind == "call" and depth < 2:
            callee = int(rng.choice([w for w in range(WORKERS) if w != worker]))
            passed = tuple(int(i) for i in rng.integers(0, size, int(rng.integers(1, 4))))
            program = generate(rng, name, len(passed), depth + 1, callee, counter)
            ops.append(("call", callee, program, passed))
            size += len(program[1])
            continue
        if kind == "leaf":
            counter[0] += 1
            ops.append(("leaf", f"{name}/{counter[0]}", rng.uniform(-1, 1, 2)))
        elif kind in ("add", "mul"):
            ops.append((kind, int(rng.integers(size)), int(rng.integers(size))))
        elif kind == "scale":
            ops.append((kind, int(rng.integers(size)), float(rng.uniform(-2, 2))))
        else:
            ops.append(("tanh", int(rng.integers(size))))
        size += 1
    outputs = tuple(int(i) for i in rng.choice(size, int(rng.integers(1, 4)), replace=False))
    return tuple(ops), outputs


def run(program: tuple, args: list, remote: bool) -> list:
    """Run `program` here; calls go over RPC if `remote`, else run here too."""
    ops, outputs = program
    values = list(args)
    for op in ops:
        kind = op[0]
        if kind == "call":
            _, worker, callee, passed = op
            passed_values = [values[i] for i in passed]
            if remote:
                values += actors.rpc_sync(f"worker{worker}", run,
                                          args=(callee, passed_values, True))
            else:
                values += run(callee, passed_values, False)
        elif kind == "leaf":
            _leaves[op[1]] = leaf = engine.tensor(op[2], requires_grad=True)
            values.append(leaf)
        elif kind == "add":
            values.append(values[op[1]] + values[op[2]])
        elif kind == "mul":
            values.append(values[op[1]] * values[op[2]])
        elif kind == "scale":
            values.append(values[op[1]] * op[2])
        else:
            values.append(engine.tanh(values[op[1]]))
    return [values[i] for i in outputs]


def loss_of(program: tuple, inputs: list, rng: np.random.Generator, remote: bool):
    """Σ of a random non-empty subset of the program's outputs and its inputs."""
    values = inputs + run(program, inputs, remote)
    chosen = rng.choice(len(values), int(rng.integers(1, len(values) + 1)), replace=False)
    total = values[int(chosen[0])].sum()
    for index in chosen[1:]:
        total = total + values[int(index)].sum()
    return total


def leaf_grads(context_id=None) -> Dict[str, object]:
    """The gradients of the leaves made here, by label, and forget those leaves: the
    context's (None where it has none) or, without a context, each leaf's `.grad`."""
    grads = {} if context_id is None else dist_autograd.get_gradients(context_id)
    found = {label: (leaf.grad if context_id is None else grads.get(leaf))
             for label, leaf in _leaves.items()}
    _leaves.clear()
    return found


def inputs(seed: int) -> List[engine.Tensor]:
    rng = np.random.default_rng(10_000 + seed)
    return [engine.tensor(rng.uniform(-1, 1, 2), requires_grad=True) for _ in range(3)]


def local_gradients(seed: int) -> Tuple[Dict[str, object], tuple]:
    """The local engine's gradients of graph `seed` (inputs as "in0".."in2"), and it."""
    rng = np.random.default_rng(seed)
    program = generate(rng, f"g{seed}")
    values = inputs(seed)
    loss_of(program, values, rng, remote=False).backward()
    grads = leaf_grads()
    grads.update({f"in{i}": value.grad for i, value in enumerate(values)})
    return grads, program
