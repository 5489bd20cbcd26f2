"""W1-W3: RPC round trip, pipelined throughput and array echo bandwidth between two processes.

Side by side in one run: actorgrad RPC, the raw pyzmq equivalent (a DEALER and a
Python ROUTER echo server), and torch RPC (TensorPipe) when torch is importable.
Each system runs twice: ``module`` calls a function of an importable module over
``tcp://``, the friendliest case; ``as_users`` runs as users write scripts: both
processes run this script (spawned), join by ``env://`` with 16 worker threads,
import ``engine.dist_autograd`` (torch: ``torch.distributed.autograd``) and call a
function defined in the script's ``__main__``. Prints one JSON line. Usage:
``python benchmarks/bench_rpc.py [--calls N] [--runs R] [--rounds K]``. W2 waits for
each window of 64 calls future by future, and again with ``wait_all`` (torch's
``torch.futures.wait_all``): ``w2_wait_all_calls_per_s``. With ``--rounds``
the W1 figures of ``as_users`` alternate K rounds of ours and torch's and report
each round's median.
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

def echo_main(value: Any) -> Any:
    """The remote function as users write it: defined in the script's ``__main__``."""
    return value


def _as_users_worker(ready: Any, port: int, system: str) -> None:
    """Rank 1 of a two-worker world joined by env://, as a user's script runs it."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      ACTORGRAD_LOG_LEVEL="warning")
    ready.put("up")
    if system == "torch":
        import torch.distributed.autograd  # noqa: F401
        import torch.distributed.rpc as rpc

        rpc.init_rpc("worker1", rank=1, world_size=2,
                     rpc_backend_options=rpc.TensorPipeRpcBackendOptions(num_worker_threads=16))
        rpc.shutdown()
    else:
        import actors
        import engine.dist_autograd  # noqa: F401

        actors.init_rpc("worker1", 1, 2, num_worker_threads=16)
        actors.shutdown()


def _raw_server(ready: Any) -> None:
    import zmq

    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    ready.put(router.bind_to_random_port("tcp://127.0.0.1"))
    while True:
        router.send_multipart(router.recv_multipart(copy=False), copy=False)


def measure(call_sync: Callable[[Any], Any], call_async: Callable[[Any], Any],
            wait: Callable[[Any], Any], calls: int, runs: int, make_array: Callable,
            w1_only: bool = False, sizes_mib: Any = SIZES_MIB,
            wait_all: Any = None) -> Dict:
    for _ in range(200):
        call_sync(1)
    latencies: List[float] = []
    for _ in range(runs):
        for _ in range(calls):
            start = time.perf_counter()
            call_sync(1)
            latencies.append(time.perf_counter() - start)
    w1 = {"w1_rt_us_median": round(percentile([x * 1e6 for x in latencies], 0.5), 1),
          "w1_rt_us_p99": round(percentile([x * 1e6 for x in latencies], 0.99), 1)}
    if w1_only:
        return w1
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
    figures = dict(w1, w2_calls_per_s=round(sorted(rates)[len(rates) // 2], 1))
    if wait_all is not None:  # the same windows, each waited for whole
        rates = []
        for _ in range(runs):
            start = time.perf_counter()
            for _ in range(calls * 4 // WINDOW + 1):
                wait_all([call_async(1) for _ in range(WINDOW)])
            rates.append((calls * 4 // WINDOW + 1) * WINDOW / (time.perf_counter() - start))
        figures["w2_wait_all_calls_per_s"] = round(sorted(rates)[len(rates) // 2], 1)
    for mib in sizes_mib:
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


def ours(calls: int, runs: int, as_users: bool = False, w1_only: bool = False,
         sizes_mib: Any = SIZES_MIB) -> Dict:
    """W1-W3 of actorgrad RPC; `sizes_mib` are W3's array sizes (none: W1 and W2 only)."""
    import actors
    port = free_port()
    if as_users:
        import engine.dist_autograd  # noqa: F401

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        server, fn = server_process(_as_users_worker, port, "ours"), echo_main
        init = dict(num_worker_threads=16)
    else:
        server, fn = server_process(actorgrad_worker, port), echo
        init = dict(init_method=f"tcp://127.0.0.1:{port}")
    with server:
        actors.init_rpc("worker0", 0, 2, timeout=60, **init)
        try:
            return measure(lambda x: actors.rpc_sync("worker1", fn, args=(x,)),
                           lambda x: actors.rpc_async("worker1", fn, args=(x,)),
                           lambda f: f.wait(), calls, runs,
                           lambda mib: np.ones(mib * 262144, dtype=np.float32), w1_only,
                           sizes_mib, actors.wait_all)
        finally:
            actors.shutdown()


