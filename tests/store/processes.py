"""Run worker functions in spawned processes and always clean them up."""
from __future__ import annotations

import contextlib
import multiprocessing
import queue
import time
from typing import Any, Callable, Iterator, List, Sequence

JOIN_TIMEOUT = 20.0  # for all of a test's processes together

ctx = multiprocessing.get_context("spawn")


@contextlib.contextmanager
def spawned(target: Callable, args_list: Sequence[tuple]) -> Iterator[List[Any]]:
    """Start one spawned process per args tuple; on exit join them (bounded), kill survivors."""
    procs = [ctx.Process(target=target, args=args, daemon=True) for args in args_list]
    try:
        for proc in procs:
            proc.start()
        yield procs
    finally:
        deadline = time.monotonic() + JOIN_TIMEOUT
        for proc in procs:
            if proc.pid is not None:
                proc.join(max(0.0, deadline - time.monotonic()))
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def collect(results: Any, count: int, timeout: float = 40.0) -> list:
    """`count` items from a multiprocessing queue within `timeout`; a worker's error is raised."""
    deadline = time.monotonic() + timeout
    items = []
    while len(items) < count:
        try:
            item = results.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"got {len(items)} of {count} results within {timeout}s") from None
        if isinstance(item, BaseException):
            raise item
        items.append(item)
    return items
