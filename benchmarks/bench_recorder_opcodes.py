"""What introspection costs, counted in Python bytecodes: the same on every host.

Wall-clock costs of a few percent drown in a noisy host's swings (`bench_recorder.py`),
and callgrind's instructions need valgrind and tens of minutes
(`bench_recorder_instructions.py`). This counts the bytecodes every thread of a process
executes (`sys.settrace` with opcode events, started before the runtime starts its
threads) while a workload runs, per call and per function, with
``ACTORGRAD_INTROSPECTION=1`` and ``0``: rpc_async (64 in flight) on the caller and on
the worker that serves it, and the 4 KiB all_reduce on rank 0 of 2. The figures are the
Python work the bookkeeping adds, and where; not time (a bytecode's cost varies, and
the kernel's share of a call is not counted). Tracing slows every process several
times, so how the I/O loop batches messages differs from an untraced run.
Prints one JSON line. Usage: ``python benchmarks/bench_recorder_opcodes.py [--calls N]``.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import os
import sys
import threading
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actors.runtime.introspection.recorder import SWITCH_VARIABLE  # noqa: E402
from benchmarks._procs import echo, free_port  # noqa: E402

WINDOW = 64
TOP = 8  # functions listed per side
_WAIT = 600.0
Where = Tuple[str, str]  # (file name, function)

_counts: "collections.Counter[Where]" = collections.Counter()
_counting = [False]


def _trace(frame: Any, event: str, arg: Any) -> Any:
    frame.f_trace_opcodes = True
    if event == "opcode" and _counting[0]:
        code = frame.f_code
        _counts[(os.path.basename(code.co_filename), code.co_name)] += 1
    return _trace


def _start_tracing() -> Any:
    """Trace this process from now; the module whose counters count (imported by its
    name, so that an RPC to its functions reaches the same counters in the worker)."""
    from benchmarks import bench_recorder_opcodes as counter

    threading.settrace(counter._trace)
    sys.settrace(counter._trace)
    return counter


def count_from_now() -> None:
    """Start counting in this process (what the caller asks of the worker, by RPC)."""
    _counts.clear()
    _counting[0] = True


def counted() -> Dict[Where, int]:
    """Stop counting; what was counted."""
    _counting[0] = False
    return dict(_counts)


def _worker(port: int) -> None:
    _start_tracing()
    import actors

    actors.init_rpc("worker1", 1, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=_WAIT)
    actors.shutdown()


def _caller(port: int, calls: int, out: Any) -> None:
    counter = _start_tracing()
    import actors

    def batches(count: int) -> None:
        for _ in range(count):
            actors.wait_all([actors.rpc_async("worker1", echo, args=(1,))
                             for _ in range(WINDOW)])

    actors.init_rpc("worker0", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=_WAIT)
    batches(4)
    actors.rpc_sync("worker1", counter.count_from_now)
    counter.count_from_now()
    batches(calls // WINDOW)
    mine = counter.counted()
    theirs = actors.rpc_sync("worker1", counter.counted)
    out.put({"caller": mine, "worker": theirs})
    actors.shutdown()


def _rank(rank: int, port: int, calls: int, out: Any) -> None:
    counter = _start_tracing()
    import numpy as np

    import actors.distributed as dist

    dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=_WAIT)
    array = np.zeros(1024, np.float32)
    for _ in range(100):
        dist.all_reduce(array)
    dist.barrier()
    counter.count_from_now()
    for _ in range(calls):
        dist.all_reduce(array)
    mine = counter.counted()
    dist.barrier()
    if rank == 0:
        out.put({"rank0": mine})
    dist.destroy_process_group()


def _run(setting: str, targets: List[Tuple[Any, tuple]], out: Any
         ) -> Dict[str, Dict[Where, int]]:
    """Start `targets` with introspection `setting` (read by each child as it imports the
    runtime); what one of them puts on `out`."""
    ctx = mp.get_context("spawn")
    processes = [ctx.Process(target=target, args=args) for target, args in targets]
    os.environ.update({SWITCH_VARIABLE: setting, "ACTORGRAD_LOG_LEVEL": "warning"})
    for process in processes:
        process.start()
    try:
        counts = out.get(timeout=_WAIT)
        for process in processes:
            process.join(60)
        return counts
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()


def rpc_async(setting: str, calls: int) -> Dict[str, Dict[Where, int]]:
    """Bytecodes of the caller and of the worker over `calls` rpc_async calls."""
    out, port = mp.get_context("spawn").Queue(), free_port()
    return _run(setting, [(_worker, (port,)), (_caller, (port, calls, out))], out)


def all_reduce(setting: str, calls: int) -> Dict[str, Dict[Where, int]]:
    """Bytecodes of rank 0 over `calls` 4 KiB all_reduce on 2 ranks."""
    out, port = mp.get_context("spawn").Queue(), free_port()
    return _run(setting, [(_rank, (rank, port, calls, out)) for rank in range(2)], out)


def compare(on: Dict[Where, int], off: Dict[Where, int], calls: int) -> Dict[str, Any]:
    """Bytecodes per call with the bookkeeping on and off, and the functions that differ."""
    per_on, per_off = sum(on.values()) / calls, sum(off.values()) / calls
    added = {where: (on.get(where, 0) - off.get(where, 0)) / calls
             for where in set(on) | set(off)}
    top = sorted(added.items(), key=lambda item: -abs(item[1]))[:TOP]
    return {"per_call_on": round(per_on, 1), "per_call_off": round(per_off, 1),
            "cost_pct": round(100 * (per_on - per_off) / per_off, 2),
            "added_per_call": {f"{file}:{function}": round(n, 1) for (file, function), n in top}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1024,
                        help="rpc_async calls (a multiple of 64); all_reduce: a third")
    args = parser.parse_args()
    calls = max(1, args.calls // WINDOW) * WINDOW
    rpc = {setting: rpc_async(setting, calls) for setting in ("1", "0")}
    reduce_calls = calls // 3
    reduced = {setting: all_reduce(setting, reduce_calls) for setting in ("1", "0")}
    print(json.dumps({
        "workload": "recorder_opcodes", "calls": calls,
        "rpc_async_caller": compare(rpc["1"]["caller"], rpc["0"]["caller"], calls),
        "rpc_async_worker": compare(rpc["1"]["worker"], rpc["0"]["worker"], calls),
        "all_reduce_4kib_rank0": compare(reduced["1"]["rank0"], reduced["0"]["rank0"],
                                         reduce_calls),
    }))


if __name__ == "__main__":
    main()