def torch_rpc(calls: int, runs: int, as_users: bool = False, w1_only: bool = False) -> Dict:
    import torch
    import torch.distributed.rpc as rpc
    port = free_port()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if as_users:
        import torch.distributed.autograd  # noqa: F401

        server, fn = server_process(_as_users_worker, port, "torch"), echo_main
        options = dict(rpc_backend_options=rpc.TensorPipeRpcBackendOptions(num_worker_threads=16))
    else:
        server, fn, options = server_process(torch_worker, port), echo, {}
    with server:
        rpc.init_rpc("worker0", rank=0, world_size=2, **options)
        try:
            return measure(lambda x: rpc.rpc_sync("worker1", fn, args=(x,)),
                           lambda x: rpc.rpc_async("worker1", fn, args=(x,)),
                           lambda f: f.wait(), calls, runs,
                           lambda mib: torch.ones(mib * 262144, dtype=torch.float32), w1_only,
                           wait_all=torch.futures.wait_all)
        finally:
            rpc.shutdown()


def raw(calls: int, runs: int, w1_only: bool = False, sizes_mib: Any = SIZES_MIB) -> Dict:
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
                           lambda mib: np.ones(mib * 262144, dtype=np.float32), w1_only,
                           sizes_mib)
        finally:
            dealer.close(0)
            ctx.term()


def _in_child(queue: Any, measure_fn: Callable[..., Dict], *args: Any) -> None:
    queue.put(measure_fn(*args))


def in_fresh_process(measure_fn: Callable[..., Dict], *args: Any) -> Dict:
    """`measure_fn(*args)` in a spawned process (torch's RPC starts once per process)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_in_child, args=(queue, measure_fn, *args))
    proc.start()
    try:
        return queue.get(timeout=600)
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()


def _ratios(a: Dict, r: Dict, t: Any) -> Dict:
    ratios = {"w1_vs_raw": ratio(a["w1_rt_us_median"], r["w1_rt_us_median"])}
    if t:
        ratios["w1_vs_torch"] = ratio(a["w1_rt_us_median"], t["w1_rt_us_median"])
        for key in ("w2_calls_per_s", "w2_wait_all_calls_per_s"):
            if key in a and key in t:
                ratios[key.replace("_calls_per_s", "_vs_torch")] = ratio(a[key], t[key])
        for mib in SIZES_MIB:
            key = f"w3_{mib}mib_MBps"
            if key in a:
                ratios[f"w3_{mib}mib_vs_torch"] = ratio(a[key], t[key])
    return ratios


def alternating_rounds(calls: int, rounds: int, has_torch: bool) -> Dict:
    """W1 as users run it: raw, ours and torch in turn, `rounds` times; each round's medians."""
    rows = []
    for _ in range(rounds):
        row = {"raw": raw(calls, 1, w1_only=True)["w1_rt_us_median"],
               "ours": ours(calls, 1, as_users=True, w1_only=True)["w1_rt_us_median"]}
        if has_torch:
            row["torch"] = in_fresh_process(torch_rpc, calls, 1, True, True)["w1_rt_us_median"]
        rows.append(row)
    summary = {}
    for side in rows[0]:
        values = sorted(row[side] for row in rows)
        summary[f"{side}_best"], summary[f"{side}_median"] = values[0], values[len(values) // 2]
    vs_raw = sorted(row["ours"] / row["raw"] for row in rows)
    summary["ours_vs_raw_median"] = round(vs_raw[len(vs_raw) // 2], 3)
    if has_torch:
        vs_torch = sorted(row["ours"] / row["torch"] for row in rows)
        summary["ours_vs_torch_median"] = round(vs_torch[len(vs_torch) // 2], 3)
    return {"rounds": rows, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="calls per W1/W2 measurement")
    parser.add_argument("--runs", type=int, default=3, help="repeats; medians are reported")
    parser.add_argument("--rounds", type=int, default=0,
                        help="alternating W1 rounds of raw, ours and torch, as users run it")
    args = parser.parse_args()
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    try:
        import torch.distributed.rpc  # noqa: F401
        has_torch = True
    except ImportError:
        has_torch = False
    result: Dict[str, Any] = {"workloads": "W1-W3", "calls": args.calls, "runs": args.runs}
    r = result["raw_pyzmq"] = raw(args.calls, args.runs)
    a = result["actorgrad"] = ours(args.calls, args.runs)
    t = result["torch"] = in_fresh_process(torch_rpc, args.calls, args.runs) if has_torch \
        else None
    result["ratios"] = _ratios(a, r, t)
    ua = ours(args.calls, args.runs, as_users=True)
    ut = in_fresh_process(torch_rpc, args.calls, args.runs, True) if has_torch else None
    result["as_users"] = {"actorgrad": ua, "torch": ut, "ratios": _ratios(ua, r, ut)}
    if args.rounds:
        result["as_users"]["alternating"] = alternating_rounds(args.calls, args.rounds, has_torch)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
