"""A rank that ends its script right after a collective has delivered its part first.

Each rank returns from its function without `destroy_process_group()` (as many torch
scripts do), with a busy-looping process beside it, and every rank must still finish
its `all_reduce`. The ranks are forked from a preloaded server (`tests.preloaded`:
cheap to start many times); their normal exit runs the same flush as a script's
interpreter exit, which the launcher test at the end covers.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.distributed.scenarios import last_all_reduce
from tests.net import free_port
from tests.preloaded import ctx

ROOT = Path(__file__).resolve().parents[2]
RUNS = 50


@pytest.fixture
def busy_process():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield busy
    finally:
        busy.kill()
        busy.wait(10)


def run_once(world: int, size: int) -> dict:
    port = free_port()
    results = ctx.Queue()
    procs = [ctx.Process(target=last_all_reduce, args=(r, world, port, size, results))
             for r in range(world)]
    for proc in procs:
        proc.start()
    try:
        outcomes = dict(results.get(timeout=30) for _ in range(world))
        for proc in procs:
            proc.join(15)
        outcomes["exit codes"] = [proc.exitcode for proc in procs]
        return outcomes
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("size", [4, 1 << 20], ids=["16 B", "4 MiB"])
def test_every_rank_finishes_its_last_all_reduce_when_peers_exit_right_after_theirs(
        busy_process, world, size):
    started = time.monotonic()
    failures = []
    for run in range(RUNS):
        outcome = run_once(world, size)
        if outcome != {**{r: "ok" for r in range(world)}, "exit codes": [0] * world}:
            failures.append((run, outcome))
    assert not failures, f"{len(failures)} of {RUNS} runs failed, e.g. {failures[:3]}"
    assert time.monotonic() - started < 540


SCRIPT = """
import sys
import numpy as np
import actors.distributed as dist

dist.init_process_group()
a = np.full(int(sys.argv[1]), dist.get_rank() + 1, dtype=np.float32)
dist.all_reduce(a)
w = dist.get_world_size()
assert (a == w * (w + 1) / 2).all(), a
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [2, 4])
def test_a_script_that_ends_after_a_collective_under_the_launcher_loses_nothing(
        busy_process, tmp_path, world):
    script = tmp_path / "last_message.py"
    script.write_text(SCRIPT)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "ACTORGRAD_LOG_LEVEL": "error"}
    # One launch of each size: the forked test above repeats the same exit 50 times.
    for size in (4, 1 << 20):
        done = subprocess.run([sys.executable, "-m", "actors.launch", "--nproc-per-node",
                               str(world), str(script), str(size)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
