"""A node that waits long to join a rendezvous says how many nodes joined and what it waits for."""
from __future__ import annotations

import re
import threading

import pytest
import structlog

from store import TCPStore
from store.elastic import DynamicRendezvousHandler, RendezvousTimeout, StoreRendezvousBackend
from store.elastic.operators import RendezvousContext
from store.elastic.settings import NodeDesc, RendezvousSettings
from store.elastic.state import RendezvousState
from store.elastic.waiting import join_wait
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

ME, OTHER, THIRD = (NodeDesc("host", pid, 0) for pid in (1, 2, 3))
WALL = 1_700_000_000.0


def text(participants, min_nodes=2, max_nodes=2, complete=False, waiting=(), last_call=None):
    settings = RendezvousSettings("job", min_nodes, max_nodes, RendezvousTimeout(), 5, 3)
    state = RendezvousState(round=3, complete=complete, deadline=last_call,
                            participants={n: 0 for n in participants}, wait_list=set(waiting))
    return str(join_wait(RendezvousContext(ME, state, settings, 100.0, WALL), 700.0))


def test_the_text_says_how_many_joined_and_what_the_join_waits_for():
    assert text([ME]) == ("rendezvous 'job' round 3: 1 of 2 nodes joined, waiting (min 2); "
                          "the join gives up in 600 s")
    assert text([ME], min_nodes=1, last_call=WALL + 20) == (
        "rendezvous 'job' round 3: 1 of 2 nodes joined (min 1), waiting for more until "
        "22:13:40 UTC (last call, 20 s left)")
    assert text([OTHER], 1, 2, complete=True, waiting=[ME]).startswith(
        "rendezvous 'job' round 3 runs with 1 nodes; waiting for the next round (1 on the")
    assert text([OTHER, THIRD], complete=True).startswith(
        "rendezvous 'job' round 3 is full (2 of 2 nodes); waiting for a place")


@pytest.fixture
def master():
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=20)
    try:
        yield store
    finally:
        store.close()


def join_in_thread(store, run_id, min_nodes, max_nodes, last_call=30.0):
    """Start one node's `next_rendezvous` on a thread; (thread, handler, results)."""
    handler = DynamicRendezvousHandler.from_backend(
        run_id, store, StoreRendezvousBackend(store, run_id), min_nodes, max_nodes,
        "127.0.0.1", RendezvousTimeout(join=20, last_call=last_call))
    results = []
    thread = threading.Thread(target=lambda: results.append(handler.next_rendezvous()),
                              daemon=True)
    thread.start()
    return thread, handler, results


def warnings(logs):
    return [e["event"] for e in logs if e["log_level"] == "warning"]


def test_a_lone_node_says_it_waits_for_a_second_one_then_joins(master, monkeypatch):
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "0.2")
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_EVERY", "0.3")
    handlers = []
    try:
        with structlog.testing.capture_logs() as logs:
            first, handler, results = join_in_thread(master, "slow", 2, 2)
            handlers.append(handler)
            assert wait_until(lambda: len(warnings(logs)) >= 2, timeout=10)
            second, handler, more = join_in_thread(master, "slow", 2, 2)
            handlers.append(handler)
            first.join(15)
            second.join(15)
        assert sorted(info.rank for info in results + more) == [0, 1]
        assert warnings(logs)[0].startswith(
            "rendezvous 'slow' round 0: 1 of 2 nodes joined, waiting (min 2)")
        assert re.search(r" for \d+\.\d s$", warnings(logs)[0])
    finally:
        for handler in handlers:
            handler.shutdown()


def test_a_last_call_says_until_when_it_waits_for_more_nodes(master, monkeypatch):
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "0.2")
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_EVERY", "0.3")
    with structlog.testing.capture_logs() as logs:
        thread, handler, results = join_in_thread(master, "last-call", 1, 2, last_call=1.0)
        thread.join(15)
    handler.shutdown()
    assert results and results[0].world_size == 1
    assert "1 of 2 nodes joined (min 1), waiting for more until" in warnings(logs)[0]


def test_a_quick_rendezvous_logs_nothing(master, monkeypatch):
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "5")
    with structlog.testing.capture_logs() as logs:
        nodes = [join_in_thread(master, "quick", 2, 2) for _ in range(2)]
        for thread, _, _ in nodes:
            thread.join(15)
    for _, handler, _ in nodes:
        handler.shutdown()
    assert all(results for _, _, results in nodes) and warnings(logs) == []
