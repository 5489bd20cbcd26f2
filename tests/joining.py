"""Start processes that each join an RPC world or a process group with their own idea
of it (rank, world size, name), and collect how each join ended."""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
from typing import Any, List, Optional, Tuple

from tests.net import free_port
from tests.subprocesses import reap

ctx = mp.get_context("spawn")

Claim = Tuple[int, int, Optional[str]]  # rank, world size, name


def _join(kind: str, index: int, claim: Claim, port: int, timeout: float, results: Any) -> None:
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "error")
    rank, world_size, name = claim
    started = time.monotonic()
    try:
        if kind == "rpc":
            import actors

            actors.init_rpc(name, rank, world_size, init_method=f"tcp://127.0.0.1:{port}",
                            timeout=timeout)
            actors.shutdown(graceful=False)
        else:
            import actors.distributed as dist

            dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                    world_size=world_size, timeout=timeout)
            dist.destroy_process_group()
        outcome = "joined"
    except Exception as exc:  # noqa: BLE001 - reported to the test
        outcome = f"{type(exc).__name__}: {exc}"
    results.put((index, outcome, time.monotonic() - started))


def join_all(kind: str, claims: List[Claim], timeout: float, wait: float
             ) -> List[Tuple[str, float]]:
    """(outcome, seconds) per claim, in order: "joined", "<Error>: message", or
    ("missing", wait) for a process that reported nothing within `wait` seconds.
    The process of claim 0 hosts the store; every process is gone on return."""
    port = free_port()
    results = ctx.Queue()
    procs = [ctx.Process(target=_join, args=(kind, i, claim, port, timeout, results),
                         daemon=True) for i, claim in enumerate(claims)]
    for proc in procs:
        proc.start()
    outcomes = {}
    try:
        deadline = time.monotonic() + wait
        while len(outcomes) < len(claims) and time.monotonic() < deadline:
            try:
                index, outcome, seconds = results.get(timeout=0.5)
                outcomes[index] = (outcome, seconds)
            except queue.Empty:
                if not any(p.is_alive() for p in procs):
                    break
    finally:
        reap(procs)
    return [outcomes.get(i, ("missing", wait)) for i in range(len(claims))]
