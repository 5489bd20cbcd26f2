"""The barrier and the 4 KiB all_reduce as the group grows: ours, torch's gloo and raw
pyzmq, same run.

One process per rank; each figure is the median µs of 200 calls on rank 0's clock, at
each of `--sizes` ranks. ``raw_pyzmq`` is bare pyzmq all to all (bench_collectives.py's
floor), whose messages grow as the square of the size. Prints one JSON line.
Usage: ``python benchmarks/bench_group_sizes.py [--sizes 4 8 16 32]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import ratio  # noqa: E402
from benchmarks.bench_collectives import _iterations, _timed, run  # noqa: E402


def _calls(system: Any, rank: int, world: int, quick: bool) -> Dict[str, float]:
    array = system.array(4096)
    array *= 0  # sums that stay finite however many calls
    return {"barrier_us": _timed(system.dist, system.dist.barrier, _iterations(0)) * 1e6,
            "all_reduce_4kib_us": _timed(system.dist, lambda: system.dist.all_reduce(array),
                                         _iterations(4096)) * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16, 32])
    args = parser.parse_args()
    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    kinds = ["ours", "raw_pyzmq"]
    try:
        import torch  # noqa: F401

        kinds.append("torch")
    except ImportError:
        pass
    report: Dict[str, Any] = {"workload": "group_sizes"}
    for kind in kinds:
        report[kind] = {f"w{size}_{key}": round(value, 1) for size in args.sizes
                        for key, value in run(kind, _calls, size, False).items()}
    for other in kinds[1:]:
        report[f"ours_vs_{other}"] = {key: ratio(value, report[other][key])
                                      for key, value in report["ours"].items()}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
