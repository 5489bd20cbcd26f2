"""W7: collectives and a DDP training step, ours against torch's gloo backend, same run.

One process per rank, one BLAS/OpenMP thread each (as torchrun sets). Figures:
all_reduce of float32 (latency at 4 KiB, bus bandwidth at 1, 16 and 64 MiB) with 2
and 4 ranks; broadcast of 16 MiB, all_gather of 4 MiB per rank and barrier with 4;
W7e one training step of the MLP 784-512-512-10 on a batch of 64 per rank with DDP
on 2 ranks, and the same step in one process without DDP; W7f one rank of 3 killed
during a loop of all_reduce: how many survivors raised, and when the last did (None:
one waited longer than 20 s). Bus bandwidth is torch's
(nccl-tests') definition: 2 (n-1)/n × bytes / time for all_reduce. The collectives
run a second time with shared memory off (``zeromq_only``: every byte over ZeroMQ,
as between hosts), to show what the same-host path is worth. ``raw_pyzmq`` is the
floor of any collective over ZeroMQ in Python: the 4 KiB all_reduce and the barrier
done with bare pyzmq sockets (each rank a ROUTER and a DEALER to each peer; every
rank sends to every other, as ours does). Prints one JSON line.
Usage: ``python benchmarks/bench_collectives.py [--quick]``.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import statistics
import sys
import time
from typing import Any, Callable, Dict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import free_port, ratio  # noqa: E402

MiB = 1 << 20
# How long W7f waits for a survivor to raise (torch's group timeout is set to this).
_KILL_WAIT = 20.0


class _Ours:
    def __init__(self, rank: int, world: int, port: int):
        import actors.distributed as dist

        self.dist = dist
        dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)

    def array(self, nbytes: int) -> Any:
        import numpy as np

        return np.ones(nbytes // 4, np.float32)

    def close(self) -> None:
        self.dist.destroy_process_group()


class _Torch:
    def __init__(self, rank: int, world: int, port: int):
        import torch.distributed as dist

        self.dist = dist
        from datetime import timedelta

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=_KILL_WAIT))

    def array(self, nbytes: int) -> Any:
        import torch

        return torch.ones(nbytes // 4, dtype=torch.float32)

    def close(self) -> None:
        self.dist.destroy_process_group()


class _RawZmq:
    """Bare pyzmq all-to-all: the 4 KiB all_reduce and the barrier with nothing else.

    `ports[r]` is rank r's ROUTER. A rank's DEALERs present its rank as their identity;
    what each peer sent waits in its own queue, so that a peer one round ahead is never
    counted in the current round.
    """

    def __init__(self, rank: int, world: int, ports: Any):
        import collections

        import zmq

        self.dist, self.rank, self.world = self, rank, world
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.bind(f"tcp://127.0.0.1:{ports[rank]}")
        self.dealers = {}
        for peer in range(world):
            if peer != rank:
                dealer = self.ctx.socket(zmq.DEALER)
                dealer.setsockopt(zmq.IDENTITY, b"%d" % rank)
                dealer.connect(f"tcp://127.0.0.1:{ports[peer]}")
                self.dealers[peer] = dealer
        self.inbox = collections.defaultdict(collections.deque)
        self._exchange(b"")  # every connection up

    def _exchange(self, data: Any) -> list:
        for dealer in self.dealers.values():
            dealer.send(data, copy=False)
        while any(not self.inbox[peer] for peer in self.dealers):
            identity, frame = self.router.recv_multipart(copy=False)
            self.inbox[int(identity.bytes)].append(frame)
        return [self.inbox[peer].popleft() for peer in self.dealers]

    def array(self, nbytes: int) -> Any:
        import numpy as np

        return np.zeros(nbytes // 4, np.float32)

    def barrier(self) -> None:
        self._exchange(b"")

    def all_reduce(self, array: Any) -> None:
        import numpy as np

        for frame in self._exchange(array):
            array += np.frombuffer(frame.buffer, array.dtype)

    def close(self) -> None:
        self.barrier()  # nobody closes while a peer still waits for its message
        self.ctx.destroy(linger=1000)


def _timed(dist: Any, run: Callable[[], None], iters: int) -> float:
    """Median seconds of `iters` runs, each between two barriers (rank 0's clock)."""
    run()
    times = []
    for _ in range(iters):
        dist.barrier()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _iterations(nbytes: int) -> int:
    """Enough for a stable median: latency figures swing by a third between short runs."""
    return 200 if nbytes <= 4096 else 30 if nbytes <= MiB else 5


def _collectives(system: Any, rank: int, world: int, quick: bool) -> Dict[str, float]:
    dist = system.dist
    out: Dict[str, float] = {}
    sizes = [4096, MiB, 16 * MiB] + ([] if quick else [64 * MiB])
    for nbytes in sizes:
        array = system.array(nbytes)
        seconds = _timed(dist, lambda a=array: dist.all_reduce(a), _iterations(nbytes))
        if nbytes == 4096:
            out["all_reduce_4kib_us"] = seconds * 1e6
        else:
            out[f"all_reduce_{nbytes // MiB}mib_busbw_gbs"] = \
                2 * (world - 1) / world * nbytes / seconds / 1e9
    if world == 4:
        array = system.array(16 * MiB)
        out["broadcast_16mib_ms"] = _timed(dist, lambda: dist.broadcast(array, src=0), 5) * 1e3
        piece = system.array(4 * MiB)
        pieces = [system.array(4 * MiB) for _ in range(world)]
        out["all_gather_4mib_ms"] = _timed(dist, lambda: dist.all_gather(pieces, piece), 5) * 1e3
        out["barrier_us"] = _timed(dist, dist.barrier, _iterations(0)) * 1e6
    return out


def _latency(system: Any, rank: int, world: int, quick: bool) -> Dict[str, float]:
    """The 4 KiB all_reduce alone (any system, raw pyzmq too)."""
    array = system.array(4096)
    run = system.dist.all_reduce
    iters = 20 if quick else _iterations(4096)
    return {"all_reduce_4kib_us": _timed(system.dist, lambda: run(array), iters) * 1e6}


def _loop(system: Any, rank: int, world: int, quick: bool) -> Dict[str, float]:
    """The 4 KiB all_reduce back to back, as a training loop runs it: the mean µs per
    call over 3,000 calls (500 with `quick`), steadier than a median of single calls,
    and this rank's CPU µs per call."""
    array = system.array(4096)
    array *= 0  # sums that stay finite however many calls
    run = system.dist.all_reduce
    calls = 500 if quick else 3000
    for _ in range(100):
        run(array)
    system.dist.barrier()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        run(array)
    return {"all_reduce_4kib_loop_us": (time.perf_counter() - start) / calls * 1e6,
            "all_reduce_4kib_loop_cpu_us": (time.process_time() - cpu) / calls * 1e6}


def _floor(system: Any, rank: int, world: int, quick: bool) -> Dict[str, float]:
    """The raw pyzmq floor: the 4 KiB all_reduce, and the barrier at 4 ranks."""
    array = system.array(4096)
    out = {"all_reduce_4kib_us": _timed(system, lambda: system.all_reduce(array),
                                        _iterations(4096)) * 1e6}
    if world == 4:
        out["barrier_us"] = _timed(system, system.barrier, _iterations(0)) * 1e6
    return out


def _ddp_step(system: Any, rank: int, world: int, quick: bool) -> Dict[str, float]:
    """Median time of a training step of the MLP with DDP."""
    import numpy as np

    x = np.random.default_rng(rank).standard_normal((64, 784)).astype(np.float32)
    y = np.random.default_rng(rank).integers(0, 10, 64)
    step = _ours_step(x, y, ddp=True) if isinstance(system, _Ours) else _torch_step(x, y)
    figures = {"ddp_step_ms": _timed(system.dist, step, 10 if quick else 30) * 1e3}
    if isinstance(system, _Ours):  # what walking the graph at each forward costs
        step = _ours_step(x, y, ddp=True, find_unused_parameters=True)
        figures["ddp_step_find_unused_ms"] = _timed(system.dist, step, 10 if quick else 30) * 1e3
    return figures


def _ours_step(x: Any, y: Any, ddp: bool, find_unused_parameters: bool = False
               ) -> Callable[[], None]:
    import engine
    from engine import nn
    from engine.nn import functional as F
    from engine.nn.parallel import DistributedDataParallel

    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    if ddp:
        model = DistributedDataParallel(model, find_unused_parameters=find_unused_parameters)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(model(engine.from_numpy(x)), engine.from_numpy(y)).backward()
        optimizer.step()

    return step


def _torch_step(x: Any, y: Any) -> Callable[[], None]:
    import torch
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step() -> None:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(xt), yt).backward()
        optimizer.step()

    return step


