"""Fault-tolerant data-parallel training in place (engine.ft), run under the launcher.

Four replicas train an MLP on the 8x8 digits; each takes its own batch every step
(drawn from the step number and its replica id) and `ft.DistributedDataParallel`
averages the gradients over the step's quorum. With ``--kill-at N`` the replica
``--kill-rank`` SIGKILLs itself in the middle of step N: the survivors' step N does
not commit, they form a new group among themselves and go on at once; the launcher
(``--restart-policy failed``) starts only that worker again, which joins at a step
boundary and receives the parameters, the optimizer state and the step number from a
live replica, with no checkpoint file (if the others finish first, it says so and
ends). Every replica prints a line when its quorum changes; rank 0 prints the loss
and, at the end, the held-out accuracy:

    python -m actors.launch --standalone --nproc-per-node 4 --restart-policy failed \\
        --max-restarts 3 examples/ft_train.py --kill-at 100

(about 10 s; compare the accuracy with a run without ``--kill-at``).
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _world import digits  # noqa: E402

import engine  # noqa: E402
import engine.ft as ft  # noqa: E402
from engine import nn  # noqa: E402
from engine.nn import functional as F  # noqa: E402

BATCH = 32  # per replica


def make_model() -> nn.Module:
    engine.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--kill-at", type=int, default=None,
                        help="the step in whose all-reduce --kill-rank SIGKILLs itself")
    parser.add_argument("--kill-rank", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds before a silent replica counts as lost")
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    first_life = os.environ.get("ACTORGRAD_WORKER_RESTART_COUNT", "0") == "0"
    x_train, y_train, x_test, y_test = digits()
    manager = ft.Manager(min_replica_size=1, timeout=args.timeout)
    model = ft.DistributedDataParallel(manager, make_model())
    optimizer = ft.OptimizerWrapper(manager, engine.optim.SGD(model.parameters(), lr=args.lr,
                                                              momentum=0.9))
    print(f"replica {rank} (PID {os.getpid()}) started"
          + ("" if first_life else ", restarted by the launcher"), flush=True)
    try:
        train(manager, model, optimizer, rank, first_life, x_train, y_train, args)
        with engine.no_grad():
            predicted = model(engine.from_numpy(x_test)).data.argmax(axis=1)
        if rank == 0:
            print(f"final held-out accuracy {(predicted == y_test).mean():.2%} after "
                  f"{manager.current_step()} steps", flush=True)
    except ft.ReplicasLeftError as exc:  # back after the others finished: nothing to do
        print(f"replica {rank}: {exc}", flush=True)
    finally:
        manager.shutdown()
    return 0


def train(manager: ft.Manager, model: ft.DistributedDataParallel,
          optimizer: ft.OptimizerWrapper, rank: int, first_life: bool, x_train: np.ndarray,
          y_train: np.ndarray, args: argparse.Namespace) -> None:
    """Steps until the job's step count reaches --steps; the kill, if asked, on the way."""
    started, losses, failed = time.perf_counter(), [], 0
    while manager.current_step() < args.steps:
        step = manager.current_step()
        mine = np.random.default_rng([step, rank]).integers(0, len(x_train), BATCH)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(engine.from_numpy(x_train[mine])),
                               engine.from_numpy(y_train[mine]))
        if first_life and rank == args.kill_rank and step == args.kill_at:
            # In this step's quorum first, so the others count on it: they are in (or
            # entering) the step's all-reduce when it dies, not still forming the quorum.
            manager.wait_quorum()
            os.kill(os.getpid(), signal.SIGKILL)
        loss.backward()
        if not optimizer.step():
            failed += 1
            continue
        losses.append(loss.item())
        done = manager.current_step()
        if rank == 0 and done % 100 == 0:
            print(f"step {done} loss {np.mean(losses):.4f} "
                  f"({manager.num_participants()} replicas, {failed} steps not committed, "
                  f"{time.perf_counter() - started:.1f}s)", flush=True)
            losses = []


if __name__ == "__main__":
    sys.exit(main())
