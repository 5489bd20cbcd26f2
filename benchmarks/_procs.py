"""Helpers the benchmarks share: start a server in a spawned process, take medians,
and read the CPU time of this process's threads."""
from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import threading
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional


@contextmanager
def server_process(target: Callable[..., Any], *args: Any, timeout: float = 60.0) -> Iterator[Any]:
    """Run `target(ready_queue, *args)` in a spawned process; yield what it puts on the queue."""
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    proc = ctx.Process(target=target, args=(ready, *args), daemon=True)
    proc.start()
    try:
        yield ready.get(timeout=timeout)
    finally:
        proc.kill()
        proc.join(10)


def free_port() -> int:
    """A TCP port on 127.0.0.1 for a server that binds it later (`actors.runtime.io.ports`;
    imported here, not at the top, so that raw pyzmq's and torch's processes load none
    of the runtime)."""
    from actors.runtime.io.ports import free_port as pick

    return pick()


def echo(value: Any) -> Any:
    """The remote function of the RPC benchmarks (importable, so pickled by reference)."""
    return value


def median_of(runs: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(runs))


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else float("nan")


def percentile(values: List[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def actorgrad_worker(ready: Any, port: int, count_requests: bool = False) -> None:
    """Rank 1 ("worker1") of a two-worker actorgrad world whose rank 0 is the benchmark."""
    import os

    os.environ["ACTORGRAD_LOG_LEVEL"] = "warning"
    import actors

    if count_requests:
        from benchmarks import _counting

        _counting.install()
    ready.put(os.getpid())  # for a benchmark that reads this process's CPU time
    actors.init_rpc("worker1", 1, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=60)
    actors.shutdown()


def torch_worker(ready: Any, port: int) -> None:
    """Rank 1 ("worker1") of a two-worker torch RPC world whose rank 0 is the benchmark."""
    import os

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch.distributed.rpc as rpc

    ready.put("up")
    rpc.init_rpc("worker1", rank=1, world_size=2)
    rpc.shutdown()


def thread_ticks(kind_of: Callable[[str], Optional[str]]) -> Dict[str, int]:
    """CPU clock ticks (user and system) of this process's threads by kind: "calling"
    (this thread), "libzmq_io", `kind_of(thread name)` when it names one, else "other"."""
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    ticks: Dict[str, int] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/comm") as comm:
                os_name = comm.read().strip()
        except FileNotFoundError:  # ended meanwhile
            continue
        if int(tid) == threading.get_native_id():
            kind = "calling"
        elif os_name.startswith("ZMQbg"):
            kind = "libzmq_io"
        else:
            kind = kind_of(names.get(int(tid), os_name)) or "other"
        ticks[kind] = ticks.get(kind, 0) + int(fields[11]) + int(fields[12])
    return ticks
