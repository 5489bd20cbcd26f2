"""W5 with many clients: aggregate add rate, a wake-up storm and a barrier, per system.

Each figure runs the same client code against our TCPStore, torch's TCPStore and a
raw pyzmq ROUTER echo server (the floor: what one Python server thread moves over
ZeroMQ when it does no work), each client in its own spawned process. Times are
`time.perf_counter` readings, which are CLOCK_MONOTONIC and so comparable across
the processes of one machine.
"""
from __future__ import annotations

import multiprocessing as mp
import statistics
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchmarks._procs import server_process


def open_client(kind: str, port: int) -> Any:
    """A client of `kind` ("ours", "torch" or "raw") with `add`, `set` and `wait`."""
    if kind == "raw":
        return _RawClient(port)
    if kind == "torch":
        from datetime import timedelta

        import torch.distributed as dist

        return dist.TCPStore("127.0.0.1", port, 1, False, timeout=timedelta(seconds=120),
                             wait_for_workers=False)
    from store.tcp_store import TCPStore

    return TCPStore("127.0.0.1", port, timeout=120)


class _RawClient:
    """A DEALER that sends a 32-byte request and waits for the echo, as `add` would."""

    def __init__(self, port: int):
        import zmq

        self._dealer = zmq.Context.instance().socket(zmq.DEALER)
        self._dealer.connect(f"tcp://127.0.0.1:{port}")

    def add(self, key: str, amount: int) -> int:
        self._dealer.send(b"x" * 32)
        self._dealer.recv()
        return 0


# ---- aggregate add rate -----------------------------------------------------------------

def _adder(orders: Any, results: Any, kind: str, port: int) -> None:
    """Do sequential adds for as long as each order says; report how many."""
    import os

    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    client = open_client(kind, port)
    client.add("warm", 1)
    results.put("up")
    while True:
        order = orders.get()
        if order is None:
            return
        start_at, seconds = order
        while time.perf_counter() < start_at:
            pass
        done, end = 0, start_at + seconds
        while time.perf_counter() < end:
            client.add("count", 1)
            done += 1
        results.put(done)


