"""DDP with a parameter that `forward` may leave unused (importable by spawned ranks)."""
from __future__ import annotations

import numpy as np

from engine.nn import Linear, Module

STEPS, PER_RANK = 3, 4


class Branchy(Module):
    """`used` always feeds the output; `extra` only where `use_extra` is true."""

    def __init__(self) -> None:
        super().__init__()
        self.used = Linear(5, 2)
        self.extra = Linear(5, 2)

    def forward(self, x, use_extra: bool):
        out = self.used(x)
        return out + self.extra(x) if use_extra else out


def branchy(seed: int) -> Branchy:
    import engine

    engine.manual_seed(seed)
    return Branchy()


def batches(world: int):
    rng = np.random.default_rng(11)
    return [(rng.standard_normal((PER_RANK * world, 5)).astype(np.float32),
             rng.standard_normal((PER_RANK * world, 2)).astype(np.float32))
            for _ in range(STEPS)]


def uses_extra(rank: int, extra_on: str) -> bool:
    return extra_on == "rank0" and rank == 0


def train_branchy(rank, world, find_unused, extra_on):
    """STEPS of SGD, going on after an error. Per step: where an error was raised and its
    message, the gradients after backward; and the final parameters."""
    from engine import Tensor
    from engine.nn import functional as F
    from engine.nn.parallel import DistributedDataParallel, UnfinishedReductionError
    from engine.optim import SGD

    model = DistributedDataParallel(branchy(seed=5 + rank), find_unused_parameters=find_unused)
    optimizer = SGD(model.parameters(), lr=0.1)
    steps = []
    for inputs, targets in batches(world):
        mine = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
        optimizer.zero_grad()
        error = None
        try:
            out = model(Tensor(inputs[mine]), uses_extra(rank, extra_on))
        except UnfinishedReductionError as exc:
            error = ("forward", str(exc))
            out = model(Tensor(inputs[mine]), uses_extra(rank, extra_on))
        try:
            F.mse_loss(out, Tensor(targets[mine])).backward()
        except UnfinishedReductionError as exc:
            error = error or ("backward", str(exc))
        grads = {name: None if p.grad is None else p.grad.copy()
                 for name, p in model.module.named_parameters()}
        steps.append((error, grads))
        optimizer.step()
    return steps, {name: p.data.copy() for name, p in model.module.named_parameters()}


def no_sync_decided_by_the_forward(rank, world):
    """The gradients of one step whose forward ran inside `no_sync()` and whose backward
    ran outside, then of one the other way round, and this rank's own gradient of the
    batch (the same batch both times)."""
    from engine import Tensor
    from engine.nn import functional as F
    from engine.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(branchy(seed=5))
    inputs, targets = batches(world)[0]
    mine = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
    x, y = Tensor(inputs[mine]), Tensor(targets[mine])
    found = []
    for forward_inside in (True, False):
        model.zero_grad()
        if forward_inside:
            with model.no_sync():
                loss = F.mse_loss(model(x, True), y)
            loss.backward()
        else:
            loss = F.mse_loss(model(x, True), y)
            with model.no_sync():
                loss.backward()
        found.append(model.module.used.weight.grad.copy())
    model.zero_grad()
    with model.no_sync():
        F.mse_loss(model(x, True), y).backward()
    return found + [model.module.used.weight.grad.copy()]


def wraps_other_models(rank, world, differ):
    """DDP around a model that differs on rank 1 (`differ`: "shape" or "count"): the
    error each rank's constructor raises."""
    from engine.nn import Linear, Sequential
    from engine.nn.parallel import DistributedDataParallel

    width = 3 + rank if differ == "shape" else 3
    layers = [Linear(4, width), Linear(width, 2)]
    if differ == "count" and rank == 1:
        layers.append(Linear(2, 2))
    try:
        DistributedDataParallel(Sequential(*layers))
    except Exception as exc:  # noqa: BLE001 - the test checks it
        return type(exc).__name__, str(exc)
    return "no error", ""
