"""A store operation that waits long says which keys it still waits for, on every store."""
from __future__ import annotations

import re
import threading

import pytest
import structlog

from store import HashStore, StoreTimeoutError
from store.barrier import arrive, barrier
from store.waiting import key_wait_text
from tests.waiting import raised_by, wait_until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def quick_reports(monkeypatch):
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "0.2")
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_EVERY", "0.3")


def reports(logs):
    return [e["event"] for e in logs if e["log_level"] == "warning"]


def in_thread(fn, *args):
    """Run `fn(*args)` on a thread; the list it returns holds what it raised (None: nothing)."""
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(raised_by(fn, *args)), daemon=True)
    thread.start()
    return thread, outcome


def test_the_text_names_the_missing_keys():
    assert key_wait_text("wait", ["a", "b"], ["b"]) == \
        "store wait for keys ['a', 'b'] (missing: ['b'])"
    assert key_wait_text("get", ["k"], ["k"], "127.0.0.1:29500") == \
        "store get on 127.0.0.1:29500 for key 'k'"
    assert key_wait_text("queue_pop", ["q"], ["q"]) == \
        "store queue_pop waiting for an item in queue 'q'"
    many = [str(i) for i in range(10)]
    assert key_wait_text("wait", many, many).endswith("'7', ... 2 more])")


def test_a_long_wait_names_the_keys_still_missing_then_completes(store, quick_reports):
    store.set("a", b"1")
    with structlog.testing.capture_logs() as logs:
        thread, outcome = in_thread(store.wait, ["a", "b"], 10.0)
        assert wait_until(lambda: len(reports(logs)) >= 2, timeout=10)
        store.set("b", b"2")
        thread.join(10)
    assert not thread.is_alive() and outcome == [None]
    first = reports(logs)[0]
    # A PrefixStore's keys show as its underlying store holds them ('job/b').
    assert first.startswith("store wait") and "b'] (missing: [" in first
    assert re.search(r"b'\]\) for \d+\.\d s$", first) and "a'])" not in first


def test_a_long_get_names_its_key(store, quick_reports):
    with structlog.testing.capture_logs() as logs:
        thread, outcome = in_thread(store.get, "late")
        assert wait_until(lambda: reports(logs), timeout=10)
        store.set("late", b"here")
        thread.join(10)
    assert outcome == [None] and re.search(r"late' for \d+\.\d s$", reports(logs)[0])
    assert store.get("late") == b"here"


def test_a_wait_that_times_out_still_names_the_whole_timeout(store, quick_reports):
    with structlog.testing.capture_logs() as logs:
        with pytest.raises(StoreTimeoutError) as info:
            store.wait(["never"], 0.7)
    assert info.value.timeout == pytest.approx(0.7) and info.value.keys == ["never"]
    assert 1 <= len(reports(logs)) <= 2  # due at 0.2 s and 0.5 s
    assert all("never'" in line for line in reports(logs))  # 'job/never' in a PrefixStore


def test_a_short_wait_logs_nothing(store, quick_reports):
    with structlog.testing.capture_logs() as logs:
        thread, outcome = in_thread(store.wait, ["soon"], 10.0)
        store.set("soon", b"1")
        thread.join(10)
    assert outcome == [None] and reports(logs) == []


def test_a_long_barrier_says_how_many_arrived_and_nothing_of_its_keys(quick_reports):
    store = HashStore(timeout=10)
    try:
        arrive(store, "x", 3)
        with structlog.testing.capture_logs() as logs:
            thread, outcome = in_thread(barrier, store, "x", 3, 10.0)
            assert wait_until(lambda: reports(logs), timeout=10)
            arrive(store, "x", 3)
            thread.join(10)
        assert outcome == [None]
        assert reports(logs)[0].startswith("store barrier 'x': 2 of 3 arrived for ")
        assert not any("x/open" in line for line in reports(logs))
    finally:
        store.close()


def test_a_long_barrier_of_members_that_name_themselves_names_those_missing(quick_reports):
    store = HashStore(timeout=10)
    try:
        arrive(store, "x", 4, member=2)
        with structlog.testing.capture_logs() as logs:
            thread, outcome = in_thread(barrier, store, "x", 4, 10.0, "rpc shutdown of 'w1'",
                                        "workers", 1)
            assert wait_until(lambda: reports(logs), timeout=10)
            arrive(store, "x", 4, member=0)
            arrive(store, "x", 4, member=3)
            thread.join(10)
        assert outcome == [None]
        assert reports(logs)[0].startswith(
            "rpc shutdown of 'w1': 2 of 4 workers arrived (missing: ranks 0, 3) for ")
    finally:
        store.close()


def test_a_client_waiting_for_its_server_says_where_it_connects_then_connects(quick_reports):
    from store import TCPStore
    from tests.net import free_port

    port, clients = free_port(), []
    with structlog.testing.capture_logs() as logs:
        thread, outcome = in_thread(
            lambda: clients.append(TCPStore("127.0.0.1", port, timeout=10)))
        assert wait_until(lambda: reports(logs), timeout=10)
        server = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
        try:
            thread.join(10)
            assert outcome == [None] and clients
            clients[0].set("k", b"v")
            assert server.get("k") == b"v"
        finally:
            for client in clients:
                client.close()
            server.close()
    assert reports(logs)[0].startswith(
        f"connecting to tcp://127.0.0.1:{port}: nothing answers there yet for ")


def test_a_master_waiting_for_its_workers_says_how_many_joined(quick_reports):
    from store import TCPStore
    from tests.net import free_port

    port, masters = free_port(), []
    with structlog.testing.capture_logs() as logs:
        thread, outcome = in_thread(lambda: masters.append(
            TCPStore("127.0.0.1", port, world_size=2, is_master=True, timeout=10)))
        assert wait_until(lambda: reports(logs), timeout=10)
        worker = TCPStore("127.0.0.1", port, world_size=2, timeout=10)
        try:
            thread.join(10)
            assert outcome == [None] and masters
        finally:
            worker.close()
            for master in masters:
                master.close()
    assert reports(logs)[0].startswith(
        f"TCPStore at 127.0.0.1:{port}: 1 of 2 workers joined for ")


def test_the_quorum_text_says_what_the_member_asked_for():
    from store.quorum import quorum_wait_text

    assert quorum_wait_text("q/3", "r1", 4, None, None) == \
        "store quorum 'q/3' as 'r1': waiting for 4 members"
    assert quorum_wait_text("q/3", "r1", None, ["r2", "r1"], 1) == (
        "store quorum 'q/3' as 'r1': waiting for members ['r1', 'r2'] "
        "(at least 1 at the deadline)")


def test_a_long_quorum_says_what_it_waits_for_then_is_released(tcp_master, quick_reports):
    from store import TCPStore

    clients = [TCPStore("127.0.0.1", tcp_master.port, timeout=10) for _ in range(2)]
    try:
        results = []
        with structlog.testing.capture_logs() as logs:
            thread, outcome = in_thread(lambda: results.append(
                clients[0].quorum("round", "a", b"1", count=2, timeout=10)))
            assert wait_until(lambda: reports(logs), timeout=10)
            assert clients[1].quorum("round", "b", b"2", count=2, timeout=10) == \
                {"a": b"1", "b": b"2"}
            thread.join(10)
        assert outcome == [None] and results == [{"a": b"1", "b": b"2"}]
        assert reports(logs)[0].startswith(
            "store quorum 'round' as 'a': waiting for 2 members for ")
    finally:
        for client in clients:
            client.close()
