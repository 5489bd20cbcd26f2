"""What introspection costs: rpc_async throughput and the 4 KiB all_reduce with it on
(the default) and off, in alternating rounds.

Each round runs both figures once with ``ACTORGRAD_INTROSPECTION=1`` and once with
``0`` (no message counts, no flight recorder, no call tables), every process spawned
fresh so that it reads the setting. The figures are bench_rpc's W2 (rpc_async
pipelined, calls/s) and bench_collectives' 4 KiB all_reduce on 2 ranks (µs); raw
pyzmq beside. Prints one JSON line: per figure the median of the rounds on and off,
the cost in percent, and every round's figure.
Usage: ``python benchmarks/bench_recorder.py [--rounds K] [--calls N] [--quick]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actors.runtime.introspection.recorder import SWITCH_VARIABLE  # noqa: E402
from benchmarks import bench_collectives, bench_rpc  # noqa: E402


def _rpc_async_calls_per_s(calls: int, runs: int) -> float:
    return bench_rpc.in_fresh_process(bench_rpc.ours, calls, runs, False, False,
                                      ())["w2_calls_per_s"]


def _all_reduce_us(quick: bool) -> float:
    return bench_collectives.run("ours", "latency", 2, quick)["all_reduce_4kib_us"]


def _summary(on: List[float], off: List[float], higher_is_better: bool) -> Dict[str, float]:
    on_median, off_median = statistics.median(on), statistics.median(off)
    cost = (off_median - on_median) / off_median if higher_is_better else \
        (on_median - off_median) / off_median
    return {"on": round(on_median, 1), "off": round(off_median, 1),
            "cost_pct": round(100 * cost, 2), "on_rounds": [round(v, 1) for v in on],
            "off_rounds": [round(v, 1) for v in off]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--calls", type=int, default=2000,
                        help="rpc_async calls per throughput run (default 2000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per round (default 3)")
    parser.add_argument("--quick", action="store_true", help="fewer all_reduce repetitions")
    args = parser.parse_args()
    os.environ.update(ACTORGRAD_LOG_LEVEL="warning", OMP_NUM_THREADS="1")
    rpc: Dict[str, List[float]] = {"1": [], "0": []}
    collective: Dict[str, List[float]] = {"1": [], "0": []}
    for round_ in range(args.rounds):
        for setting in ("1", "0") if round_ % 2 == 0 else ("0", "1"):
            os.environ[SWITCH_VARIABLE] = setting
            rpc[setting].append(_rpc_async_calls_per_s(args.calls, args.runs))
            collective[setting].append(_all_reduce_us(args.quick))
    os.environ.pop(SWITCH_VARIABLE)
    raw_rpc = bench_rpc.in_fresh_process(bench_rpc.raw, args.calls, args.runs, False, ())
    raw_collective = bench_collectives.run("raw_pyzmq", "latency", 2, args.quick)
    print(json.dumps({
        "workload": "recorder", "rounds": args.rounds,
        "rpc_async_calls_per_s": _summary(rpc["1"], rpc["0"], higher_is_better=True),
        "all_reduce_4kib_us": _summary(collective["1"], collective["0"],
                                       higher_is_better=False),
        "raw_pyzmq": {"rpc_async_calls_per_s": round(raw_rpc["w2_calls_per_s"], 1),
                      "all_reduce_4kib_us": round(raw_collective["all_reduce_4kib_us"], 1)},
    }))


if __name__ == "__main__":
    main()
