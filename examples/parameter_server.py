"""A parameter server and two trainers learn handwritten digits with distributed autograd.

This process is the parameter server ("ps", rank 0, hosting the store): it holds an
MLP. Two spawned trainers each train it on half of the 8x8 digits data set: the
forward pass runs the model on the server over RPC, the loss is computed on the
trainer, `dist_autograd.backward` sends the gradients back to the server, and a
`DistributedOptimizer` updates the server's parameters. The trainers print their
progress; at the end the server reports the held-out accuracy.
Run: ``python examples/parameter_server.py [--epochs N]``.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from _world import digits, world  # noqa: E402

import actors  # noqa: E402
import engine  # noqa: E402
from engine import dist_autograd, nn, optim  # noqa: E402
from engine.nn import functional as F  # noqa: E402
from engine.optim import DistributedOptimizer  # noqa: E402


class ParameterServer:
    """The model, living on the server."""

    def __init__(self) -> None:
        engine.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.model(x)

    def parameter_rrefs(self) -> list:
        return [actors.RRef(p) for p in self.model.parameters()]


def server_forward(server, x):
    return server.local_value().forward(x)


def server_parameters(server):
    return server.local_value().parameter_rrefs()


def train(server, images, labels, epochs: int, batch: int) -> list:
    """Runs on a trainer: epochs of minibatches against the server's model."""
    me = actors.get_worker_info().name
    owner = server.owner()
    optimizer = DistributedOptimizer(optim.SGD, actors.rpc_sync(owner, server_parameters,
                                                                 args=(server,)),
                                     lr=0.1, momentum=0.9)
    rng = np.random.default_rng(actors.get_worker_info().id)
    epoch_losses = []
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(labels))
        losses = []
        for start in range(0, len(order), batch):
            rows = order[start:start + batch]
            with dist_autograd.context() as context_id:
                logits = actors.rpc_sync(owner, server_forward,
                                         args=(server, engine.tensor(images[rows])))
                loss = F.cross_entropy(logits, labels[rows])
                dist_autograd.backward(context_id, [loss])
                optimizer.step(context_id)
            losses.append(loss.item())
        epoch_losses.append(float(np.mean(losses)))
        print(f"  {me}: epoch {epoch}/{epochs}  loss {epoch_losses[-1]:.4f}", flush=True)
    return epoch_losses


def accuracy(server: ParameterServer, images, labels) -> float:
    with engine.no_grad():
        predicted = server.forward(engine.tensor(images)).data.argmax(axis=1)
    return float((predicted == labels).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    train_x, train_y, test_x, test_y = digits()
    started = time.perf_counter()
    with world(3, name="ps"):
        server = ParameterServer()
        print(f"parameter server up; held-out accuracy before training: "
              f"{accuracy(server, test_x, test_y):.1%}", flush=True)
        halves = np.array_split(np.arange(len(train_y)), 2)
        print(f"2 trainers x {len(halves[0])} images, {args.epochs} epochs, "
              f"batch {args.batch}", flush=True)
        rref = actors.RRef(server)
        runs = [actors.rpc_async(f"worker{i + 1}", train,
                                 args=(rref, train_x[rows], train_y[rows], args.epochs,
                                       args.batch), timeout=0)
                for i, rows in enumerate(halves)]
        histories = actors.wait_all(runs)
        first = np.mean([h[0] for h in histories])
        last = np.mean([h[-1] for h in histories])
        print(f"mean trainer loss: epoch 1 {first:.4f} -> epoch {args.epochs} {last:.4f}")
        print(f"held-out accuracy after training: {accuracy(server, test_x, test_y):.1%} "
              f"({len(test_y)} test images, {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
