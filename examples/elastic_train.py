"""Elastic data-parallel training with checkpoints, run under ``python -m actors.launch``.

Each worker fits the same linear model on its shard of a synthetic regression
problem; gradients are averaged through the store the launcher's environment
points at (`env://`: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), so every worker
takes the same step. Rank 0 saves a checkpoint every `--checkpoint-every` steps
(written to a temporary file, then renamed, so a kill never leaves half a file);
after a restart every worker resumes from the newest one, so a killed worker costs
at most one checkpoint interval of work. Two agents on this machine:

    python -m actors.launch --nnodes 2 --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:29400 \\
        --rdzv-id demo --max-restarts 3 examples/elastic_train.py --steps 300

(the same command in two terminals; kill any worker to see the group resume).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from store import rendezvous  # noqa: E402

FEATURES = 8


def make_shard(rank: int, world: int, samples: int) -> tuple:
    """This rank's rows of one fixed dataset: y = X @ w_true + noise."""
    rng = np.random.default_rng(0)
    w_true = rng.normal(size=FEATURES)
    x = rng.normal(size=(samples, FEATURES))
    y = x @ w_true + 0.01 * rng.normal(size=samples)
    return x[rank::world], y[rank::world]


def load_checkpoint(path: str) -> tuple:
    if not os.path.exists(path):
        return 0, np.zeros(FEATURES)
    with np.load(path) as data:
        return int(data["step"]), data["weights"].copy()


def save_checkpoint(path: str, step: int, weights: np.ndarray) -> None:
    tmp = f"{path}.{os.getpid()}.tmp.npz"
    np.savez(tmp, step=step, weights=weights)
    os.replace(tmp, path)


def average(store, step: int, rank: int, world: int, grad: np.ndarray) -> np.ndarray:
    """All-reduce (mean) of `grad` through the store: everyone posts, everyone reads all."""
    store.set(f"grad/{step}/{rank}", grad.astype(np.float64).tobytes())
    parts = store.multi_get([f"grad/{step}/{r}" for r in range(world)])
    if step > 1 and rank == 0:
        for r in range(world):  # the step before last is read by everyone by now
            store.delete_key(f"grad/{step - 2}/{r}")
    return np.mean([np.frombuffer(p, dtype=np.float64) for p in parts], axis=0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--checkpoint-every", type=int, default=20)
    parser.add_argument("--checkpoint", default="elastic_train.ckpt.npz")
    parser.add_argument("--step-delay", type=float, default=0.0,
                        help="seconds of pretend work per step (to have time to kill one)")
    args = parser.parse_args()

    store, rank, world = next(rendezvous("env://", timeout=60))
    restart = os.environ.get("RESTART_COUNT", "0")
    x, y = make_shard(rank, world, args.samples)
    step, weights = load_checkpoint(args.checkpoint)
    print(f"rank {rank}/{world} restart {restart}: resuming at step {step} (PID {os.getpid()})",
          flush=True)
    while step < args.steps:
        residual = x @ weights - y
        grad = average(store, step, rank, world, 2 * x.T @ residual / len(y))
        weights -= args.lr * grad
        step += 1
        if args.step_delay:
            time.sleep(args.step_delay)
        if rank == 0 and (step % args.checkpoint_every == 0 or step == args.steps):
            save_checkpoint(args.checkpoint, step, weights)
            loss = float(np.mean(residual ** 2))
            print(f"step {step} loss {loss:.6f} (checkpoint saved)", flush=True)
    store.set(f"finished/{rank}", b"1")
    if rank == 0:  # rank 0 hosts the store: it leaves last
        store.wait([f"finished/{r}" for r in range(world)], 60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
