"""Helpers the benchmarks share: start a server in a spawned process, and take medians."""
from __future__ import annotations

import multiprocessing as mp
import statistics
from contextlib import contextmanager
from typing import Any, Callable, Iterator, List


@contextmanager
def server_process(target: Callable[..., Any], *args: Any, timeout: float = 60.0) -> Iterator[Any]:
    """Run `target(ready_queue, *args)` in a spawned process; yield what it puts on the queue."""
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    proc = ctx.Process(target=target, args=(ready, *args), daemon=True)
    proc.start()
    try:
        yield ready.get(timeout=timeout)
    finally:
        proc.kill()
        proc.join(10)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def median_of(runs: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(runs))


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else float("nan")


def percentile(values: List[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]
