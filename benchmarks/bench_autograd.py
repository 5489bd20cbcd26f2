"""Local autograd overhead: a 3-layer MLP and a 1,000-op chain, against torch and plain numpy.

Prints ONE JSON line.  Workloads (forward + backward, timed per iteration):

- ``mlp``: 784-512-512-10, ReLU, batch 64, float32, cross-entropy on integer
  targets; gradients cleared (set to None) before each iteration, untimed.  The
  same weights run in the engine, in torch (when importable) and in a hand-written
  numpy forward/backward (the floor: same BLAS calls, no framework).
- ``chain``: a (16,) float32 leaf through 1,000 small elementwise ops cycling
  ``* 1.001``, ``+ c``, ``tanh``, ``- 0.01``, then ``sum`` and backward; reported
  per op (the per-node overhead of forward recording plus backward scheduling).

Frameworks run in alternating blocks (warm-up, then timed iterations) over many
rounds, never interleaved per iteration (their BLAS/OpenMP thread pools would
fight).  Figures are medians; ratios are medians of per-round ratios.

    python benchmarks/bench_autograd.py [--rounds 30] [--iters 20]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import engine  # noqa: E402
from engine import nn  # noqa: E402
from engine.nn import functional as F  # noqa: E402

try:
    import torch
except ImportError:  # torch is optional: the figures then omit it
    torch = None

BATCH, SIZES, CHAIN_OPS = 64, (784, 512, 512, 10), 1000


# -- the MLP in three frameworks ---------------------------------------------------------
def make_data(rng: np.random.Generator):
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH)
    return x, y


def engine_mlp(x: np.ndarray, y: np.ndarray):
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(SIZES[0], SIZES[1]), nn.ReLU(),
                          nn.Linear(SIZES[1], SIZES[2]), nn.ReLU(),
                          nn.Linear(SIZES[2], SIZES[3]))
    inputs = engine.from_numpy(x)

    def step() -> None:
        loss = F.cross_entropy(model(inputs), y)
        loss.backward()

    return model, step


def numpy_mlp(weights: List[np.ndarray], x: np.ndarray, y: np.ndarray):
    w1, b1, w2, b2, w3, b3 = weights
    rows = np.arange(BATCH)
    grads: Dict[str, np.ndarray] = {}

    def step() -> None:
        h1 = x @ w1.T
        h1 += b1
        a1 = np.maximum(h1, 0)
        h2 = a1 @ w2.T
        h2 += b2
        a2 = np.maximum(h2, 0)
        z = a2 @ w3.T
        z += b3
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        grads["loss"] = -np.log(p[rows, y]).mean()
        dz = p
        dz[rows, y] -= 1
        dz /= BATCH
        grads["w3"], grads["b3"] = dz.T @ a2, dz.sum(axis=0)
        da2 = dz @ w3
        da2 *= h2 > 0
        grads["w2"], grads["b2"] = da2.T @ a1, da2.sum(axis=0)
        da1 = da2 @ w2
        da1 *= h1 > 0
        grads["w1"], grads["b1"] = da1.T @ x, da1.sum(axis=0)

    return grads, step


def torch_mlp(weights: List[np.ndarray], x: np.ndarray, y: np.ndarray):
    model = torch.nn.Sequential(torch.nn.Linear(SIZES[0], SIZES[1]), torch.nn.ReLU(),
                                torch.nn.Linear(SIZES[1], SIZES[2]), torch.nn.ReLU(),
                                torch.nn.Linear(SIZES[2], SIZES[3]))
    with torch.no_grad():
        for param, value in zip(model.parameters(), weights):
            param.copy_(torch.from_numpy(value))
    inputs, target = torch.from_numpy(x), torch.from_numpy(y)

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(inputs), target)
        loss.backward()

    return model, step


# -- the chain ----------------------------------------------------------------------------
def engine_chain() -> Callable[[], None]:
    x = engine.rand(16, requires_grad=True)
    c = engine.rand(16)

    def step() -> None:
        y = x
        for _ in range(CHAIN_OPS // 4):
            y = engine.tanh(y * 1.001 + c) - 0.01
        y.sum().backward()
        x.grad = None

    return step


def torch_chain() -> Callable[[], None]:
    x = torch.rand(16, requires_grad=True)
    c = torch.rand(16)

    def step() -> None:
        y = x
        for _ in range(CHAIN_OPS // 4):
            y = torch.tanh(y * 1.001 + c) - 0.01
        y.sum().backward()
        x.grad = None

    return step


# -- timing -------------------------------------------------------------------------------
def run_blocks(steps: Dict[str, Callable[[], None]], rounds: int, iters: int,
               before: Dict[str, Callable[[], None]], pause: float = 0.0
               ) -> Dict[str, List[List[float]]]:
    """Per framework, per round, the per-iteration times (seconds).  ``pause`` seconds of
    sleep before each block let the previous framework's spinning BLAS threads park."""
    times: Dict[str, List[List[float]]] = {name: [] for name in steps}
    names = list(steps)
    clock = time.perf_counter
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            step, reset = steps[name], before.get(name, lambda: None)
            time.sleep(pause)
            for _ in range(3):  # warm-up: caches, thread pools
                reset()
                step()
            block = []
            for _ in range(iters):
                reset()
                start = clock()
                step()
                block.append(clock() - start)
            times[name].append(block)
    return times