def add_rates(kind: str, port: int, crowd_sizes: Sequence[int], seconds: float,
              server_cpu: Optional[Callable[[], float]] = None) -> Dict[str, float]:
    """Aggregate adds per second with each number of client processes in `crowd_sizes`;
    with `server_cpu` (the server's CPU seconds so far), also its CPU µs per add."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    most = max(crowd_sizes)
    orders = [ctx.Queue() for _ in range(most)]
    procs = [ctx.Process(target=_adder, args=(orders[i], results, kind, port), daemon=True)
             for i in range(most)]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            results.get(timeout=180)
        rates = {}
        for size in crowd_sizes:
            before = server_cpu() if server_cpu else 0.0
            start_at = time.perf_counter() + 0.2
            for queue in orders[:size]:
                queue.put((start_at, seconds))
            total = sum(results.get(timeout=seconds + 60) for _ in range(size))
            rates[f"add_ops_{size}_clients"] = round(total / seconds, 1)
            if server_cpu:
                rates[f"server_cpu_us_{size}_clients"] = round(
                    (server_cpu() - before) / total * 1e6, 1)
        return rates
    finally:
        _end(procs, orders)


# ---- a wake-up storm: one set releases many waiters --------------------------------------

def _waiters(ready: Any, kind: str, port: int, threads: int) -> None:
    """`threads` clients of this process park in wait on "go"; report the last wake-up."""
    import os

    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    clients = [open_client(kind, port) for _ in range(threads)]
    woke: List[float] = []

    def park(client: Any) -> None:
        client.add("parked", 1)
        client.wait(["go"])
        woke.append(time.perf_counter())

    workers = [threading.Thread(target=park, args=(c,)) for c in clients]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    ready.put(max(woke) if len(woke) == threads else float("nan"))


def wake_storm(kind: str, port: int, processes: int, threads: int) -> float:
    """Milliseconds from one `set` until the last of processes × threads waiters returns."""
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    procs = [ctx.Process(target=_waiters, args=(ready, kind, port, threads), daemon=True)
             for _ in range(processes)]
    for proc in procs:
        proc.start()
    try:
        store = open_client(kind, port)
        _until(lambda: store.add("parked", 0) >= processes * threads, 180)
        time.sleep(0.2)  # the last waiter's wait request is on its way once it counted
        start = time.perf_counter()
        store.set("go", b"1")
        last = max(ready.get(timeout=120) for _ in procs)
        return round((last - start) * 1e3, 2)
    finally:
        _end(procs)


# ---- a barrier of many processes ------------------------------------------------------------

def _barrier_member(ready: Any, kind: str, port: int, size: int, rounds: int) -> None:
    """Wait for "start", then pass `rounds` barriers back to back, each an add + wait as
    `actors.rpc.world.barrier` does (kind "quorum": our store's quorum round, one request
    per member); report (arrived, released, CPU seconds of this process) of each."""
    import os

    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    client = open_client("ours" if kind == "quorum" else kind, port)
    client.add("joined", 1)
    client.wait(["start"])
    times = []
    for round_ in range(rounds):
        cpu, arrived = time.process_time(), time.perf_counter()
        if kind == "quorum":
            client.quorum(f"round/{round_}", str(os.getpid()), count=size, timeout=120)
        else:
            if client.add(f"arrived/{round_}", 1) == size:
                client.set(f"open/{round_}", b"1")
            client.wait([f"open/{round_}"])
        times.append((arrived, time.perf_counter(), time.process_time() - cpu))
    ready.put(times)


Rounds = List[List[Tuple[float, float, float]]]


def barrier_rounds(kind: str, port: int, size: int, rounds: int = 5) -> Rounds:
    """`rounds` barriers in a row of `size` processes: each member's (arrived, released,
    CPU seconds of its process) in each round."""
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    procs = [ctx.Process(target=_barrier_member, args=(ready, kind, port, size, rounds),
                         daemon=True) for _ in range(size)]
    for proc in procs:
        proc.start()
    try:
        store = open_client("ours" if kind == "quorum" else kind, port)
        _until(lambda: store.add("joined", 0) >= size, 600)
        store.set("start", b"1")
        return [ready.get(timeout=120) for _ in procs]
    finally:
        _end(procs)


def released_ms(members: Rounds) -> float:
    """Milliseconds from the last arrival at a barrier until the last member is
    released: the median over the rounds."""
    spans = [max(m[r][1] for m in members) - max(m[r][0] for m in members)
             for r in range(len(members[0]))]
    return round(statistics.median(spans) * 1e3, 2)


def member_cpu_us(members: Rounds) -> float:
    """The CPU one member's process spends on one round (µs, median over members and
    rounds): with every member on a few cores, the round's time is about their sum."""
    return round(statistics.median(cpu for m in members for _, _, cpu in m) * 1e6, 1)


def barrier(kind: str, port: int, size: int, rounds: int = 5) -> float:
    """`released_ms` of `rounds` barriers in a row of `size` processes."""
    return released_ms(barrier_rounds(kind, port, size, rounds))


# ---- all of it, for one system ------------------------------------------------------------------

def crowd_figures(kind: str, server: Callable[..., None], crowd_sizes: Sequence[int],
                  seconds: float, storm: Sequence[int], barrier_size: int) -> Dict[str, float]:
    """Every many-client figure of `kind`, each against a fresh server."""
    with server_process(server) as port:
        figures: Dict[str, float] = add_rates(kind, port, crowd_sizes, seconds)
    if kind != "raw":
        with server_process(server) as port:
            figures["storm_ms"] = wake_storm(kind, port, *storm)
        if barrier_size:
            with server_process(server) as port:
                figures[f"barrier_{barrier_size}_ms"] = barrier(kind, port, barrier_size)
    return figures


def _until(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the clients did not all start")
        time.sleep(0.05)


def _end(procs: List[Any], orders: Sequence[Any] = ()) -> None:
    for queue in orders:
        queue.put(None)
    for proc in procs:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
