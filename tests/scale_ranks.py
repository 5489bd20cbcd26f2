"""Rank bodies for the scale tests: what each of 64 spawned processes does."""
from __future__ import annotations

import operator
import os
from typing import Any, Tuple

import numpy as np

CALL_TIMEOUT = 120.0


def resources() -> Tuple[int, float]:
    """(OS threads, resident MiB) of this process."""
    with open("/proc/self/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return len(os.listdir("/proc/self/task")), rss / 1024


def rpc_rank(rank: int, world: int, port: int, results: Any) -> None:
    """Join the RPC world, call every other worker once, report, shut down."""
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    try:
        import actors

        actors.init_rpc(f"worker{rank}", rank=rank, world_size=world,
                        init_method=f"tcp://127.0.0.1:{port}", timeout=CALL_TIMEOUT)
        peers = [peer for peer in range(world) if peer != rank]
        futures = [actors.rpc_async(f"worker{peer}", operator.mul, args=(peer, 10))
                   for peer in peers]
        answers = [future.wait() for future in futures]
        threads, rss = resources()
        actors.shutdown()
        results.put((rank, "ok", (answers == [peer * 10 for peer in peers], threads, rss)))
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        results.put((rank, "error", f"{type(exc).__name__}: {exc}"))


def all_reduce_rank(rank: int, world: int) -> Tuple[float, int, float]:
    """(the all-reduced sum of the ranks, threads, resident MiB) in a process group, after
    a barrier (dissemination rounds at this size)."""
    import actors.distributed as dist

    dist.barrier()
    array = np.full(8, float(rank))
    dist.all_reduce(array)
    return (float(array[0]), *resources())
