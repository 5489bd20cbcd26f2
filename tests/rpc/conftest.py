"""RPC worlds for tests: this process is rank 0, the others are spawned processes."""
from __future__ import annotations

import contextlib
import multiprocessing as mp
from typing import Iterator, List

import pytest

import actors
from actors.rpc.state import current_agent
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
            # A worker a test killed can look alive a moment longer (its connections
            # closed, its exit not yet reaped); this worker has already seen it lost.
            graceful = all(p.is_alive() for p in procs) and \
                not current_agent().lost_workers
            actors.shutdown(graceful=graceful, timeout=60)
    finally:
        reap(procs, 30)


@pytest.fixture(scope="module")
def world():
    with rpc_world(3) as procs:
        yield procs
