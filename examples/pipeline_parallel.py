"""A model split across three workers, trained end to end with distributed autograd.

Stage 1 (64 -> 48) lives on worker1, stage 2 (48 -> 32) on worker2 and the
classifier head (32 -> 10) here on the driver. Each batch is cut into micro-batches
that go through a stage together (`rpc_async`), so a stage works on several while
the driver waits; backward crosses both boundaries back, and one
`DistributedOptimizer` updates all three workers' parameters.
Run: ``python examples/pipeline_parallel.py [--epochs N]``.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from _world import digits, world  # noqa: E402

import actors  # noqa: E402
import engine  # noqa: E402
from engine import dist_autograd, nn, optim  # noqa: E402
from engine.nn import functional as F  # noqa: E402
from engine.optim import DistributedOptimizer  # noqa: E402


def make_stage(in_features: int, out_features: int, seed: int):
    engine.manual_seed(seed)
    return nn.Sequential(nn.Linear(in_features, out_features), nn.Tanh())


def run_stage(stage, x):
    return stage.local_value()(x)


def stage_parameters(stage) -> list:
    return [actors.RRef(p) for p in stage.local_value().parameters()]


def forward(stages, head, images, micro_batches: int):
    """Micro-batches through each remote stage concurrently, then the local head."""
    parts = [engine.tensor(chunk) for chunk in np.array_split(images, micro_batches)]
    for stage in stages:
        pending = [actors.rpc_async(stage.owner(), run_stage, args=(stage, part))
                   for part in parts]
        parts = actors.wait_all(pending)
    return engine.concatenate([head(part) for part in parts])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--micro-batches", type=int, default=4)
    args = parser.parse_args()
    train_x, train_y, test_x, test_y = digits()
    with world(3):
        stages = [actors.remote("worker1", make_stage, args=(64, 48, 1)),
                  actors.remote("worker2", make_stage, args=(48, 32, 2))]
        engine.manual_seed(3)
        head = nn.Linear(32, 10)
        params = [rref for stage in stages
                  for rref in actors.rpc_sync(stage.owner(), stage_parameters, args=(stage,))]
        params += [actors.RRef(p) for p in head.parameters()]
        optimizer = DistributedOptimizer(optim.SGD, params, lr=0.2, momentum=0.9)
        print(f"stages on {[s.owner_name() for s in stages]} + head on driver; "
              f"{len(params)} parameter tensors", flush=True)
        rng = np.random.default_rng(0)
        for epoch in range(1, args.epochs + 1):
            order, losses = rng.permutation(len(train_y)), []
            for start in range(0, len(order), args.batch):
                rows = order[start:start + args.batch]
                with dist_autograd.context() as context_id:
                    logits = forward(stages, head, train_x[rows], args.micro_batches)
                    loss = F.cross_entropy(logits, train_y[rows])
                    dist_autograd.backward(context_id, [loss])
                    optimizer.step(context_id)
                losses.append(loss.item())
            print(f"epoch {epoch}/{args.epochs}  loss {np.mean(losses):.4f}", flush=True)
        with engine.no_grad():
            logits = forward(stages, head, test_x, args.micro_batches)
        accuracy = float((logits.data.argmax(axis=1) == test_y).mean())
        print(f"held-out accuracy: {accuracy:.1%} ({len(test_y)} test images)")


if __name__ == "__main__":
    main()
