"""W1-W3: RPC round trip, pipelined throughput and array echo bandwidth between two processes.

Side by side in one run: actorgrad RPC, the raw pyzmq equivalent (a DEALER and a
Python ROUTER echo server), and torch RPC (TensorPipe) when torch is importable.
Prints one JSON line. Usage: ``python benchmarks/bench_rpc.py [--calls N] [--runs R]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import (actorgrad_worker, echo, free_port, percentile, ratio,  # noqa: E402
                               server_process, torch_worker)

SIZES_MIB = (1, 16, 64)
WINDOW = 64


# ---- the three systems, each as: call_sync(x), call_async(x) -> waitable -----------------





def _raw_server(ready: Any) -> None:
    import zmq

    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    ready.put(router.bind_to_random_port("tcp://127.0.0.1"))
    while True:
        router.send_multipart(router.recv_multipart(copy=False), copy=False)


def measure(call_sync: Callable[[Any], Any], call_async: Callable[[Any], Any],
            wait: Callable[[Any], Any], calls: int, runs: int, make_array: Callable) -> Dict:
    for _ in range(200):
        call_sync(1)
    latencies: List[float] = []
    for _ in range(runs):
        for _ in range(calls):
            start = time.perf_counter()
            call_sync(1)
            latencies.append(time.perf_counter() - start)
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        window = [call_async(1) for _ in range(WINDOW)]
        for _ in range(calls * 4 // WINDOW):
            for future in window:
                wait(future)
            window = [call_async(1) for _ in range(WINDOW)]
        for future in window:
            wait(future)
        rates.append((calls * 4 // WINDOW + 1) * WINDOW / (time.perf_counter() - start))
    figures = {
        "w1_rt_us_median": round(percentile([x * 1e6 for x in latencies], 0.5), 1),
        "w1_rt_us_p99": round(percentile([x * 1e6 for x in latencies], 0.99), 1),
        "w2_calls_per_s": round(sorted(rates)[len(rates) // 2], 1),
    }
    for mib in SIZES_MIB:
        array = make_array(mib)
        call_sync(array)
        times = []
        for _ in range(max(3, runs)):
            start = time.perf_counter()
            call_sync(array)
            times.append(time.perf_counter() - start)
        # bytes cross twice (there and back)
        figures[f"w3_{mib}mib_MBps"] = round(2 * mib * 1.048576 / sorted(times)[len(times) // 2], 1)
    return figures


def ours(calls: int, runs: int) -> Dict:
    import actors
    port = free_port()
    with server_process(actorgrad_worker, port):
        actors.init_rpc("worker0", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=60)
        try:
            return measure(lambda x: actors.rpc_sync("worker1", echo, args=(x,)),
                           lambda x: actors.rpc_async("worker1", echo, args=(x,)),
                           lambda f: f.wait(), calls, runs,
                           lambda mib: np.ones(mib * 262144, dtype=np.float32))
        finally:
            actors.shutdown()


def torch_rpc(calls: int, runs: int) -> Dict:
    import torch
    import torch.distributed.rpc as rpc
    port = free_port()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    with server_process(torch_worker, port):
        rpc.init_rpc("worker0", rank=0, world_size=2)
        try:
            return measure(lambda x: rpc.rpc_sync("worker1", echo, args=(x,)),
                           lambda x: rpc.rpc_async("worker1", echo, args=(x,)),
                           lambda f: f.wait(), calls, runs,
                           lambda mib: torch.ones(mib * 262144, dtype=torch.float32))
        finally:
            rpc.shutdown()


def raw(calls: int, runs: int) -> Dict:
    import zmq

    with server_process(_raw_server) as port:
        ctx = zmq.Context()
        dealer = ctx.socket(zmq.DEALER)
        dealer.connect(f"tcp://127.0.0.1:{port}")

        def call_sync(x: Any) -> Any:
            dealer.send(x if isinstance(x, np.ndarray) else b"x" * 32, copy=False)
            return dealer.recv(copy=False)

        def call_async(x: Any) -> None:
            dealer.send(b"x" * 32)

        try:
            return measure(call_sync, call_async, lambda _: dealer.recv(), calls, runs,
                           lambda mib: np.ones(mib * 262144, dtype=np.float32))
        finally:
            dealer.close(0)
            ctx.term()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="calls per W1/W2 measurement")
    parser.add_argument("--runs", type=int, default=3, help="repeats; medians are reported")
    args = parser.parse_args()
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    result: Dict[str, Any] = {"workloads": "W1-W3", "calls": args.calls, "runs": args.runs}
    result["raw_pyzmq"] = raw(args.calls, args.runs)
    result["actorgrad"] = ours(args.calls, args.runs)
    try:
        import torch.distributed.rpc  # noqa: F401
    except ImportError:
        result["torch"] = None
    else:
        result["torch"] = torch_rpc(args.calls, args.runs)
    a, r, t = result["actorgrad"], result["raw_pyzmq"], result["torch"]
    ratios = {"w1_vs_raw": ratio(a["w1_rt_us_median"], r["w1_rt_us_median"])}
    if t:
        ratios["w1_vs_torch"] = ratio(a["w1_rt_us_median"], t["w1_rt_us_median"])
        ratios["w2_vs_torch"] = ratio(a["w2_calls_per_s"], t["w2_calls_per_s"])
        for mib in SIZES_MIB:
            key = f"w3_{mib}mib_MBps"
            ratios[f"w3_{mib}mib_vs_torch"] = ratio(a[key], t[key])
    result["ratios"] = ratios
    print(json.dumps(result))


if __name__ == "__main__":
    main()
