"""A small job that gets stuck on purpose, for the debugging commands to look at.

Run as one process per rank with MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE set:
``python tests/debugging/job.py SCENARIO RELEASE``. Whatever is stuck waits until
the file RELEASE exists (60 s at most), so every run ends by itself.

Scenarios: ``chain`` (w0 calls w1 with rpc_sync, which calls w2 with rpc_async, where
`stuck_here` waits; w2 has one worker thread, so all of its worker threads are
blocked); ``async_chain`` (the same, but w1's function is an `async_execution` one
that returns the future of its call to w2, so no thread of w1 waits); ``then_chain``
(w1's `async_execution` function calls w2 from a callback of a first call's future);
and, after one
collective that every rank completes, ``never_enters`` (rank 2 stays out of the
second all_reduce), ``different_shape`` and ``different_op`` (rank 2 enters the
second one with another shape, or calls broadcast), ``victim`` (rank 2 waits to be
killed or stopped by the test while the others enter the all_reduce); and
``traffic`` (1,000 RPCs from w0 and 100 all_reduce on every rank, then it prints
"traffic done" and waits, for a trace to be taken).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

import actors
import actors.distributed as dist


def wait_released(release: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)


def stuck_here(release: str) -> str:
    wait_released(release)
    return "released"


def relay(to: str, release: str) -> str:
    # asynchronously, while w0 calls synchronously: STATUS shows both kinds of wait
    return actors.rpc_async(to, stuck_here, args=(release,)).wait()


@actors.async_execution
def relay_async(to: str, release: str) -> actors.Future:
    return actors.rpc_async(to, stuck_here, args=(release,))


@actors.async_execution
def relay_then(to: str, release: str) -> actors.Future:
    """Calls w2's `stuck_here` from a callback, once a first call to w2 has returned."""
    result = actors.Future()

    def call_stuck(_echoed: actors.Future) -> None:
        stuck = actors.rpc_async(to, stuck_here, args=(release,))
        stuck.add_done_callback(lambda done: result.set_result(done.value()))

    # the first call ends after this function returned: its callback runs on w1's I/O
    # thread, with no thread of w1 serving the call any more
    actors.rpc_async(to, echo_later, args=(0.3,)).add_done_callback(call_stuck)
    return result


def chain(rank: int, release: str, relay_fn=relay) -> None:
    # JOB_INIT_METHOD: join through that init method (etcd://...) instead of env://
    actors.init_rpc(f"w{rank}", rank, int(os.environ["WORLD_SIZE"]),
                    init_method=os.environ.get("JOB_INIT_METHOD"),
                    num_worker_threads=1 if rank == 2 else 4)
    if rank == 0:
        print(actors.rpc_sync("w1", relay_fn, args=("w2", release)), flush=True)
    actors.shutdown()


def echo(value: object) -> object:
    return value


def echo_later(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def traffic(rank: int, release: str) -> None:
    dist.init_process_group()
    actors.init_rpc(f"w{rank}")
    if rank == 0:
        futures = [actors.rpc_async(f"w{1 + i % 2}", echo, args=(i,)) for i in range(500)]
        for i in range(500):
            actors.rpc_sync(f"w{1 + i % 2}", echo, args=(i,))
        actors.wait_all(futures)
    values = np.ones(16, np.float32)
    for _ in range(100):
        dist.all_reduce(values)
    print("traffic done", flush=True)
    wait_released(release)
    actors.shutdown()
    dist.destroy_process_group()


def collectives(rank: int, scenario: str, release: str) -> None:
    dist.init_process_group()
    values = np.ones(4, np.float32)
    dist.all_reduce(values)  # step 0: everyone
    try:
        if rank != 2:
            dist.all_reduce(values)
        elif scenario == "different_shape":
            dist.all_reduce(np.ones(8, np.float32))
        elif scenario == "different_op":
            dist.broadcast(values, 0)
        else:  # never_enters, victim: stay out until released (or killed, or stopped)
            wait_released(release)
            dist.all_reduce(values)
    except (dist.DistError, ValueError) as error:  # ValueError: CollectiveMismatchError
        print(f"collective failed: {type(error).__name__}: {error}", flush=True)
        wait_released(release)
        os._exit(3)  # the group is broken: leave without the goodbyes
    dist.destroy_process_group()


def main() -> None:
    scenario, release = sys.argv[1], sys.argv[2]
    rank = int(os.environ["RANK"])
    if scenario == "chain":
        chain(rank, release)
    elif scenario == "async_chain":
        chain(rank, release, relay_async)
    elif scenario == "then_chain":
        chain(rank, release, relay_then)
    elif scenario == "traffic":
        traffic(rank, release)
    else:
        collectives(rank, scenario, release)


if __name__ == "__main__":
    main()
