"""What the examples share: a free port, spawned workers joined and checked, the digits."""
from __future__ import annotations

import multiprocessing as mp
import os
import socket
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence, Tuple

import numpy as np

os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")

import actors  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "digits.npz")


def digits(test_size: int = 297, seed: int = 0) -> Tuple[np.ndarray, ...]:
    """Train and test splits of the 8x8 digits (pixels scaled to 0..1)."""
    data = np.load(DATA)
    images = data["images"].astype(np.float32) / 16.0
    labels = data["labels"].astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    test, train = order[:test_size], order[test_size:]
    return images[train], labels[train], images[test], labels[test]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def join_all(procs: Sequence[mp.process.BaseProcess], timeout: float = 60.0) -> None:
    """Join every process within `timeout` seconds in all; SystemExit naming any that failed.

    A process still running at the deadline is killed and counts as failed, so an
    example never exits 0 while one of its processes went wrong.
    """
    deadline = time.monotonic() + timeout
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join(10)
    failed = [f"{proc.name} exited with {proc.exitcode}" for proc in procs if proc.exitcode != 0]
    if failed:
        raise SystemExit("failed: " + "; ".join(failed))


def _serve(rank: int, world_size: int, port: int) -> None:
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    actors.init_rpc(f"worker{rank}", rank, world_size, init_method=f"tcp://127.0.0.1:{port}")
    actors.shutdown()


@contextmanager
def world(world_size: int, name: str = "driver",
          serve: Callable[[int, int, int], None] = _serve) -> Iterator[None]:
    """This process joins as rank 0 (hosting the store); ranks 1.. are spawned workers."""
    port = free_port()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=serve, args=(rank, world_size, port), name=f"rank {rank}")
             for rank in range(1, world_size)]
    for proc in procs:
        proc.start()
    try:
        actors.init_rpc(name, 0, world_size, init_method=f"tcp://127.0.0.1:{port}")
        try:
            yield
        finally:
            actors.shutdown()
    finally:
        join_all(procs)
