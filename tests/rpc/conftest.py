"""RPC worlds for tests: this process is rank 0, the others are spawned processes."""
from __future__ import annotations

import contextlib
import multiprocessing as mp
from typing import Iterator, List

import pytest

import actors
from tests.net import free_port
from tests.subprocesses import reap
from tests.rpc import workers

ctx = mp.get_context("spawn")


@contextlib.contextmanager
def rpc_world(world_size: int = 3, threads: int = 4, with_hook: bool = False
              ) -> Iterator[List[mp.Process]]:
    """Join a world of `world_size` workers as 'worker0'; yields the other processes.

    On exit: a graceful shutdown if every worker is alive, else an immediate one, and
    every process is joined (bounded) and killed if it is still there.
    """
    port = free_port()
    procs = [ctx.Process(target=workers.serve, args=(rank, world_size, port, threads, with_hook),
                         daemon=True) for rank in range(1, world_size)]
    for proc in procs:
        proc.start()
    try:
        actors.init_rpc("worker0", 0, world_size, init_method=f"tcp://127.0.0.1:{port}",
                        num_worker_threads=threads, timeout=30)
        try:
            yield procs
        finally:
            actors.shutdown(graceful=_every_worker_answers(procs), timeout=60)
    finally:
        reap(procs, 30)


def _every_worker_answers(procs: List[mp.Process]) -> bool:
    """Whether a graceful shutdown can finish: every worker is alive and answers. A
    worker a test killed can still look alive to `is_alive` for a while under load; a
    call to it fails at once, as its connection has closed."""
    if not all(proc.is_alive() for proc in procs):
        return False
    try:
        for rank in range(1, len(procs) + 1):
            actors.rpc_sync(f"worker{rank}", workers.echo, args=(None,), timeout=10)
    except Exception:  # noqa: BLE001 - lost, or too busy to leave gracefully
        return False
    return True


@pytest.fixture(scope="module")
def world():
    with rpc_world(3) as procs:
        yield procs
