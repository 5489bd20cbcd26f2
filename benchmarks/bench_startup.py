"""How long a fresh interpreter takes to import each entry point of the package.

Why: every worker, rank, store server and launcher agent is a new process, and
spawn-started workers import the package before they do anything else; a job of 64
workers on two cores pays each import 64 times. Each module is imported in a fresh
``python -c "import <module>"``, `--runs` times, alternated between the modules so
that a noisy machine disturbs them alike; the floors are the bare interpreter and
``import numpy, zmq``, which every worker needs whatever this package does. When
torch is importable, ``import torch.distributed.rpc`` is measured beside.

Prints one JSON line: the best and the median milliseconds per module. Usage:
``python benchmarks/bench_startup.py [--runs 15]``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from typing import Dict, List

MODULES = ["actors", "actors.rpc", "actors.distributed", "engine.dist_autograd",
           "store", "store.elastic"]
FLOORS = {"python": "pass", "numpy_zmq": "import numpy, zmq"}


def _once(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="imports of each module (default 15)")
    args = parser.parse_args()
    codes = dict(FLOORS, **{module: f"import {module}" for module in MODULES})
    if importlib.util.find_spec("torch") is not None:
        codes["torch.distributed.rpc"] = "import torch.distributed.rpc"
    times: Dict[str, List[float]] = {name: [] for name in codes}
    for _ in range(args.runs):
        for name, code in codes.items():
            times[name].append(_once(code))
    print(json.dumps({
        "workload": "startup", "runs": args.runs,
        "best_ms": {name: round(min(t) * 1e3, 1) for name, t in times.items()},
        "median_ms": {name: round(statistics.median(t) * 1e3, 1) for name, t in times.items()},
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
