"""Where a small collective's CPU goes, thread by thread: the 4-rank barrier and the 4
KiB all_reduce at 2 ranks, each called back to back, with the CPU time (user and
system, from /proc) that rank 0's threads spend per call: the calling thread, the
transport's I/O thread (ours), libzmq's I/O threads, and any other. Side by side in
one run: ours, raw pyzmq (`bench_collectives._RawZmq`: every socket on the calling
thread) and torch's gloo when torch is importable. With four ranks on a 2-core host
a barrier is bound by the CPU all ranks spend, so the threads' sum is its price.
Prints one JSON line. Usage: ``python benchmarks/bench_collective_threads.py
[--calls N]`` (barriers; twice as many all_reduces).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import thread_ticks  # noqa: E402
from benchmarks.bench_collectives import run  # noqa: E402

CALLS = 3000


def _thread_ticks() -> Dict[str, int]:
    return thread_ticks(lambda name: "transport_io"
                        if name.startswith("pg-") and name.endswith("-io") else None)


def _back_to_back(system: Any, call: Any, calls: int) -> Dict[str, Any]:
    for _ in range(min(300, calls)):
        call()
    system.dist.barrier()
    before, start = _thread_ticks(), time.perf_counter()
    for _ in range(calls):
        call()
    elapsed, after = time.perf_counter() - start, _thread_ticks()
    per_call = 1e6 / os.sysconf("SC_CLK_TCK") / calls
    cpu = {kind: round((after[kind] - before.get(kind, 0)) * per_call, 1) for kind in after}
    return {"us": round(elapsed / calls * 1e6, 1), "cpu_us": cpu,
            "cpu_us_total": round(sum(cpu.values()), 1)}


def barrier(system: Any, rank: int, world: int, quick: bool) -> Dict[str, Any]:
    return _back_to_back(system, system.dist.barrier, int(os.environ["BENCH_CALLS"]))


def all_reduce(system: Any, rank: int, world: int, quick: bool) -> Dict[str, Any]:
    array = system.array(4096)
    array *= 0  # sums that stay finite however many calls
    return _back_to_back(system, lambda: system.dist.all_reduce(array),
                         2 * int(os.environ["BENCH_CALLS"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=CALLS, help="barriers per system")
    args = parser.parse_args()
    os.environ.update(BENCH_CALLS=str(args.calls), OMP_NUM_THREADS="1")
    try:
        import torch  # noqa: F401

        kinds = ["ours", "raw_pyzmq", "torch"]
    except ImportError:
        kinds = ["ours", "raw_pyzmq"]
    report: Dict[str, Any] = {"workload": "collective_threads", "calls": args.calls}
    for kind in kinds:
        report[kind] = {"barrier_4_ranks": run(kind, barrier, 4, False),
                        "all_reduce_4kib_2_ranks": run(kind, all_reduce, 2, False)}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
