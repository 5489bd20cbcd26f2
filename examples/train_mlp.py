"""Train a small MLP on three interleaved spirals with the local engine; print the loss falling.

    python examples/train_mlp.py [--epochs 60] [--lr 0.05] [--seed 0]

The data set is generated here (no download): three spiral arms in the plane, one
class each, with Gaussian noise.  Mini-batch SGD with Nesterov momentum, a dropout
layer while training, accuracy measured in eval mode on a held-out draw.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import engine  # noqa: E402
from engine import nn  # noqa: E402
from engine.nn import functional as F  # noqa: E402


def spirals(points_per_class: int, classes: int, noise: float, rng: np.random.Generator):
    """``classes`` spiral arms, each one turn long, as float32 points and int64 labels."""
    radius = np.linspace(0.05, 1.0, points_per_class)
    xs, ys = [], []
    for label in range(classes):
        angle = (np.linspace(0, 2 * np.pi, points_per_class) + label * 2 * np.pi / classes
                 + rng.normal(0, noise, points_per_class))
        xs.append(np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1))
        ys.append(np.full(points_per_class, label))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys)


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    model.eval()
    with engine.no_grad():
        predicted = model(engine.from_numpy(x)).data.argmax(axis=1)
    model.train()
    return float((predicted == y).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    engine.manual_seed(args.seed)
    x_train, y_train = spirals(300, 3, 0.2, rng)
    x_test, y_test = spirals(300, 3, 0.2, rng)

    model = nn.Sequential(nn.Linear(2, 128), nn.ReLU(), nn.Dropout(0.1),
                          nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 3))
    optimizer = engine.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True)
    print(model)
    print(f"{len(x_train)} training points, {len(x_test)} held out; "
          f"held-out accuracy before training: {accuracy(model, x_test, y_test):.1%}")

    started = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_train))
        total = 0.0
        for start in range(0, len(order), args.batch_size):
            batch = order[start:start + args.batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(engine.from_numpy(x_train[batch])), y_train[batch])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        if epoch in (1, args.epochs) or epoch % 10 == 0:
            print(f"epoch {epoch:3d}  loss {total / len(order):.4f}  "
                  f"train acc {accuracy(model, x_train, y_train):.1%}")
    print(f"held-out accuracy {accuracy(model, x_test, y_test):.1%} "
          f"after {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