def summarize(times: Dict[str, List[List[float]]], scale: float, unit: str
              ) -> Dict[str, float]:
    """Median time per framework, and each engine/baseline ratio as the median of the
    per-round ratios (robust to the machine getting slower or faster between rounds)."""
    out: Dict[str, float] = {
        f"{name}_{unit}": round(statistics.median(t for b in blocks for t in b) * scale, 4)
        for name, blocks in times.items()}
    for baseline in ("torch", "numpy"):
        if baseline in times:
            per_round = [statistics.median(a) / statistics.median(b)
                         for a, b in zip(times["engine"], times[baseline])]
            out[f"engine_vs_{baseline}"] = round(statistics.median(per_round), 3)
    return out


def check_gradients(model: nn.Module, step: Callable[[], None], grads: Dict[str, np.ndarray],
                    numpy_step: Callable[[], None]) -> None:
    """The three MLPs must compute the same thing: compare engine and numpy gradients."""
    model.zero_grad()
    step()
    numpy_step()
    ours = [p.grad for p in model.parameters()]
    for got, key in zip(ours, ("w1", "b1", "w2", "b2", "w3", "b3")):
        np.testing.assert_allclose(got, grads[key], rtol=2e-3, atol=2e-5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--pause", type=float, default=0.1,
                        help="seconds idle before each MLP block, so thread pools park")
    args = parser.parse_args()

    x, y = make_data(np.random.default_rng(0))
    model, engine_step = engine_mlp(x, y)
    weights = [p.data for p in model.parameters()]
    numpy_grads, numpy_step = numpy_mlp(weights, x, y)
    check_gradients(model, engine_step, numpy_grads, numpy_step)

    mlp_steps = {"engine": engine_step, "numpy": numpy_step}
    mlp_reset = {"engine": model.zero_grad}
    chain_steps = {"engine": engine_chain()}
    if torch is not None:
        torch_model, mlp_steps["torch"] = torch_mlp(weights, x, y)
        mlp_reset["torch"] = lambda: torch_model.zero_grad(set_to_none=True)
        chain_steps["torch"] = torch_chain()

    mlp = summarize(run_blocks(mlp_steps, args.rounds, args.iters, mlp_reset, args.pause), 1e3,
                    "ms")
    # No pause for the chain: it does no BLAS work, and idling lets the clock drop.
    chain = summarize(run_blocks(chain_steps, args.rounds, max(args.iters // 2, 3), {}),
                      1e6 / CHAIN_OPS, "us_per_op")
    result = {
        "benchmark": "autograd",
        "mlp": {"layers": "-".join(map(str, SIZES)), "batch": BATCH, "dtype": "float32",
                **mlp, "target_engine_vs_torch": 1.25},
        "chain": {"ops": CHAIN_OPS, "shape": [16], **chain, "target_engine_vs_torch": 2.0},
        "rounds": args.rounds, "iters_per_round": args.iters, "pause_s": args.pause,
        "env": {
            "python": platform.python_version(), "numpy": np.__version__,
            "torch": None if torch is None else torch.__version__,
            "torch_threads": None if torch is None else torch.get_num_threads(),
            "cpus": os.cpu_count(),
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        },
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
