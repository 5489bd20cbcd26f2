"""W1-W3 with CURVE authentication and encryption on against off, in one run.

Both processes of the RPC benchmark (`bench_rpc.ours`) follow one setting: off,
then on (a key directory made for the run, `ACTORGRAD_CURVE_DIR` for the spawned
worker, `set_security` here), alternating `--rounds` times; raw pyzmq without
security runs beside them as the floor. Medians over the rounds, and on ÷ off.
Prints one JSON line. Usage: ``python benchmarks/bench_curve.py [--calls N] [--rounds R]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import ratio  # noqa: E402
from benchmarks.bench_rpc import SIZES_MIB, ours, raw  # noqa: E402

FIGURES = ["w1_rt_us_median", "w1_rt_us_p99", "w2_calls_per_s",
           *(f"w3_{mib}mib_MBps" for mib in SIZES_MIB)]


def run_with(directory: str, calls: int, runs: int) -> Dict[str, float]:
    """`bench_rpc.ours` with CURVE from `directory` in both processes ("" for none)."""
    from actors.runtime.io.security import Security, set_security

    if directory:
        os.environ["ACTORGRAD_CURVE_DIR"] = directory
        set_security(Security.from_dir(directory))
    else:
        os.environ.pop("ACTORGRAD_CURVE_DIR", None)
        set_security(None)
    try:
        return ours(calls, runs)
    finally:
        set_security(None)
        os.environ.pop("ACTORGRAD_CURVE_DIR", None)


def medians(results: List[Dict[str, float]]) -> Dict[str, float]:
    return {key: round(statistics.median(r[key] for r in results), 1) for key in FIGURES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per W1/W2 measurement")
    parser.add_argument("--runs", type=int, default=3, help="repeats inside each measurement")
    parser.add_argument("--rounds", type=int, default=2, help="off/on alternations")
    args = parser.parse_args()
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    from actors.keys import generate

    runs: Dict[str, List[Dict[str, Any]]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as keys:
        generate(keys)
        floor = raw(args.calls, args.runs)
        for _ in range(args.rounds):
            runs["off"].append(run_with("", args.calls, args.runs))
            runs["on"].append(run_with(keys, args.calls, args.runs))
    off, on = medians(runs["off"]), medians(runs["on"])
    result = {
        "workloads": "W1-W3, CURVE off/on", "calls": args.calls, "rounds": args.rounds,
        "raw_pyzmq": floor, "curve_off": off, "curve_on": on,
        "on_over_off": {"w1": ratio(on["w1_rt_us_median"], off["w1_rt_us_median"]),
                        "w2": ratio(on["w2_calls_per_s"], off["w2_calls_per_s"]),
                        **{f"w3_{mib}mib": ratio(on[f"w3_{mib}mib_MBps"], off[f"w3_{mib}mib_MBps"])
                           for mib in SIZES_MIB}},
        "w1_on_over_raw": ratio(on["w1_rt_us_median"], floor["w1_rt_us_median"]),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
