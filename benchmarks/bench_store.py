"""W5: store ops from one client, wake-up latency, and a server under many clients.

Side by side in one run: our TCPStore (server in its own process), a raw pyzmq
DEALER/ROUTER request-reply loop against a Python echo server (the limit for one
client over ZeroMQ), the wake-up through a raw pyzmq server that parks a wait
(`_raw_store.py`), and torch's TCPStore when torch is importable. One client:
set/get/add/compare_set ops/s and set-to-wait wake-up latency. Many clients
(`_store_crowds.py`): aggregate add rate with 1…16 client processes, one set
releasing 64 waiters, a barrier of 64 processes. Prints one JSON line.
Usage: ``python benchmarks/bench_store.py [--ops N] [--runs R] [--crowds 1,2,4,8,16]
[--seconds S] [--storm 8x8] [--barrier 64]`` (``--crowds ''`` skips the many-client part).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable, Dict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import median_of, percentile, ratio, server_process  # noqa: E402
from benchmarks._raw_store import RawStoreClient, raw_store_server  # noqa: E402
from benchmarks._store_crowds import crowd_figures  # noqa: E402

BATCH = 100


def _our_server(ready: Any) -> None:
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    from store.server import StoreServer

    server = StoreServer("127.0.0.1", 0).start()
    ready.put(server.port)
    time.sleep(3600)


def _torch_server(ready: Any) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=60),
                          wait_for_workers=False)
    ready.put(store.port)
    time.sleep(3600)


def _raw_echo_server(ready: Any) -> None:
    import zmq

    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    ready.put(port)
    while True:
        router.send_multipart(router.recv_multipart())


def _waiter(ready: Any, kind: str, port: int, n: int) -> None:
    """Wait for go/i, note the time it woke, n times (for the wake-up latency)."""
    store = _open(kind, port)
    ready.put("up")
    for i in range(n):
        store.set(f"ready/{i}", b"1")
        store.wait([f"go/{i}"])
        woke = time.perf_counter()
        store.set(f"woke/{i}", repr(woke).encode())
    time.sleep(3600)


def _open(kind: str, port: int) -> Any:
    if kind == "raw":
        return RawStoreClient(port)
    if kind == "torch":
        from datetime import timedelta

        import torch.distributed as dist

        return dist.TCPStore("127.0.0.1", port, 1, False, timeout=timedelta(seconds=60),
                             wait_for_workers=False)
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    from store.tcp_store import TCPStore

    return TCPStore("127.0.0.1", port, timeout=60)


def rate(fn: Callable[[int], Any], ops: int) -> float:
    fn(-1)
    start = time.perf_counter()
    for i in range(ops):
        fn(i)
    return ops / (time.perf_counter() - start)


def store_figures(kind: str, port: int, ops: int, runs: int) -> Dict[str, float]:
    store = _open(kind, port)
    store.set("k", b"v" * 16)
    figures = {
        "set_ops": median_of(runs, lambda: rate(lambda i: store.set("k", b"v" * 16), ops)),
        "get_ops": median_of(runs, lambda: rate(lambda i: store.get("k"), ops)),
        "add_ops": median_of(runs, lambda: rate(lambda i: store.add("n", 1), ops)),
        "compare_set_ops": median_of(runs, lambda: rate(
            lambda i: store.compare_set("k", b"v" * 16, b"v" * 16), ops)),
    }
    keys = [f"m{i}" for i in range(BATCH)]
    values = [b"v" * 16] * BATCH
    figures["multi_set_keys_per_s"] = BATCH * median_of(
        runs, lambda: rate(lambda i: store.multi_set(keys, values), max(10, ops // 20)))
    figures["multi_get_keys_per_s"] = BATCH * median_of(
        runs, lambda: rate(lambda i: store.multi_get(keys), max(10, ops // 20)))
    figures.update(wake_latency(kind, port, 200))
    return {k: round(v, 1) for k, v in figures.items()}


def wake_latency(kind: str, port: int, n: int) -> Dict[str, float]:
    store = _open(kind, port)
    with server_process(_waiter, kind, port, n):
        delays = []
        for i in range(n):
            store.wait([f"ready/{i}"])
            time.sleep(0.002)  # let the waiter's wait request reach the server
            start = time.perf_counter()
            store.set(f"go/{i}", b"1")
            delays.append(float(store.get(f"woke/{i}")) - start)
    delays_us = [d * 1e6 for d in delays]
    return {"wake_us_median": percentile(delays_us, 0.5),
            "wake_us_p99": percentile(delays_us, 0.99)}


def raw_figures(port: int, ops: int, runs: int) -> Dict[str, float]:
    import zmq

    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{port}")

    def round_trip(_: int) -> None:
        dealer.send(b"x" * 32)
        dealer.recv()

    def windowed(total: int, window: int = 64) -> float:
        start = time.perf_counter()
        for _ in range(window):
            dealer.send(b"x" * 32)
        for _ in range(total - window):
            dealer.recv()
            dealer.send(b"x" * 32)
        for _ in range(window):
            dealer.recv()
        return total / (time.perf_counter() - start)

    figures = {
        "rt_ops": median_of(runs, lambda: rate(round_trip, ops)),
        "window64_ops": median_of(runs, lambda: windowed(ops * 4)),
    }
    dealer.close(0)
    ctx.term()
    return {k: round(v, 1) for k, v in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=3000, help="operations per measurement")
    parser.add_argument("--runs", type=int, default=3, help="repeats; the median is reported")
    parser.add_argument("--crowds", default="1,2,4,8,16",
                        help="client process counts for the aggregate add rate ('' skips)")
    parser.add_argument("--seconds", type=float, default=2.0, help="per add-rate measurement")
    parser.add_argument("--storm", default="8x8", help="waiter processes x threads")
    parser.add_argument("--barrier", type=int, default=64, help="barrier size (0 skips)")
    args = parser.parse_args()
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    result: Dict[str, Any] = {"workload": "W5", "ops": args.ops, "runs": args.runs}
    with server_process(_raw_echo_server) as port:
        result["raw_pyzmq"] = raw_figures(port, args.ops, args.runs)
    with server_process(raw_store_server) as port:
        result["raw_pyzmq"].update({k: round(v, 1)
                                    for k, v in wake_latency("raw", port, 200).items()})
    with server_process(_our_server) as port:
        result["actorgrad"] = store_figures("ours", port, args.ops, args.runs)
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        result["torch"] = None
    else:
        with server_process(_torch_server) as port:
            result["torch"] = store_figures("torch", port, args.ops, args.runs)
    if args.crowds:
        crowds = [int(n) for n in args.crowds.split(",")]
        storm = [int(n) for n in args.storm.split("x")]
        systems = [("raw", _raw_echo_server, "raw_pyzmq"), ("ours", _our_server, "actorgrad")]
        if result["torch"] is not None:
            systems.append(("torch", _torch_server, "torch"))
        for kind, server, name in systems:
            result[name].update(crowd_figures(kind, server, crowds, args.seconds, storm,
                                              args.barrier))
    ours, torch_, raw = result["actorgrad"], result["torch"], result["raw_pyzmq"]
    ratios = {
        f"{op}_vs_raw_rt": ratio(ours[f"{op}_ops"], raw["rt_ops"])
        for op in ("get", "add", "set", "compare_set")
    }
    # A wake-up is one round trip's worth of messages: compared with the raw round trip,
    # and with the same wake-up through a raw pyzmq server that parks the wait.
    ratios["wake_vs_raw_rt"] = ratio(ours["wake_us_median"], 1e6 / raw["rt_ops"])
    ratios["wake_vs_raw_wake"] = ratio(ours["wake_us_median"], raw["wake_us_median"])
    for key in (k for k in ours if k.startswith("add_ops_") and k in raw):
        ratios[key.replace("add_ops_", "crowd_") + "_vs_raw"] = ratio(ours[key], raw[key])
        if torch_ and key in torch_:
            ratios[key.replace("add_ops_", "crowd_") + "_vs_torch"] = ratio(ours[key],
                                                                            torch_[key])
    ratios.update({
        "multi_get_keys_vs_get": ratio(ours["multi_get_keys_per_s"], ours["get_ops"]),
        "multi_set_keys_vs_set": ratio(ours["multi_set_keys_per_s"], ours["set_ops"]),
    })
    if torch_:
        ratios.update({
            "storm_vs_torch": ratio(ours.get("storm_ms", 0), torch_.get("storm_ms", 0)),
            f"barrier_{args.barrier}_vs_torch": ratio(
                ours.get(f"barrier_{args.barrier}_ms", 0),
                torch_.get(f"barrier_{args.barrier}_ms", 0)),
            "get_vs_torch_get": ratio(ours["get_ops"], torch_["get_ops"]),
            "add_vs_torch_add": ratio(ours["add_ops"], torch_["add_ops"]),
            "compare_set_vs_torch": ratio(ours["compare_set_ops"], torch_["compare_set_ops"]),
            "acked_set_vs_torch_add": ratio(ours["set_ops"], torch_["add_ops"]),
            "wake_latency_vs_torch": ratio(ours["wake_us_median"], torch_["wake_us_median"]),
            "raw_wake_vs_torch": ratio(raw["wake_us_median"], torch_["wake_us_median"]),
        })
    result["ratios"] = ratios
    print(json.dumps(result))


if __name__ == "__main__":
    main()