def _kill_one(system: Any, rank: int, world: int, killed_at: Any) -> Dict[str, float]:
    """W7f: all_reduce in a loop; the last rank kills itself after 20 rounds. A survivor
    reports the seconds from the kill until its all_reduce raised."""
    import signal

    array = system.array(4096)
    for round_ in range(100_000):
        if rank == world - 1 and round_ == 20:
            killed_at.value = time.perf_counter()
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            system.dist.all_reduce(array)
        except Exception:  # noqa: BLE001 - what every survivor should see
            return {f"rank{rank}_raised_after_kill_ms": (time.perf_counter() - killed_at.value)
                    * 1e3}
    return {}


def _rank(kind: str, task: Any, rank: int, world: int, port: int, quick: bool,
          results: Any, killed_at: Any) -> None:
    os.environ["ACTORGRAD_LOG_LEVEL"] = "warning"
    if kind == "zeromq_only":
        os.environ["ACTORGRAD_SHARED_MEMORY"] = "0"
    if kind == "torch":
        import torch

        torch.set_num_threads(1)
    system = {"torch": _Torch, "raw_pyzmq": _RawZmq}.get(kind, _Ours)(rank, world, port)
    if task == "kill":
        results.put(_kill_one(system, rank, world, killed_at))
        results.close()
        results.join_thread()  # delivered before the exit below
        os._exit(0)  # a group with a dead rank cannot be torn down in order
    try:
        body = task if callable(task) else {
            "collectives": _collectives, "floor": _floor, "ddp": _ddp_step,
            "latency": _latency, "loop": _loop}[task]
        figures = body(system, rank, world, quick)
    finally:
        system.close()
    if rank == 0:
        results.put(figures)


