"""What introspection costs: rpc_async throughput and the 4 KiB all_reduce with it on
(the default) and off, in alternating rounds, with the CPU time each call takes.

Each round runs both figures once with ``ACTORGRAD_INTROSPECTION=1`` and once with
``0`` (no message counts, no flight recorder, no call tables), every process spawned
fresh so that it reads the setting. The figures: rpc_async pipelined, 64 in flight,
for `--seconds` (calls/s, and CPU µs per call of both processes, read from /proc);
and the 4 KiB all_reduce on 2 ranks back to back (µs per call over 3,000 calls, and
rank 0's CPU µs per call); raw pyzmq beside. Wall-clock figures on a host whose
thread wake-ups vary swing by ±10 % between runs; the CPU time per call is steadier.
Prints one JSON line: per figure the median of the rounds on and off, the cost in
percent, and every round's figure.

`--in-place` measures instead within one set of processes started with introspection
on, switching it off and on between short windows (`switch_recording`): the same
processes, sockets and memory on both sides of each pair, so that the spread between
processes drops out. Each figure is then the median over many pairs of the cost
within the pair. The rpc_async windows are `--window` seconds, the all_reduce windows
100 calls.
Usage: ``python benchmarks/bench_recorder.py [--rounds K] [--seconds S] [--quick]
[--in-place [--pairs N] [--window S] [--same]]``.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actors.runtime.introspection.recorder import SWITCH_VARIABLE  # noqa: E402
from benchmarks import bench_collectives, bench_rpc  # noqa: E402
from benchmarks._procs import actorgrad_worker, echo, free_port, server_process  # noqa: E402

WINDOW = 64


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of process `pid` so far (Linux)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rpc_async(seconds: float) -> Dict[str, float]:
    """rpc_async, `WINDOW` in flight, for `seconds`: calls/s and CPU µs per call."""
    import actors

    port = free_port()
    with server_process(actorgrad_worker, port) as server_pid:
        actors.init_rpc("worker0", 0, 2, timeout=60, init_method=f"tcp://127.0.0.1:{port}")
        try:
            _batches(4)
            calls_per_s, cpu_us = _window(seconds, server_pid)
        finally:
            actors.shutdown()
    return {"calls_per_s": calls_per_s, "cpu_us_per_call": cpu_us}


def _batches(count: int) -> None:
    """`count` batches of `WINDOW` rpc_async calls to worker1, each awaited whole."""
    import actors

    for _ in range(count):
        actors.wait_all([actors.rpc_async("worker1", echo, args=(1,)) for _ in range(WINDOW)])


def _window(seconds: float, server_pid: int) -> tuple:
    """Batches for `seconds`: calls/s, and CPU µs per call of this process and the
    server's."""
    calls, start = 0, time.perf_counter()
    cpu = _cpu_seconds(os.getpid()) + _cpu_seconds(server_pid)
    while time.perf_counter() - start < seconds:
        _batches(1)
        calls += WINDOW
    elapsed = time.perf_counter() - start
    cpu = _cpu_seconds(os.getpid()) + _cpu_seconds(server_pid) - cpu
    return calls / elapsed, cpu / calls * 1e6


def switch_recording(on: bool) -> int:
    """Turn this process's bookkeeping on or off in place: the ``RECORDING`` flag that
    each runtime module reads at import and tests on every message (valid in a process
    started with it on, whose recorder exists). Returns the pid.

    A request that straddles a switch is half kept: one received with it on and
    answered with it off stays among the requests not answered. The figures do not
    notice; the process's own introspection is not to be read afterwards."""
    for name, module in list(sys.modules.items()):
        if name.startswith("actors.") and isinstance(getattr(module, "RECORDING", None), bool):
            module.RECORDING = on
    return os.getpid()


def _alternating(pairs: int) -> List[bool]:
    """The settings of `pairs` on/off pairs, the order turning each pair."""
    return [setting for pair in range(pairs)
            for setting in ((True, False) if pair % 2 == 0 else (False, True))]


def _switched(on: bool, same: bool) -> bool:
    """The recording of a window labelled `on`: `same` keeps it on in both windows of a
    pair (what the method reads when nothing differs)."""
    return on or same


def rpc_async_in_place(pairs: int, window: float, same: bool = False
                       ) -> Dict[str, List[float]]:
    """rpc_async as in `rpc_async`, in windows of `window` seconds with the recording
    switched on both processes between them: per setting, calls/s and CPU µs per call
    of each window."""
    import actors

    figures: Dict[str, List[float]] = {f"{figure}_{setting}": [] for figure in ("calls", "cpu")
                                       for setting in ("on", "off")}
    port = free_port()
    with server_process(actorgrad_worker, port) as server_pid:
        actors.init_rpc("worker0", 0, 2, timeout=60, init_method=f"tcp://127.0.0.1:{port}")
        try:
            for on in _alternating(pairs):
                switch_recording(_switched(on, same))
                actors.rpc_sync("worker1", switch_recording, args=(_switched(on, same),))
                _batches(1)
                calls_per_s, cpu_us = _window(window, server_pid)
                setting = "on" if on else "off"
                figures[f"calls_{setting}"].append(calls_per_s)
                figures[f"cpu_{setting}"].append(cpu_us)
        finally:
            actors.shutdown()
    return figures


