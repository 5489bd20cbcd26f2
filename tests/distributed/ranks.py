"""Run a scenario on every rank of a process group, each rank a spawned process."""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
import traceback
from typing import Any, Callable, Iterable, List, Optional

from tests.net import free_port
from tests.subprocesses import reap

ctx = mp.get_context("spawn")


def _rank_main(scenario: Callable[..., Any], rank: int, world: int, port: int, args: tuple,
               results: Any, init: str) -> None:
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    import actors.distributed as dist

    try:
        if init == "env":  # as python -m actors.launch sets it up
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                              WORLD_SIZE=str(world))
            dist.init_process_group()
        else:
            dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                    world_size=world, timeout=60)
        try:
            value = scenario(rank, world, *args)
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
        results.put((rank, "ok", value))
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        results.put((rank, "error", (type(exc).__name__, str(exc), traceback.format_exc())))


def run_ranks(world: int, scenario: Callable[..., Any], *args: Any, timeout: float = 60.0,
              init: str = "tcp", context: Any = ctx) -> List[Any]:
    """Each rank's return value, in rank order; AssertionError with a rank's traceback
    when any rank raised. `init` "env" starts each rank as the launcher would;
    `context` starts the processes (spawn; `tests.preloaded.ctx` for many ranks)."""
    outcomes = spawn_ranks(world, scenario, *args, timeout=timeout, init=init, context=context)
    for rank, (status, value) in enumerate(outcomes):
        if status != "ok":
            raise AssertionError(f"rank {rank} failed:\n{value[2]}")
    return [value for _, value in outcomes]


def spawn_ranks(world: int, scenario: Callable[..., Any], *args: Any, timeout: float = 60.0,
                wait_for: Optional[Iterable[int]] = None, init: str = "tcp",
                port: Optional[int] = None, context: Any = ctx) -> List[tuple]:
    """Each rank's ``(status, value)``; status "ok", or "error" with (type, message, tb),
    or "missing" for a rank that reported nothing (e.g. killed, or not in `wait_for`:
    the ranks whose report is awaited, all by default; the others are killed). Rank 0
    serves the ranks' store on `port` (a free one by default)."""
    port = free_port() if port is None else port
    results = context.Queue()
    procs = [context.Process(target=_rank_main,
                             args=(scenario, r, world, port, args, results, init), daemon=True)
             for r in range(world)]
    for proc in procs:
        proc.start()
    awaited = set(range(world) if wait_for is None else wait_for)
    try:
        outcomes = {}
        deadline = time.monotonic() + timeout
        while not awaited <= set(outcomes) and time.monotonic() < deadline:
            try:
                rank, status, value = results.get(timeout=0.5)
                outcomes[rank] = (status, value)
            except queue.Empty:
                if not any(procs[r].is_alive() for r in awaited - set(outcomes)):
                    break
        return [outcomes.get(r, ("missing", None)) for r in range(world)]
    finally:
        reap(procs)
