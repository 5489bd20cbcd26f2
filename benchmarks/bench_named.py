"""A named call in the JSON codec against the pickled rpc_sync of the same function.

One run, two processes: the benchmark (rank 0) and a worker (rank 1) that exposes
`echo` as "echo". For a 1 MiB float32 array and for a small one, the median round
trip of `rpc_sync(worker1, echo, (x,))` (pickle, arrays as out-of-band frames),
of `ExposedClient.call("echo", x)` (JSON body, the array as a raw frame) and of a
raw pyzmq DEALER/ROUTER echo of the same bytes. Prints one JSON line.
Usage: ``python benchmarks/bench_named.py [--calls N] [--runs R]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable, Dict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import (actorgrad_worker, echo, free_port, percentile, ratio,  # noqa: E402
                               server_process)
from benchmarks.bench_rpc import _raw_server  # noqa: E402

SIZES = {"1mib": 1 << 18, "16b": 4}  # float32 elements


def _exposing_worker(ready: Any, port: int) -> None:
    import actors

    actors.expose("echo")(echo)
    actorgrad_worker(ready, port)


def median_us(call: Callable[[], Any], calls: int, runs: int) -> float:
    for _ in range(20):
        call()
    times = []
    for _ in range(runs * calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return round(percentile(times, 0.5) * 1e6, 1)


def compare(label: str, x: np.ndarray, client: Any, dealer: Any,
            args: argparse.Namespace) -> Dict[str, Any]:
    """The three round trips of `x`, interleaved `args.runs` times: their medians."""
    import actors

    def raw_echo() -> Any:
        dealer.send(x, copy=x.nbytes < (1 << 20))
        return dealer.recv(copy=False)

    systems = {
        "pickled_rpc_sync": lambda: actors.rpc_sync("worker1", echo, args=(x,)),
        "named_json": lambda: client.call("echo", x),
        "raw_pyzmq": raw_echo,
    }
    assert np.array_equal(client.call("echo", x), x)
    results: Dict[str, list] = {name: [] for name in systems}
    for _ in range(args.runs):  # interleaved: the machine's noise hits all three
        for name, call in systems.items():
            results[name].append(median_us(call, args.calls, 1))
    figures = {f"{label}_{name}_us": sorted(values)[len(values) // 2]
               for name, values in results.items()}
    named = figures[f"{label}_named_json_us"]
    figures[f"{label}_named_over_pickled"] = ratio(named, figures[f"{label}_pickled_rpc_sync_us"])
    figures[f"{label}_named_over_raw"] = ratio(named, figures[f"{label}_raw_pyzmq_us"])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per size and run")
    parser.add_argument("--runs", type=int, default=3, help="repeats, interleaved")
    args = parser.parse_args()
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    import zmq

    import actors

    port = free_port()
    figures: Dict[str, Any] = {"bench": "named_vs_pickled"}
    with server_process(_exposing_worker, port), server_process(_raw_server) as raw_port:
        actors.init_rpc("worker0", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=60)
        dealer = zmq.Context.instance().socket(zmq.DEALER)
        dealer.connect(f"tcp://127.0.0.1:{raw_port}")
        client = actors.ExposedClient(actors.get_worker_info("worker1").address)
        try:
            for label, count in SIZES.items():
                figures.update(compare(label, np.ones(count, dtype=np.float32), client,
                                       dealer, args))
        finally:
            client.close()
            dealer.close(0)
            actors.shutdown()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
