"""OS thread count and RSS of an idle RPC worker, in worlds of 4 and 16 workers.

Why: a worker's threads should not grow with the number of peers it talks to (no
thread per connection). For each world size N, N spawned processes join one
actorgrad RPC world (rank 0 hosts the store), each makes one `rpc_sync` call to
every other worker so that it holds connections to all its peers, and then sits
idle. Once every worker's thread count has settled (equal across two reads 200 ms
apart), this process reads each worker's thread count from ``/proc/<pid>/task`` and
its resident memory (VmRSS) from ``/proc/<pid>/status``, and reports the median and
max over the workers. ``threads_grow_with_peers`` is whether the largest world's
median exceeds the smallest world's.

Prints one JSON line. Usage: ``python benchmarks/bench_threads.py [--sizes 4,16]``.
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

from benchmarks._procs import free_port  # noqa: E402

REPORT_TIMEOUT = 120.0   # seconds for all workers to come up, call their peers and report
IDLE_TIMEOUT = 30.0      # seconds for the thread counts to settle
IDLE_INTERVAL = 0.2      # seconds between the two reads that must agree
EXIT_TIMEOUT = 60.0      # seconds for the workers to shut down and exit


# ---- the worker process ---------------------------------------------------------------

def _worker(rank: int, world_size: int, port: int, reports: Any, done: Any) -> None:
    """One RPC worker: join, call every peer once, report the pid, idle until `done`."""
    os.environ["ACTORGRAD_LOG_LEVEL"] = "warning"
    try:
        import actors

        actors.init_rpc(f"worker{rank}", rank=rank, world_size=world_size,
                        init_method=f"tcp://127.0.0.1:{port}", timeout=REPORT_TIMEOUT)
        for peer in range(world_size):
            if peer != rank:
                actors.rpc_sync(f"worker{peer}", os.getpid, timeout=REPORT_TIMEOUT)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails
        reports.put((rank, None, f"{type(exc).__name__}: {exc}"))
        raise
    reports.put((rank, os.getpid(), None))
    # flush and end the queue's feeder thread, so the harness adds no thread to the count
    reports.close()
    reports.join_thread()
    done.wait(REPORT_TIMEOUT + IDLE_TIMEOUT + 60)
    actors.shutdown(timeout=EXIT_TIMEOUT / 2)


# ---- reading /proc --------------------------------------------------------------------

def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024  # the kernel reports kB
    raise RuntimeError(f"no VmRSS for pid {pid}")


def wait_idle(pids: List[int], timeout: float = IDLE_TIMEOUT) -> bool:
    """Wait until every process's thread count is equal across two reads IDLE_INTERVAL apart.

    Returns False if the counts were still changing at the deadline.
    """
    deadline = time.monotonic() + timeout
    before = [thread_count(pid) for pid in pids]
    while time.monotonic() < deadline:
        time.sleep(IDLE_INTERVAL)
        after = [thread_count(pid) for pid in pids]
        if after == before:
            return True
        before = after
    return False


# ---- one world ------------------------------------------------------------------------

def measure_world(n: int) -> Dict[str, Any]:
    ctx = mp.get_context("spawn")
    port = free_port()
    reports = ctx.Queue()
    done = ctx.Event()
    procs = [ctx.Process(target=_worker, args=(rank, n, port, reports, done), daemon=True)
             for rank in range(n)]
    try:
        for proc in procs:
            proc.start()
        pids: Dict[int, int] = {}
        deadline = time.monotonic() + REPORT_TIMEOUT
        while len(pids) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"world {n}: only {len(pids)} workers reported in time")
            try:
                rank, pid, error = reports.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [p.exitcode for p in procs if p.exitcode is not None]
                if dead:
                    raise RuntimeError(f"world {n}: a worker exited early ({dead})") from None
                continue
            if error is not None:
                raise RuntimeError(f"world {n}: worker{rank} failed: {error}")
            pids[rank] = pid
        ordered = [pids[rank] for rank in range(n)]
        settled = wait_idle(ordered)
        threads = [thread_count(pid) for pid in ordered]
        rss = [rss_mib(pid) for pid in ordered]
        if not settled:
            print(f"world {n}: thread counts still changing after {IDLE_TIMEOUT}s",
                  file=sys.stderr)
        print(f"world {n}: threads per worker {threads}", file=sys.stderr)
        done.set()
        deadline = time.monotonic() + EXIT_TIMEOUT
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        stuck = [rank for rank, proc in enumerate(procs) if proc.is_alive()]
        if stuck:
            print(f"world {n}: workers {stuck} did not exit in {EXIT_TIMEOUT}s; killing",
                  file=sys.stderr)
        return {
            "threads_median": statistics.median(threads),
            "threads_max": max(threads),
            "rss_mib_median": round(statistics.median(rss), 1),
            "rss_mib_max": round(max(rss), 1),
            "settled": settled,
        }
    finally:
        done.set()
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        for proc in procs:
            proc.join(10)
        reports.close()
        reports.join_thread()


def main(argv: Optional[List[str]] = None) -> None:
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4,16", help="comma-separated world sizes")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    worlds = {str(n): measure_world(n) for n in sizes}
    smallest, largest = str(min(sizes)), str(max(sizes))
    print(json.dumps({
        "benchmark": "idle_worker_threads",
        "worlds": worlds,
        "threads_grow_with_peers":
            worlds[largest]["threads_median"] > worlds[smallest]["threads_median"],
    }))


if __name__ == "__main__":
    main()
