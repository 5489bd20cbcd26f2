"""The cost of one hop on this host, and of each hot path counted in hops.

A hop is a hand-off of a message from one thread to another (actors/runtime's
package docstring lists the hops of each path). Measured side by side in one run:
- ``raw_pyzmq_rt_us``: a DEALER in this process, a ROUTER echo loop in another: 6 hops;
- ``thread_handoff_rt_us``: two Python threads of one process waking each other
  through a pipe and a poll, as the mailbox's I/O thread is woken: 2 hops;
- ``rpc_sync_us`` (6 hops), ``rpc_async_one_us`` (one call, waited for: 8 hops),
  as users run them (`env://`, ``engine.dist_autograd`` imported, the function in
  ``__main__``);
- ``all_reduce_4kib_2_ranks_us``: one exchange, 3 hops each way, rank 0's clock.
``us_per_hop`` divides each path by its hops. ``cpu_us_per_call`` is the CPU time (all
threads, user and system) that the caller's and the callee's processes spend per
round trip, raw pyzmq, ``rpc_sync`` and the one ``rpc_async`` as users: what
separates them is the work on each side, whatever the wake-ups cost.
``rpc_async_window_cpu_us`` splits the CPU per call of ``rpc_async`` kept 64 in flight
(W2, ten times `--calls`) by thread: the calling thread, the worker's I/O thread,
libzmq's, the others (the store's), and the callee process whole. Wake-ups on a
VM come and go, so the whole set runs `--rounds` times in turn and each figure is
the median of its rounds.
Prints one JSON line. Usage: ``python benchmarks/bench_hops.py [--calls N] [--rounds R]``.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import sys
import threading
import time
from typing import Any, Dict, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import free_port, server_process, thread_ticks  # noqa: E402
from benchmarks.bench_rpc import _as_users_worker, _raw_server, echo_main  # noqa: E402

HOPS = {"raw_pyzmq_rt_us": 6, "thread_handoff_rt_us": 2, "rpc_sync_us": 6,
        "rpc_async_one_us": 8, "all_reduce_4kib_2_ranks_us": 3}


def _median_us(fn: Any, calls: int) -> float:
    for _ in range(min(200, calls)):
        fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1e6, 1)


def _process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of process `pid`, all its threads."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_us_per_call(fn: Any, calls: int) -> Dict[str, float]:
    """CPU µs per call of this process and of the server process (the one live child)."""
    import multiprocessing as mp

    callee = mp.active_children()[-1].pid
    mine, theirs = time.process_time(), _process_cpu_s(callee)
    for _ in range(calls):
        fn()
    return {"caller": round((time.process_time() - mine) / calls * 1e6, 1),
            "callee": round((_process_cpu_s(callee) - theirs) / calls * 1e6, 1)}


def raw_rt(calls: int) -> Dict[str, Any]:
    import zmq

    with server_process(_raw_server) as port:
        ctx = zmq.Context()
        dealer = ctx.socket(zmq.DEALER)
        dealer.connect(f"tcp://127.0.0.1:{port}")

        def call() -> None:
            dealer.send(b"x" * 32)
            dealer.recv()

        try:
            return {"raw_pyzmq_rt_us": _median_us(call, calls),
                    "raw_cpu_us_per_call": _cpu_us_per_call(call, calls)}
        finally:
            dealer.close(0)
            ctx.term()


def thread_handoff(calls: int) -> float:
    """Round trip between two threads that sleep in poll on a pipe each."""
    a_read, a_write = os.pipe()
    b_read, b_write = os.pipe()
    stop = threading.Event()

    def echo() -> None:
        poller = select.poll()
        poller.register(b_read, select.POLLIN)
        while not stop.is_set():
            if poller.poll(1000):
                os.read(b_read, 1)
                os.write(a_write, b"x")

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    poller = select.poll()
    poller.register(a_read, select.POLLIN)

    def once() -> None:
        os.write(b_write, b"x")
        poller.poll(1000)
        os.read(a_read, 1)

    try:
        return _median_us(once, calls)
    finally:
        stop.set()
        thread.join(2)
        for fd in (a_read, a_write, b_read, b_write):
            os.close(fd)


def rpc(calls: int) -> Dict[str, float]:
    import actors
    import engine.dist_autograd  # noqa: F401

    port = free_port()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    with server_process(_as_users_worker, port, "ours"):
        actors.init_rpc("worker0", 0, 2, num_worker_threads=16)
        def call() -> None:
            actors.rpc_sync("worker1", echo_main, args=(1,))

        def call_async() -> None:
            actors.rpc_async("worker1", echo_main, args=(1,)).wait()

        try:
            return {"rpc_sync_us": _median_us(call, calls),
                    "rpc_sync_cpu_us_per_call": _cpu_us_per_call(call, calls),
                    "rpc_async_one_us": _median_us(call_async, calls),
                    "rpc_async_one_cpu_us_per_call": _cpu_us_per_call(call_async, calls),
                    "rpc_async_window_cpu_us": _window_cpu_us(10 * calls)}
        finally:
            actors.shutdown()


def _window_cpu_us(calls: int, window: int = 64) -> Dict[str, float]:
    """CPU µs per call of `rpc_async` calls kept `window` in flight, by thread of this
    process, and of the callee process."""
    import multiprocessing as mp

    import actors

    callee = mp.active_children()[-1].pid
    windows = calls // window
    mine, theirs = thread_ticks(_actor_io), _process_cpu_s(callee)
    for _ in range(windows):
        for future in [actors.rpc_async("worker1", echo_main, args=(1,))
                       for _ in range(window)]:
            future.wait()
    now, callee_s = thread_ticks(_actor_io), _process_cpu_s(callee) - theirs
    us_per_tick = 1e6 / os.sysconf("SC_CLK_TCK")
    cpu = {kind: (now[kind] - mine.get(kind, 0)) * us_per_tick for kind in now}
    cpu["callee"] = callee_s * 1e6
    return {kind: round(us / (windows * window), 1) for kind, us in cpu.items()}


def _actor_io(name: str) -> Optional[str]:
    return "actor_io" if name == "worker0-io" else None


def _rank1(ready: Any, port: int, calls: int) -> None:
    import numpy as np

    import actors.distributed as dist

    ready.put("up")
    dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=1, world_size=2)
    array = np.zeros(1024, np.float32)
    for _ in range(min(200, calls) + calls):
        dist.all_reduce(array)
    dist.destroy_process_group()


def all_reduce(calls: int) -> float:
    import numpy as np

    import actors.distributed as dist

    port = free_port()
    with server_process(_rank1, port, calls):
        dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2)
        array = np.zeros(1024, np.float32)
        try:
            return _median_us(lambda: dist.all_reduce(array), calls)
        finally:
            dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    rounds = []
    for _ in range(args.rounds):
        figures = raw_rt(args.calls)
        figures["thread_handoff_rt_us"] = thread_handoff(args.calls)
        figures.update(rpc(args.calls))
        figures["all_reduce_4kib_2_ranks_us"] = all_reduce(args.calls)
        rounds.append(figures)
    medians = {name: statistics.median(r[name] for r in rounds) for name in HOPS}
    per_hop = {name: round(value / HOPS[name], 1) for name, value in medians.items()}
    cpu = {path: {side: statistics.median(r[f"{path}_cpu_us_per_call"][side] for r in rounds)
                  for side in ("caller", "callee")}
           for path in ("raw", "rpc_sync", "rpc_async_one")}
    cpu["rpc_async_window"] = {kind: statistics.median(r["rpc_async_window_cpu_us"].get(kind, 0)
                                                       for r in rounds)
                               for kind in rounds[0]["rpc_async_window_cpu_us"]}
    print(json.dumps({"workload": "hops", "calls": args.calls, "rounds": rounds,
                      "median": medians, "hops": HOPS, "us_per_hop": per_hop,
                      "cpu_us_per_call": cpu}))


if __name__ == "__main__":
    main()