def _reduce_in_place(system: object, rank: int, world: int, quick: bool,
                     pairs: int = 300, calls: int = 100, same: bool = False
                     ) -> Dict[str, List[float]]:
    """Every rank: the 4 KiB all_reduce in windows of `calls`, the recording switched
    between them (every rank switches at the same call): per setting, µs and this
    rank's CPU µs per call of each window."""
    dist = system.dist  # type: ignore[attr-defined]
    array = system.array(4096)  # type: ignore[attr-defined]
    array *= 0
    for _ in range(100):
        dist.all_reduce(array)
    figures: Dict[str, List[float]] = {f"{figure}_{setting}": [] for figure in ("us", "cpu")
                                       for setting in ("on", "off")}
    for on in _alternating(pairs):
        switch_recording(_switched(on, same))
        dist.barrier()
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            dist.all_reduce(array)
        setting = "on" if on else "off"
        figures[f"us_{setting}"].append((time.perf_counter() - start) / calls * 1e6)
        figures[f"cpu_{setting}"].append((time.process_time() - cpu) / calls * 1e6)
    return figures


def _paired(on: List[float], off: List[float], higher_is_better: bool) -> Dict[str, object]:
    """The median over pairs of the cost within each pair, with the medians on and off."""
    costs = [(b - a) / b if higher_is_better else (a - b) / b for a, b in zip(on, off)]
    return {"on": round(statistics.median(on), 1), "off": round(statistics.median(off), 1),
            "cost_pct": round(100 * statistics.median(costs), 2), "pairs": len(costs)}


def in_place(pairs: int, window: float, same: bool) -> Dict[str, object]:
    rpc = bench_rpc.in_fresh_process(rpc_async_in_place, pairs, window, same)
    reduce = bench_collectives.run(
        "ours", functools.partial(_reduce_in_place, pairs=pairs, same=same), 2, False)
    return {"workload": "recorder_in_place", "window_s": window, "same": same,
            "rpc_async_calls_per_s": _paired(rpc["calls_on"], rpc["calls_off"], True),
            "rpc_async_cpu_us_per_call": _paired(rpc["cpu_on"], rpc["cpu_off"], False),
            "all_reduce_4kib_us": _paired(reduce["us_on"], reduce["us_off"], False),
            "all_reduce_4kib_cpu_us": _paired(reduce["cpu_on"], reduce["cpu_off"], False)}


def _summary(on: List[float], off: List[float], higher_is_better: bool) -> Dict[str, object]:
    on_median, off_median = statistics.median(on), statistics.median(off)
    cost = (off_median - on_median) / off_median if higher_is_better else \
        (on_median - off_median) / off_median
    return {"on": round(on_median, 1), "off": round(off_median, 1),
            "cost_pct": round(100 * cost, 2), "on_rounds": [round(v, 1) for v in on],
            "off_rounds": [round(v, 1) for v in off]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds (default 10)")
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="seconds of rpc_async per run (default 2)")
    parser.add_argument("--quick", action="store_true", help="500 all_reduce calls, not 3,000")
    parser.add_argument("--in-place", action="store_true",
                        help="switch the recording within one set of processes")
    parser.add_argument("--pairs", type=int, default=200,
                        help="on/off pairs of windows with --in-place (default 200)")
    parser.add_argument("--window", type=float, default=0.25,
                        help="seconds of each rpc_async window with --in-place (default 0.25)")
    parser.add_argument("--same", action="store_true",
                        help="with --in-place, keep the recording on in both windows of a pair")
    args = parser.parse_args()
    os.environ.update(ACTORGRAD_LOG_LEVEL="warning", OMP_NUM_THREADS="1")
    if args.in_place:
        os.environ[SWITCH_VARIABLE] = "1"
        print(json.dumps(in_place(args.pairs, args.window, args.same)))
        return
    figures: Dict[str, Dict[str, List[float]]] = {
        name: {"1": [], "0": []} for name in ("calls", "call_cpu", "reduce", "reduce_cpu")}
    for round_ in range(args.rounds):
        for setting in ("1", "0") if round_ % 2 == 0 else ("0", "1"):
            os.environ[SWITCH_VARIABLE] = setting
            rpc = bench_rpc.in_fresh_process(rpc_async, args.seconds)
            figures["calls"][setting].append(rpc["calls_per_s"])
            figures["call_cpu"][setting].append(rpc["cpu_us_per_call"])
            loop = bench_collectives.run("ours", "loop", 2, args.quick)
            figures["reduce"][setting].append(loop["all_reduce_4kib_loop_us"])
            figures["reduce_cpu"][setting].append(loop["all_reduce_4kib_loop_cpu_us"])
    os.environ.pop(SWITCH_VARIABLE)
    raw_rpc = bench_rpc.in_fresh_process(bench_rpc.raw, 2000, 3, False, ())
    raw_loop = bench_collectives.run("raw_pyzmq", "loop", 2, args.quick)

    def summary(name: str, higher_is_better: bool = False) -> Dict[str, object]:
        return _summary(figures[name]["1"], figures[name]["0"], higher_is_better)

    print(json.dumps({
        "workload": "recorder", "rounds": args.rounds,
        "rpc_async_calls_per_s": summary("calls", higher_is_better=True),
        "rpc_async_cpu_us_per_call": summary("call_cpu"),
        "all_reduce_4kib_us": summary("reduce"),
        "all_reduce_4kib_cpu_us": summary("reduce_cpu"),
        "raw_pyzmq": {"rpc_async_calls_per_s": round(raw_rpc["w2_calls_per_s"], 1),
                      "all_reduce_4kib_us": round(raw_loop["all_reduce_4kib_loop_us"], 1)},
    }))


if __name__ == "__main__":
    main()
