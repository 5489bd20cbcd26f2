"""Replicas of a small fault-tolerant training job, run in spawned processes by the tests.

Each replica trains a tiny model on batches that depend only on (seed, step, replica),
reports every step's outcome on a queue, and can be told to fail in one way at one
step: SIGKILL itself in the middle of the all-reduce, SIGKILL itself while it sends
its state to a newcomer, or SIGSTOP itself.
"""
from __future__ import annotations

import hashlib
import os
import signal
import time
from typing import Any, Optional

import numpy as np

import engine
import engine.ft as ft
from engine import nn, optim
from store import TCPStore

DIM = 8


def build(seed: int) -> nn.Module:
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(DIM, 16), nn.Tanh(), nn.Linear(16, 1))
    for param in model.parameters():
        param.data[...] = rng.standard_normal(param.shape).astype(param.dtype) * 0.3
    return model


class WithExtra(nn.Module):
    """`main`, plus a layer that only the replicas told to use it add to the output."""

    def __init__(self, main: nn.Module, seed: int):
        super().__init__()
        self.main = main
        self.extra = nn.Linear(DIM, 1)
        rng = np.random.default_rng(seed + 1)
        for param in self.extra.parameters():
            param.data[...] = rng.standard_normal(param.shape).astype(param.dtype) * 0.3

    def forward(self, x, use_extra: bool):
        out = self.main(x)
        return out + self.extra(x) if use_extra else out


def batch(seed: int, step: int, replica: str):
    rng = np.random.default_rng([seed, step, int(replica)])
    x = rng.standard_normal((16, DIM)).astype(np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)
    return engine.tensor(x), engine.tensor(y)


def digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for param in model.parameters():
        h.update(np.ascontiguousarray(param.data).tobytes())
    return h.hexdigest()


class _Faulty(ft.Manager):
    """A manager that fails on cue: `fault` is (kind, step)."""

    fault: Optional[tuple] = None
    woken = False  # stopped, then continued: its reports queue is closed
    reports: Any = None  # the replicas' shared multiprocessing queue

    def _cue(self, kind: str) -> bool:
        return (self.fault is not None and self.fault[0] == kind and not self.woken
                and self.fault[1] in (None, self.current_step()))

    def allreduce(self, flat: np.ndarray) -> Any:
        work = super().allreduce(flat)
        if self._cue("kill_in_allreduce"):
            self._halt(signal.SIGKILL)
        if self._cue("stop_in_allreduce"):
            self._halt(signal.SIGSTOP)
        return work

    def _halt(self, signum: int) -> None:
        """Kill or stop this process; nothing more is reported from it.

        All writers of a multiprocessing queue share one lock, which this process's
        feeder thread may hold: killed or stopped there, it would silence every replica.
        """
        self.reports.close()
        self.reports.join_thread()
        os.kill(os.getpid(), signum)
        self.woken = True

    def _heal(self, step_plan: Any) -> None:
        if step_plan.send_to and self._cue("kill_in_transfer"):
            from engine.ft import state_transfer

            payload = state_transfer.pack(self._state.get(), self.state_dict())
            import actors.distributed as dist

            dist.send(np.array([payload.size], np.int64), step_plan.send_to[0],
                      group=self._group, tag=state_transfer.TAG)
            self._halt(signal.SIGKILL)
        super()._heal(step_plan)


def run(port: int, session: str, replica: str, world: int, steps: int, results: Any,
        seed: int = 0, fault: Optional[tuple] = None, min_replica_size: int = 1,
        timeout: float = 5.0, deadline: float = 60.0, with_member: Optional[str] = None,
        attempts: Optional[int] = None, join_timeout: float = 60.0,
        extra_on: Optional[str] = None, closure: bool = False) -> None:
    """Train until `steps` steps committed and, if `with_member`, the last 3 committed
    in a row with that member in the quorum (or `attempts` steps tried, or `deadline`
    seconds), reporting each step as
    (replica, step_after, committed, participants, members, digest, pid),
    then (replica, 'done', step, digest, batches); or (replica, 'error', its text) and
    raise. A replica stopped and continued (its queue closed) sets its last report in the
    store instead, at `<session>/end/<replica>`.
    With `extra_on`, the model has a layer that only that replica uses
    (`find_unused_parameters=True`); with `closure`, each step is
    ``optimizer.step(closure)``, the closure clearing the gradients, running forward and
    backward (torch's pattern)."""
    store = TCPStore("127.0.0.1", port, timeout=30)
    manager = _Faulty(min_replica_size, store=store, replica_id=replica, world_size=world,
                      session=session, timeout=timeout, join_timeout=join_timeout,
                      progress=False)
    manager.fault, manager.reports = fault, results
    module = build(seed) if extra_on is None else WithExtra(build(seed), seed)
    model = ft.DistributedDataParallel(manager, module, find_unused_parameters=extra_on is not None)
    inputs = () if extra_on is None else (replica == extra_on,)
    optimizer = ft.OptimizerWrapper(manager, optim.SGD(model.parameters(), lr=0.05,
                                                       momentum=0.9))
    end = time.monotonic() + deadline
    together = 0  # steps committed with `with_member`

    def more() -> bool:
        if attempts is not None:
            return attempts > tried
        return manager.current_step() < steps or (with_member is not None and together < 3)

    def report(item: tuple) -> None:
        if not manager.woken:
            results.put(item)
        elif item[1] in ("done", "error"):  # the queue is closed: the store carries it
            store.set(f"{session}/end/{replica}", repr(item))

    tried = 0
    try:
        while more() and time.monotonic() < end:
            tried += 1
            x, y = batch(seed, manager.current_step(), replica)

            def forward_backward(x: Any = x, y: Any = y) -> Any:
                optimizer.zero_grad()
                loss = nn.functional.mse_loss(model(x, *inputs), y)
                loss.backward()
                return loss

            if closure:
                committed = optimizer.step(forward_backward)
            else:
                forward_backward()
                committed = optimizer.step()
            step_plan = manager.wait_quorum()  # the plan of the step just decided
            if committed:  # the last steps in a row committed with `with_member`
                together = together + 1 if with_member in step_plan.members else 0
            report((replica, manager.current_step(), committed,
                    step_plan.participants if step_plan else 0,
                    step_plan.members if step_plan else (), digest(model.module),
                    os.getpid()))
        report((replica, "done", manager.current_step(), digest(model.module),
                manager.state_dict()["batches_committed"]))
    except Exception as exc:
        report((replica, "error", f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        manager.shutdown()
        store.close()
