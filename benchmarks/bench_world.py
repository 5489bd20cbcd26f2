"""World formation at scale: N worker processes form one RPC world (or process group).

For each N, N spawned processes import the library, report, and wait; the parent
then releases them all at once, and each calls `init_rpc` (rank 0 hosts the store).

- `init_s`: from the release until the last `init_rpc` returns, so process start
  and imports are left out (they are in `start_s`);
- `start_s`: from spawning the first process until the last `init_rpc` returns;
- `all_to_all_s`: every worker then calls every other once (`rpc_sync`), N × (N-1)
  calls in all: from the first call made until the last answered;
- `threads` and `rss_mib` per worker (median, max) after the all-to-all, from /proc;
- `shutdown_s`: from telling the workers to shut down until the last has exited.

With `--group`, the workers call `init_process_group` and an `all_reduce` instead
of the RPC calls (and torch uses gloo). Torch's `init_rpc` (TensorPipe) runs the
same way when torch is importable, for the sizes in `--torch-sizes`.

Prints one JSON line. Usage: ``python benchmarks/bench_world.py [--sizes 16,32,64]
[--torch-sizes 16,32] [--group]``.
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
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import free_port, ratio  # noqa: E402
from benchmarks.bench_threads import rss_mib, thread_count  # noqa: E402

STEP_TIMEOUT = 300.0  # seconds for any one step of a world (start, init, calls, exit)


def _peer_pid() -> int:
    return os.getpid()


# ---- the worker process ---------------------------------------------------------------

def _worker(impl: str, group: bool, rank: int, n: int, port: int, reports: Any,
            go: Any, finish: Any) -> None:
    """Import, report 'imported', wait for `go`; init; the round; report; wait; shut down."""
    os.environ["ACTORGRAD_LOG_LEVEL"] = "warning"
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        if impl == "torch":
            import torch
            import torch.distributed as dist
            from torch.distributed import rpc
        else:
            import actors as rpc
            import actors.distributed as dist
        import numpy as np
        reports.put(("imported", rank, os.getpid()))
        go.wait(STEP_TIMEOUT)
        init_method = f"tcp://127.0.0.1:{port}"
        began = time.time()
        if group:
            if impl == "torch":
                dist.init_process_group("gloo", init_method=init_method, rank=rank,
                                        world_size=n)
            else:
                dist.init_process_group(init_method=init_method, rank=rank, world_size=n)
        elif impl == "torch":
            rpc.init_rpc(f"worker{rank}", rank=rank, world_size=n,
                         rpc_backend_options=rpc.TensorPipeRpcBackendOptions(
                             init_method=init_method, rpc_timeout=STEP_TIMEOUT))
        else:
            rpc.init_rpc(f"worker{rank}", rank=rank, world_size=n, init_method=init_method,
                         timeout=STEP_TIMEOUT)
        formed = time.time()
        if group:
            array = torch.ones(4) * rank if impl == "torch" else np.full(4, float(rank))
            dist.all_reduce(array)
            assert float(array[0]) == n * (n - 1) / 2, array
        else:
            for peer in range(n):
                if peer != rank:
                    assert rpc.rpc_sync(f"worker{peer}", _peer_pid) > 0
        reports.put(("formed", rank, (began, formed, time.time())))
        finish.wait(STEP_TIMEOUT)
        if group:
            dist.destroy_process_group()
        else:
            rpc.shutdown()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails
        reports.put(("error", rank, f"{type(exc).__name__}: {exc}"))
        raise


# ---- one world ------------------------------------------------------------------------

def _collect(reports: Any, kind: str, n: int, procs: List[Any]) -> Dict[int, Any]:
    got: Dict[int, Any] = {}
    deadline = time.monotonic() + STEP_TIMEOUT
    while len(got) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(got)} of {n} workers reported {kind!r}")
        try:
            what, rank, value = reports.get(timeout=1.0)
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"workers exited early: {dead}") from None
            continue
        if what == "error":
            raise RuntimeError(f"worker{rank}: {value}")
        got[rank] = value
    return got


def measure_world(impl: str, n: int, group: bool) -> Dict[str, Any]:
    ctx = mp.get_context("spawn")
    port = free_port()
    reports, go, finish = ctx.Queue(), ctx.Event(), ctx.Event()
    procs = [ctx.Process(target=_worker, args=(impl, group, rank, n, port, reports, go,
                                                finish), daemon=True)
             for rank in range(n)]
    spawned = time.time()
    try:
        for proc in procs:
            proc.start()
        pids = _collect(reports, "imported", n, procs)
        released = time.time()
        go.set()
        times = _collect(reports, "formed", n, procs)
        ordered = [pids[rank] for rank in range(n)]
        threads = [thread_count(pid) for pid in ordered]
        rss = [rss_mib(pid) for pid in ordered]
        last_formed = max(t[1] for t in times.values())
        told = time.time()
        finish.set()
        deadline = time.monotonic() + STEP_TIMEOUT
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        exited = time.time()
        return {
            "init_s": round(last_formed - released, 3),
            "start_s": round(last_formed - spawned, 3),
            "round_s": round(max(t[2] for t in times.values()) -
                             min(t[1] for t in times.values()), 3),
            "threads_median": statistics.median(threads), "threads_max": max(threads),
            "rss_mib_median": round(statistics.median(rss), 1),
            "rss_mib_max": round(max(rss), 1),
            "shutdown_s": round(exited - told, 3),
            "exit_codes_nonzero": sum(proc.exitcode != 0 for proc in procs),
        }
    finally:
        go.set()
        finish.set()
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        for proc in procs:
            proc.join(10)


def _torch_available() -> bool:
    try:
        import torch.distributed.rpc  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means no comparison
        return False
    return True


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="16,32,64")
    parser.add_argument("--torch-sizes", default="16,32,64")
    parser.add_argument("--group", action="store_true",
                        help="init_process_group and an all_reduce instead of RPC")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    torch_sizes = [int(s) for s in args.torch_sizes.split(",") if s] \
        if _torch_available() else []
    result: Dict[str, Any] = {"benchmark": "world formation",
                              "kind": "process group" if args.group else "rpc"}
    result["ours"] = {f"n{n}": measure_world("ours", n, args.group) for n in sizes}
    if torch_sizes:
        result["torch"] = {f"n{n}": measure_world("torch", n, args.group)
                           for n in torch_sizes}
        result["init_ours_over_torch"] = {
            f"n{n}": ratio(result["ours"][f"n{n}"]["init_s"], result["torch"][f"n{n}"]["init_s"])
            for n in sizes if n in torch_sizes}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
