"""The dynamic rendezvous among real node processes over a real TCPStore and a real etcd."""
import os
import signal
import threading
import time

import pytest

from store.elastic.operators import ROLLBACK_PERIOD
from store.etcd.store import EPHEMERAL_TTL
from tests import limits, preloaded
from tests.limits import within
from tests.elastic.nodes import pids_in

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]  # not in the quick set

FAST = dict(last_call=0.5, keep_alive_interval=0.5)


def joined(cluster, count, timeout=30.0):
    reports = cluster.collect(count, timeout)
    assert all(r[0] == "joined" for r in reports), reports
    return reports


def test_n_nodes_with_min_equal_max_get_ranks_zero_to_n_minus_one(cluster):
    cluster.start(4, 4, 4)
    reports = joined(cluster, 4)
    assert sorted(r[2] for r in reports) == [0, 1, 2, 3]
    assert {r[3] for r in reports} == {4}
    # The last node to arrive completes the round without any polling delay
    # (torch's floor is its 1 s sleep between syncs).
    assert min(r[4] for r in reports) < 1.0


def test_ranks_follow_the_sorted_node_order(cluster):
    procs = cluster.start(3, 3, 3)
    reports = {r[1]: r[2] for r in joined(cluster, 3)}
    # Same host, local id 0: the order is the pid order.
    assert [reports[pid] for pid in sorted(p.pid for p in procs)] == [0, 1, 2]


def test_min_below_max_completes_after_the_last_call(cluster):
    cluster.start(2, 2, 3, last_call=1.0)
    reports = joined(cluster, 2)
    assert sorted(r[2] for r in reports) == [0, 1] and {r[3] for r in reports} == {2}
    assert max(r[4] for r in reports) >= 1.0  # it waited the last call for a third node


def test_a_late_node_lands_on_the_wait_list_and_num_nodes_waiting_shows_it(cluster):
    first = cluster.start(2, 2, 3, **FAST)
    joined(cluster, 2)
    late = cluster.start(1, 2, 3, **FAST)[0]
    state = cluster.probe.wait_for(lambda s: late.pid in {n.pid for n in s.wait_list}, 20)
    assert state.complete and late.pid not in {n.pid for n in state.participants}
    cluster.tell(first[0], "waiting")
    assert cluster.collect(1) == [("waiting", first[0].pid, 1)]


def test_the_waiting_node_joins_when_the_group_re_rendezvous(cluster):
    first = cluster.start(2, 2, 3, **FAST)
    joined(cluster, 2)
    cluster.start(1, 2, 3, **FAST)
    cluster.probe.wait_for(lambda s: len(s.wait_list) == 1, 20)
    for proc in first:
        cluster.tell(proc, "again")
    reports = joined(cluster, 3)
    assert sorted(r[2] for r in reports) == [0, 1, 2] and {r[3] for r in reports} == {3}


def test_set_closed_stops_the_others_with_the_closed_error(cluster):
    first = cluster.start(2, 2, 2, **FAST)
    joined(cluster, 2)
    cluster.tell(first[0], "close")
    assert cluster.collect(1) == [("closed", first[0].pid)]
    cluster.tell(first[1], "again")
    cluster.start(1, 1, 2, **FAST)
    reports = cluster.collect(2)
    assert [r[:3:2] for r in reports] == [("error", "RendezvousClosedError")] * 2
    assert all("closed" in r[3] for r in reports)
    assert cluster.probe.state().closed


def test_a_lone_node_times_out_with_the_timeout_error_within_join_and_rollback(cluster):
    cluster.start(1, 2, 2, join=1.0, **FAST)
    [report] = cluster.collect(1)
    assert report[0] == "error" and report[2] == "RendezvousTimeoutError", report
    assert 1.0 <= report[4] < 1.0 + ROLLBACK_PERIOD
    assert cluster.probe.state().participants == {}  # it took itself out in the rollback


