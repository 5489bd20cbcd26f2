"""What introspection costs, counted in instructions: steady where clocks are not.

On a host whose wall-clock figures swing by ±10 % between runs, a cost of a few
percent cannot be told from noise by timing (`bench_recorder.py`). Here every
process of a workload runs under valgrind's callgrind, which counts the instructions
each executes in user space. The workloads: rpc_async, 64 in flight, to a second
worker; and the 4 KiB all_reduce on 2 ranks. Each runs at two lengths, with
``ACTORGRAD_INTROSPECTION=1`` and ``0``, `--repeats` times; the difference between
the lengths, divided by the calls between them, is the instructions per call of all
processes together, without start-up and shutdown. Kernel time is not counted, so
the percentage is of the user-space work; the benchmark also prints the share of
user time in the CPU time of the same rpc_async run without valgrind, to scale it.
Needs valgrind; takes 10–25 minutes with the default arguments, by host.
Prints one JSON line. Usage:
``python benchmarks/bench_recorder_instructions.py [--repeats R] [--short N] [--long M]
[--workloads rpc_async all_reduce_4kib]``.
"""
from __future__ import annotations

import argparse
import glob
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from actors.runtime.introspection.recorder import SWITCH_VARIABLE  # noqa: E402
from benchmarks._procs import echo, free_port  # noqa: E402

WINDOW = 64
# Calls per length: (short, long) rpc_async calls; all_reduce calls are a fifth.
DEFAULT_LENGTHS = (640, 3200)
_WAIT = 900.0  # seconds: everything is 20-50 times slower under valgrind


def _rpc_worker(port: int) -> None:
    import actors

    actors.init_rpc("worker1", 1, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=_WAIT)
    actors.shutdown()


def rpc_async(calls: int) -> None:
    """`calls` rpc_async calls, `WINDOW` in flight, to a spawned worker that exits by
    itself (a killed process leaves no count)."""
    import actors

    port = free_port()
    worker = mp.get_context("spawn").Process(target=_rpc_worker, args=(port,))
    worker.start()
    try:
        actors.init_rpc("worker0", 0, 2, timeout=_WAIT, init_method=f"tcp://127.0.0.1:{port}")
        for _ in range(calls // WINDOW):
            actors.wait_all([actors.rpc_async("worker1", echo, args=(1,), timeout=_WAIT)
                             for _ in range(WINDOW)])
        actors.shutdown()
        worker.join(_WAIT)
    finally:
        if worker.is_alive():
            worker.kill()


def _rank(rank: int, port: int, calls: int) -> None:
    import numpy as np

    import actors.distributed as dist

    dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=_WAIT)
    array = np.zeros(1024, np.float32)
    for _ in range(calls):
        dist.all_reduce(array)
    dist.destroy_process_group()


def all_reduce(calls: int) -> None:
    """`calls` 4 KiB all_reduce on 2 spawned ranks."""
    port = free_port()
    ranks = [mp.get_context("spawn").Process(target=_rank, args=(rank, port, calls))
             for rank in range(2)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(_WAIT)
    for process in ranks:
        if process.is_alive():
            process.kill()


WORKLOADS = {"rpc_async": (rpc_async, 1), "all_reduce_4kib": (all_reduce, 5)}


def instructions(workload: str, calls: int, setting: str) -> int:
    """Instructions of every process of one run of `workload` under callgrind."""
    folder = tempfile.mkdtemp(prefix="actorgrad-callgrind-")
    try:
        env = {**os.environ, SWITCH_VARIABLE: setting, "ACTORGRAD_LOG_LEVEL": "warning",
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                        f"--callgrind-out-file={folder}/out.%p", sys.executable, __file__,
                        "--run", workload, str(calls)],
                       env=env, check=True, timeout=3 * _WAIT, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        total = 0
        for path in glob.glob(f"{folder}/out.*"):
            with open(path) as counts:
                total += sum(int(line.split()[1]) for line in counts
                             if line.startswith("summary:"))
        return total
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _user_share(calls: int) -> float:
    """The share of user time in the CPU time of both processes of rpc_async, natively."""
    done = subprocess.run([sys.executable, __file__, "--share", str(calls)], check=True,
                          capture_output=True, text=True, timeout=_WAIT,
                          env={**os.environ, "ACTORGRAD_LOG_LEVEL": "warning"})
    return float(done.stdout.split()[-1])


def _print_share(calls: int) -> None:
    before = os.times()
    rpc_async(calls)
    after = os.times()
    user = after.user - before.user + after.children_user - before.children_user
    system = after.system - before.system + after.children_system - before.children_system
    print(round(user / (user + system), 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2, help="runs per setting and length")
    parser.add_argument("--short", type=int, default=DEFAULT_LENGTHS[0],
                        help="rpc_async calls of the short run (all_reduce: a fifth)")
    parser.add_argument("--long", type=int, default=DEFAULT_LENGTHS[1],
                        help="rpc_async calls of the long run (all_reduce: a fifth)")
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS),
                        default=list(WORKLOADS), help="which workloads to count")
    parser.add_argument("--run", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--share", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        WORKLOADS[args.run[0]][0](int(args.run[1]))
        return
    if args.share:
        _print_share(args.share)
        return
    if shutil.which("valgrind") is None:
        sys.exit("bench_recorder_instructions: needs valgrind (apt-get install valgrind)")
    result: Dict[str, object] = {"workload": "recorder_instructions", "repeats": args.repeats}
    for workload in args.workloads:
        divisor = WORKLOADS[workload][1]
        short, long = args.short // divisor, args.long // divisor
        per_call: Dict[str, List[float]] = {"1": [], "0": []}
        for _ in range(args.repeats):
            for setting in ("1", "0"):
                extra = instructions(workload, long, setting) - \
                    instructions(workload, short, setting)
                per_call[setting].append(extra / (long - short))
        on, off = statistics.mean(per_call["1"]), statistics.mean(per_call["0"])
        result[workload] = {"instructions_per_call_on": round(on),
                            "instructions_per_call_off": round(off),
                            "cost_pct": round(100 * (on - off) / off, 2),
                            "on_runs": [round(v) for v in per_call["1"]],
                            "off_runs": [round(v) for v in per_call["0"]]}
    if "rpc_async" in args.workloads:
        result["rpc_async_user_share_of_cpu"] = _user_share(20 * args.long)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
