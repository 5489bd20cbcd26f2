"""What one point where every member waits costs when members outnumber the cores:
store quorum rounds of `--members` processes, with and without work between them.

Each member runs `--rounds` rounds: `work` products of a (32, 1000) by a (1000, 1000)
float32 array (a forward of `bench_ft.py`'s model; BLAS on one thread, as the launcher
sets it), then one quorum round through our store that expects every member, as
engine.ft's commit vote is. Per setting of `--work`, the median over rounds (after the
first 10) of:

- ``skew_ms``: first arrival → last arrival;
- ``release_ms``: last arrival → the last member back from the round: the round's own
  cost once everyone has arrived (one request from the last member, the server's
  release, every member woken);
- ``work_ms``: one member's work between two rounds, the others working beside it.

`time.perf_counter` is CLOCK_MONOTONIC, comparable across the processes of one host.
Prints one JSON line. Usage: ``python benchmarks/bench_quorum_release.py [--members 4]
[--rounds 60] [--work 0,2,5]``.
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
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import server_process  # noqa: E402
from benchmarks._store_crowds import _end  # noqa: E402
from benchmarks.bench_store import _our_server  # noqa: E402

SKIP = 10  # rounds left out: start-up


def _member(ready: Any, port: int, rank: int, members: int, rounds: int, work: int) -> None:
    """One member: `rounds` of work then a quorum round; puts [(arrived, back, worked)]."""
    os.environ["ACTORGRAD_LOG_LEVEL"] = "warning"
    import numpy as np

    from store import TCPStore

    store = TCPStore("127.0.0.1", port, timeout=60)
    everyone = [str(r) for r in range(members)]
    weights = np.ones((1000, 1000), np.float32)
    batch = np.ones((32, 1000), np.float32)
    store.quorum("start", str(rank), expect=everyone)
    times: List[Tuple[float, float, float]] = []
    for round_ in range(rounds):
        started = time.perf_counter()
        for _ in range(work):
            batch @ weights
        arrived = time.perf_counter()
        store.quorum(f"round/{round_}", str(rank), b"ok", expect=everyone, timeout=60)
        times.append((arrived, time.perf_counter(), arrived - started))
    store.close()
    ready.put(times)


def _collect(ready: Any, procs: List[Any], deadline: float) -> List[Any]:
    """Every member's times; RuntimeError as soon as a member ends without them."""
    logs: List[Any] = []
    while len(logs) < len(procs):
        try:
            logs.append(ready.get(timeout=1))
        except queue.Empty:
            failed = [proc.exitcode for proc in procs if proc.exitcode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                raise RuntimeError(f"members failed (exit codes {failed}) or took over "
                                   f"300 s") from None
    return logs


def rounds_with(work: int, members: int, rounds: int) -> Dict[str, float]:
    """The medians of one setting of `work`, against a fresh server."""
    with server_process(_our_server) as port:
        ctx = mp.get_context("spawn")
        ready = ctx.Queue()
        procs = [ctx.Process(target=_member, args=(ready, port, rank, members, rounds, work),
                             daemon=True) for rank in range(members)]
        for proc in procs:
            proc.start()
        try:
            logs = _collect(ready, procs, time.monotonic() + 300)
        finally:
            _end(procs)
    kept = range(SKIP, rounds)
    arrivals = [[log[r][0] for log in logs] for r in kept]
    backs = [[log[r][1] for log in logs] for r in kept]
    return {"skew_ms": round(statistics.median(max(a) - min(a) for a in arrivals) * 1e3, 3),
            "release_ms": round(statistics.median(max(b) - max(a) for a, b in
                                                  zip(arrivals, backs)) * 1e3, 3),
            "work_ms": round(statistics.median(log[r][2] for log in logs for r in kept) * 1e3,
                             3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--work", default="0,2,5", help="products per round, e.g. 0,2,5")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the members before numpy loads
    result: Dict[str, Any] = {"workload": "quorum_release", "members": args.members,
                              "cores": os.cpu_count()}
    for work in (int(w) for w in args.work.split(",")):
        result[f"work_{work}"] = rounds_with(work, args.members, max(args.rounds, SKIP + 1))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
