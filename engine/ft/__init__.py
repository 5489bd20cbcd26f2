"""Fault-tolerant data parallelism in place (torchft's idea and names, on our actors).

    import engine.ft as ft
    manager = ft.Manager(min_replica_size=1)
    model = ft.DistributedDataParallel(manager, model)
    optimizer = ft.OptimizerWrapper(manager, optim.SGD(model.parameters(), lr=0.1))
    for x, y in batches:
        optimizer.zero_grad()                 # starts this step's quorum
        loss_fn(model(x), y).backward()       # gradients averaged over the quorum
        committed = optimizer.step()          # False: the step did not count

A lost rank costs the survivors the step in flight, not a restart; a new or restarted
process joins at a step boundary and receives the state from a live member.
See docs/ELASTIC.md.
"""
from .ddp import DistributedDataParallel
from .holders import NoLiveReplicaError, ReplicasLeftError
from .manager import Manager
from .optimizer import OptimizerWrapper
from .quorum import Plan

__all__ = ["Manager", "DistributedDataParallel", "OptimizerWrapper", "Plan",
           "NoLiveReplicaError", "ReplicasLeftError"]
