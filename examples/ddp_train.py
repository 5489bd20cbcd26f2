"""Data-parallel training of an MLP on the 8x8 digits with DistributedDataParallel.

    python examples/ddp_train.py [--ranks 2] [--epochs 8]

Spawns `--ranks` processes that form a process group (rank 0 hosts the store); each
trains the same model on its own half of every batch, DDP averages the gradients
during backward, so every rank takes the same step. Rank 0 prints the mean loss of
each epoch and the held-out accuracy; at the end every rank checks that its
parameters equal rank 0's.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _world import digits, free_port, join_all  # noqa: E402

BATCH = 64  # per rank


def train(rank: int, world: int, port: int, epochs: int) -> None:
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    import actors.distributed as dist
    import engine
    from engine import nn
    from engine.nn import functional as F
    from engine.nn.parallel import DistributedDataParallel

    dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    x_train, y_train, x_test, y_test = digits()
    engine.manual_seed(rank)  # different on each rank: DDP starts them all from rank 0's
    model = DistributedDataParallel(nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)  # the same order on every rank
    started = time.perf_counter()
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(x_train))
        losses = []
        for start in range(0, len(order) - BATCH * world + 1, BATCH * world):
            mine = order[start + rank * BATCH:start + (rank + 1) * BATCH]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(engine.from_numpy(x_train[mine])),
                                   engine.from_numpy(y_train[mine]))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        mean = np.array([np.mean(losses)])
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"epoch {epoch}/{epochs}: mean loss {mean[0]:.4f} "
                  f"({time.perf_counter() - started:.1f}s)", flush=True)
    with engine.no_grad():
        predicted = model(engine.from_numpy(x_test)).data.argmax(axis=1)
    params = [p.data for p in model.parameters()]
    firsts = [p.copy() for p in params]
    for first in firsts:
        dist.broadcast(first, src=0)
    same = all(a.tobytes() == b.tobytes() for a, b in zip(params, firsts))
    agreed = [None] * world
    dist.all_gather_object(agreed, same)
    if rank == 0:
        print(f"held-out accuracy: {(predicted == y_test).mean():.1%}")
        print(f"parameters identical on all {world} ranks: {all(agreed)}")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=8)
    args = parser.parse_args()
    port = free_port()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=train, args=(rank, args.ranks, port, args.epochs),
                         name=f"rank {rank}") for rank in range(1, args.ranks)]
    for proc in procs:
        proc.start()
    try:
        train(0, args.ranks, port, args.epochs)
    finally:
        join_all(procs)


if __name__ == "__main__":
    main()
