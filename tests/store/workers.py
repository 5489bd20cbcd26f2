"""Functions that spawned test processes run; importable so `spawn` children find them.

Each reports through a multiprocessing queue: its result, or a RuntimeError carrying
the traceback text when it failed (so the test fails with the child's reason).
"""
from __future__ import annotations

import functools
import os
import time
import traceback
from typing import Any, Callable

from tests.store.stores import open_store

WAIT = 30.0  # every wait of a worker is bounded


def reporting(fn: Callable) -> Callable:
    """Put the worker's result, or its traceback as a RuntimeError, on `results` (1st arg)."""

    @functools.wraps(fn)
    def wrapper(results: Any, *args: Any) -> None:
        try:
            results.put(fn(*args))
        except BaseException:
            results.put(RuntimeError(f"worker {fn.__name__} failed:\n{traceback.format_exc()}"))

    return wrapper


@reporting
def add_many(spec: tuple, key: str, times: int, go: Any) -> int:
    with open_store(spec) as store:
        if not go.wait(WAIT):
            raise TimeoutError("no start signal")
        last = 0
        for _ in range(times):
            last = store.add(key, 1)
        return last


@reporting
def set_key(spec: tuple, key: str, value: bytes) -> bool:
    with open_store(spec) as store:
        store.set(key, value)
        return True


@reporting
def get_when_set(spec: tuple, key: str, ready: Any) -> bytes:
    with open_store(spec) as store:
        ready.set()
        return store.get(key)


@reporting
def time_wait_wakeup(spec: tuple, key: str, ready: Any) -> float:
    """Block in wait(); return the monotonic time it returned (system-wide clock on Linux)."""
    with open_store(spec) as store:
        ready.set()
        store.wait([key], timeout=WAIT)
        return time.monotonic()


@reporting
def race_compare_set(spec: tuple, key: str, rank: int, go: Any) -> tuple:
    with open_store(spec) as store:
        if not go.wait(WAIT):
            raise TimeoutError("no start signal")
        mine = f"rank-{rank}".encode()
        returned = store.compare_set(key, b"", mine)
        return rank, returned == mine, store.get(key)


@reporting
def rendezvous_and_meet(url: str, rank: int, world_size: int) -> tuple:
    """Rendezvous, publish our rank, read everyone's; close only after all have read."""
    from store import rendezvous

    store, got_rank, got_world = next(rendezvous(url, rank, world_size, timeout=WAIT))
    try:
        store.set(f"rank/{got_rank}", str(os.getpid()))
        keys = [f"rank/{r}" for r in range(got_world)]
        pids = store.multi_get(keys)
        store.add("done", 1)
        if got_rank == 0:
            # rank 0 hosts the tcp:// server: it must outlive everyone's last call
            store.wait([f"left/{r}" for r in range(1, got_world)], timeout=WAIT)
        else:
            store.set(f"left/{got_rank}", b"1")
        return got_rank, got_world, [p.decode() for p in pids]
    finally:
        store.close()


# -- FileStore crash tests ---------------------------------------------------------------


def die_holding_the_lock(path: str, holding: Any, release: Any) -> None:
    """Take the write lock, leave a torn temp file, signal, then block until killed."""
    from store.file_store import FileStore

    store = FileStore(path, timeout=WAIT)
    with store._mutex, store._flock(exclusive=True):
        with open(store._tmp_path, "wb") as torn:
            torn.write(b"AGSTORE1\x00\x00partial-snapshot")
            torn.flush()
        holding.set()
        release.wait(WAIT)  # the parent kills us long before this returns


def write_forever(path: str, progress: Any) -> None:
    """set() in a tight loop until killed, reporting progress after the first writes."""
    from store.file_store import FileStore

    store = FileStore(path, timeout=WAIT)
    i = 0
    deadline = time.monotonic() + WAIT  # bounded even if the parent never kills us
    while time.monotonic() < deadline:
        store.set("counter", str(i))
        store.set(f"key-{i % 50}", os.urandom(i % 4096))
        i += 1
        if i == 20:
            progress.set()
