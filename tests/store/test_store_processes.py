"""Several real processes sharing one store (FileStore file, TCPStore server)."""
from __future__ import annotations

import statistics
import time

import pytest

from tests.store import workers
from tests.store.processes import collect, ctx, spawned
from tests.store.stores import open_store

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]  # not in the quick set

READY = 30.0  # bound on waiting for a spawned child to start and connect
WAKEUP_LIMIT = 0.5  # generous for a noisy 2-core machine; typical figures are in docs/STORES.md


# Adds per process. On etcd each add is a compare-and-set that retries under
# contention: 8 x 500 took 26-32 s on an idle 2-core machine, too close to `collect`'s
# 40 s beside a busy process; 8 x 100 took 7-8 s, process start included.
ADDS = {"etcd": 50, "file": 200}


def test_eight_processes_adding_concurrently_give_the_exact_sum(shared_store_spec):
    results, go = ctx.Queue(), ctx.Event()
    adds = ADDS.get(shared_store_spec[0], 500)
    args = [(results, shared_store_spec, "counter", adds, go) for _ in range(8)]
    with spawned(workers.add_many, args):
        go.set()
        lasts = collect(results, 8)
    with open_store(shared_store_spec) as store:
        assert store.get("counter") == str(8 * adds).encode()
    assert max(lasts) == 8 * adds  # each add returned a distinct running total; the last saw all


def test_get_blocks_until_another_process_sets_the_key(shared_store_spec):
    results, ready = ctx.Queue(), ctx.Event()
    with open_store(shared_store_spec) as store, spawned(
        workers.get_when_set, [(results, shared_store_spec, "late", ready)]
    ):
        assert ready.wait(READY)
        assert results.empty()  # still blocked: the key does not exist yet
        store.set("late", b"from-parent")
        assert collect(results, 1) == [b"from-parent"]


def test_wait_wakes_soon_after_another_process_sets_the_key(shared_store_spec):
    latencies = []
    with open_store(shared_store_spec) as store:
        for round_ in range(3):
            results, ready = ctx.Queue(), ctx.Event()
            key = f"go-{round_}"
            with spawned(workers.time_wait_wakeup, [(results, shared_store_spec, key, ready)]):
                assert ready.wait(READY)
                # Not a synchronisation: it lets the waiter back off to its slowest
                # polling step, so the figure is the worst case, not the best.
                time.sleep(0.3)
                set_at = time.monotonic()
                store.set(key, b"1")
                (woke_at,) = collect(results, 1)
            latencies.append(woke_at - set_at)
    assert max(latencies) < WAKEUP_LIMIT, latencies
    median_ms, max_ms = statistics.median(latencies) * 1e3, max(latencies) * 1e3
    print(f"{shared_store_spec[0]} wait wake-up: median {median_ms:.1f} ms, max {max_ms:.1f} ms")


def test_racing_compare_set_elects_exactly_one_winner_that_everyone_sees(shared_store_spec):
    results, go = ctx.Queue(), ctx.Event()
    args = [(results, shared_store_spec, "leader", rank, go) for rank in range(4)]
    with spawned(workers.race_compare_set, args):
        go.set()
        outcomes = collect(results, 4)
    winners = [rank for rank, won, _ in outcomes if won]
    assert len(winners) == 1, outcomes
    assert {seen for _, _, seen in outcomes} == {f"rank-{winners[0]}".encode()}