def test_a_killed_participant_disappears_from_the_state_within_its_detection_bound(cluster):
    # At default settings on a TCPStore: 3 s (its connection closes); on etcd: the
    # lease TTL + 1 s.
    procs = cluster.start(3, 3, 3)
    joined(cluster, 3)
    victim = procs[1]
    killed = time.monotonic()
    os.kill(victim.pid, signal.SIGKILL)
    state = cluster.probe.wait_for(lambda s: victim.pid not in pids_in(s), 10)
    assert time.monotonic() - killed < cluster.lost_within
    assert {n.pid for n in state.participants} == {procs[0].pid, procs[2].pid}


def test_a_participant_that_stops_heart_beating_but_stays_connected_is_dropped_after_the_window(
        cluster):
    procs = cluster.start(2, 2, 2, keep_alive_interval=0.3, keep_alive_max_attempt=2)
    joined(cluster, 2)
    hung = procs[0]
    cluster.tell(hung, "hang")
    assert cluster.collect(1) == [("hung", hung.pid)]
    stopped = time.monotonic()
    cluster.probe.wait_for(lambda s: hung.pid not in pids_in(s), 10)
    elapsed = time.monotonic() - stopped
    assert 0.3 <= elapsed < 5.0, elapsed  # the keep-alive window (0.6 s), not the connection
    assert hung.is_alive()


def test_the_survivors_of_a_killed_participant_run_the_next_round(cluster):
    procs = cluster.start(3, 2, 3, **FAST)
    joined(cluster, 3)
    os.kill(procs[2].pid, signal.SIGKILL)
    for survivor in procs[:2]:
        cluster.tell(survivor, "again")
    reports = joined(cluster, 2)
    assert sorted(r[2] for r in reports) == [0, 1] and {r[3] for r in reports} == {2}
    assert {r[1] for r in reports} == {procs[0].pid, procs[1].pid}


def test_a_waiting_nodes_keep_alives_set_its_liveness_key_and_never_write_the_state(cluster):
    # Keep-alives that wrote the shared state would compete with every join for its
    # compare-and-set; through the node's own key they cannot lose a race.
    [node] = cluster.start(1, 2, 2, **FAST)
    state = cluster.probe.wait_for(lambda s: len(s.participants) == 1, 20)
    [desc] = state.participants
    beats = threading.Semaphore(0)
    cluster.store.watch_key(f"elastic/rdzv/{cluster.run_id}/alive/{desc}",
                            lambda _old, new: new is not None and beats.release())
    for _ in range(3):  # 0.5 s apart
        assert beats.acquire(timeout=10)
    assert cluster.probe.state().version == state.version
    assert node.is_alive()
    cluster.kill()  # its join would wait out the timeout for a second node


def test_a_participant_that_was_frozen_past_its_session_does_not_drop_the_others(cluster):
    # Its session ended while it was frozen, and with it the watches that tell it of
    # the others' keep-alives: when it runs again, it must not take them for dead.
    if cluster.spec[0] != "tcp":
        pytest.skip("an etcd client's watches outlive its lease: nothing ends them here")
    procs = cluster.start(3, 3, 3, keep_alive_interval=0.5)
    joined(cluster, 3)
    frozen, others = procs[0], {p.pid for p in procs[1:]}
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        cluster.probe.wait_for(lambda s: frozen.pid not in pids_in(s), 30)
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    with pytest.raises(AssertionError, match="never matched"):  # for four windows
        cluster.probe.wait_for(lambda s: not others <= pids_in(s), 4 * 1.5)


def test_a_frozen_participant_is_dropped_when_its_transport_heartbeats_stop(cluster):
    procs = cluster.start(2, 2, 2)  # default keep-alive window: 15 s
    joined(cluster, 2)
    frozen = procs[0]
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        cluster.probe.wait_for(lambda s: frozen.pid not in pids_in(s), 12)
        within(stopped, limits.HEARTBEATS_MISSED, "heartbeats missed")  # not 15 s
    finally:
        os.kill(frozen.pid, signal.SIGCONT)


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.etcd_lease_ttl(EPHEMERAL_TTL)
def test_64_nodes_form_one_round_with_ranks_zero_to_63(cluster):
    cluster.start(64, 64, 64, context=preloaded.ctx)
    reports = joined(cluster, 64, timeout=150)
    assert sorted(r[2] for r in reports) == list(range(64))
    assert {r[3] for r in reports} == {64}
    cluster.kill()  # 64 nodes leaving one by one would take longer than the round did
