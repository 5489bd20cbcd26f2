"""The worker of bench_ft.py, run under ``python -m actors.launch``: data-parallel steps
on a model of about a million parameters, in place (``ft``: engine.ft) or restarted
from a checkpoint (``ddp``: DistributedDataParallel under the restart-all policy);
``ddp-barrier`` is ``ddp`` with a `barrier()` after each step, to measure what one
more point per step where every rank waits for all costs.

Prints ``COMMIT <rank> <step> <t>`` after each committed step, ``KILL <t>`` just before
rank 2 SIGKILLs itself at step ``--kill-at`` (first life only), ``READY <t>`` once a
process has built its model and wrappers; `t` is ``time.monotonic()``, which is the
same clock in every process of the host. At the end rank 0 prints ``PHASES <forward>
<backward> <step>``: the median ms of each part of its steps after the first 10
(``step`` is ``optimizer.step()``, with the barrier in ``ddp-barrier``).
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
from engine import nn  # noqa: E402

WIDTH = 1000  # one 1000x1000 layer and its bias: 1,001,000 parameters


def model() -> nn.Module:
    engine.manual_seed(0)
    return nn.Sequential(nn.Linear(WIDTH, WIDTH))


def say(*fields) -> None:
    print(" ".join(str(f) for f in fields), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["ft", "ddp", "ddp-barrier"])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--kill-at", type=int, default=None)
    parser.add_argument("--checkpoint", default=None)
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    first_life = (os.environ.get("ACTORGRAD_WORKER_RESTART_COUNT", "0") == "0"
                  and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0")
    net = model()
    if args.mode == "ft":
        import engine.ft as ft

        manager = ft.Manager(timeout=10.0, progress=False)
        net = ft.DistributedDataParallel(manager, net)
        optimizer = ft.OptimizerWrapper(manager, engine.optim.SGD(net.parameters(), lr=1e-3))
        step_of = manager.current_step
    else:
        import actors.distributed as dist
        from engine.nn.parallel import DistributedDataParallel

        dist.init_process_group(timeout=60)
        start = 0
        if args.checkpoint and os.path.exists(args.checkpoint):
            with np.load(args.checkpoint) as saved:
                for i, param in enumerate(net.parameters()):
                    param.data[...] = saved[f"p{i}"]
                start = int(saved["step"])
        net = DistributedDataParallel(net)
        optimizer = engine.optim.SGD(net.parameters(), lr=1e-3)
        counter = [start]
        step_of = lambda: counter[0]  # noqa: E731
    say("READY", rank, time.monotonic())
    phases = []  # per step: forward (with zero_grad), backward, optimizer step (+ barrier)
    while step_of() < args.steps:
        step = step_of()
        x = np.random.default_rng([step, rank]).standard_normal((32, WIDTH)).astype(np.float32)
        started = time.perf_counter()
        optimizer.zero_grad()
        loss = (net(engine.from_numpy(x)) ** 2).mean()
        forward_done = time.perf_counter()
        if first_life and rank == 2 and step == args.kill_at:
            say("KILL", time.monotonic())
            os.kill(os.getpid(), signal.SIGKILL)
        loss.backward()
        backward_done = time.perf_counter()
        committed = optimizer.step()
        if args.mode == "ddp-barrier":
            dist.barrier()
        phases.append((forward_done - started, backward_done - forward_done,
                       time.perf_counter() - backward_done))
        if args.mode != "ft":
            counter[0] += 1
            if rank == 0 and args.checkpoint and counter[0] % 10 == 0:
                tmp = f"{args.checkpoint}.tmp.npz"
                np.savez(tmp, step=counter[0],
                         **{f"p{i}": p.data for i, p in enumerate(net.parameters())})
                os.replace(tmp, args.checkpoint)
        elif not committed:
            continue
        say("COMMIT", rank, step_of(), time.monotonic())
    if rank == 0 and len(phases) > 20:
        say("PHASES", *(f"{statistics.median(p[10:]) * 1e3:.2f}" for p in zip(*phases)))
    if args.mode == "ft":
        manager.shutdown()
    else:
        dist.barrier()
        dist.destroy_process_group()
    del world
    return 0


if __name__ == "__main__":
    sys.exit(main())