def run(kind: str, task: Any, world: int, quick: bool) -> Dict[str, float]:
    """Rank 0's figures of `task` (a name above, or a function of (system, rank, world,
    quick) that every rank runs) on `world` ranks of `kind`."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    killed_at = ctx.Value("d", 0.0)
    port = tuple(free_port() for _ in range(world)) if kind == "raw_pyzmq" else free_port()
    procs = [ctx.Process(target=_rank, args=(kind, task, r, world, port, quick, results,
                                             killed_at), daemon=True) for r in range(world)]
    for proc in procs:
        proc.start()
    try:
        if task != "kill":
            return results.get(timeout=600)
        figures: Dict[str, float] = {}
        for _ in range(world - 1):  # a survivor that never raises is reported as missing
            try:
                figures.update(results.get(timeout=_KILL_WAIT))
            except queue.Empty:
                break
        return figures
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()


def _single_step(quick: bool) -> float:
    import numpy as np

    x = np.random.default_rng(0).standard_normal((64, 784)).astype(np.float32)
    y = np.random.default_rng(0).integers(0, 10, 64)
    step = _ours_step(x, y, ddp=False)
    step()
    times = []
    for _ in range(10 if quick else 30):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="no 64 MiB, fewer repetitions")
    args = parser.parse_args()
    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        import torch  # noqa: F401

        kinds = ["ours", "torch"]
    except ImportError:
        kinds = ["ours"]
    report: Dict[str, Any] = {"workload": "W7", "quick": args.quick}
    for kind in kinds:
        figures: Dict[str, float] = {}
        for world in (2, 4):
            for key, value in run(kind, "collectives", world, args.quick).items():
                figures[f"w{world}_{key}"] = round(value, 3)
        figures.update({k: round(v, 3) for k, v in run(kind, "ddp", 2, args.quick).items()})
        killed = run(kind, "kill", 3, args.quick)
        figures["w7f_survivors_raised"] = len(killed)
        figures["w7f_last_survivor_raised_ms"] = round(max(killed.values()), 1) \
            if len(killed) == 2 else None
        report[kind] = figures
    report["zeromq_only"] = {f"w{world}_{key}": round(value, 3) for world in (2, 4)
                             for key, value in run("zeromq_only", "collectives", world,
                                                   args.quick).items()}
    report["raw_pyzmq"] = {f"w{world}_{key}": round(value, 3) for world in (2, 4)
                           for key, value in run("raw_pyzmq", "floor", world, args.quick).items()}
    report["ours"]["single_process_step_ms"] = round(_single_step(args.quick), 3)
    if "torch" in report:
        ours, torch_ = report["ours"], report["torch"]
        report["ratios"] = {f"{k}_ours_vs_torch": ratio(ours[k], torch_[k])
                            for k in ours if k in torch_ and ours[k] and torch_[k]}
        report["raw_pyzmq_vs_torch"] = {k: ratio(v, torch_[k])
                                        for k, v in report["raw_pyzmq"].items() if k in torch_}
    report["ours_vs_raw_pyzmq"] = {k: ratio(report["ours"][k], v)
                                   for k, v in report["raw_pyzmq"].items()}
    report["shared_vs_zeromq_only"] = {k: ratio(report["ours"][k], v)
                                       for k, v in report["zeromq_only"].items() if v}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
