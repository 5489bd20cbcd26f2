"""64 processes on this machine: an RPC world and a process group form, talk and end.

The 64 processes are forked from a preloaded server (`tests.preloaded`): what is
tested is the world, not 64 interpreters starting. Formation times are measured by
benchmarks/bench_world.py, not here.
"""
import time

import pytest

from tests.distributed.ranks import run_ranks
from tests.net import free_port
from tests.preloaded import ctx
from tests.scale_ranks import all_reduce_rank, rpc_rank

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

WORLD = 64
REPORT_TIMEOUT = 180.0
THREADS_LIMIT = 40  # per worker, whatever the number of peers: no thread per connection
RSS_LIMIT_MIB = 150.0


def test_a_64_worker_rpc_world_forms_calls_all_to_all_and_shuts_down():
    port, results = free_port(), ctx.Queue()
    procs = [ctx.Process(target=rpc_rank, args=(rank, WORLD, port, results), daemon=True)
             for rank in range(WORLD)]
    try:
        for proc in procs:
            proc.start()
        reports = {}
        deadline = time.monotonic() + REPORT_TIMEOUT
        while len(reports) < WORLD and time.monotonic() < deadline:
            rank, status, value = results.get(timeout=max(0.1, deadline - time.monotonic()))
            assert status == "ok", f"worker{rank}: {value}"
            reports[rank] = value
        assert all(correct for correct, _, _ in reports.values())
        assert max(threads for _, threads, _ in reports.values()) <= THREADS_LIMIT
        assert max(rss for _, _, rss in reports.values()) <= RSS_LIMIT_MIB
        for proc in procs:
            proc.join(max(1.0, deadline - time.monotonic()))
        assert [proc.exitcode for proc in procs] == [0] * WORLD
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def test_a_64_rank_process_group_forms_passes_a_barrier_all_reduces_and_is_destroyed():
    reports = run_ranks(WORLD, all_reduce_rank, timeout=REPORT_TIMEOUT, context=ctx)
    assert [total for total, _, _ in reports] == [WORLD * (WORLD - 1) / 2] * WORLD
    assert max(threads for _, threads, _ in reports) <= THREADS_LIMIT
    assert max(rss for _, _, rss in reports) <= RSS_LIMIT_MIB
