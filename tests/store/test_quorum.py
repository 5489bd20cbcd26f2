"""The store quorum: the release rule on plain data, then over a TCPStore server with
threads and a process that dies while it waits."""
import multiprocessing as mp
import threading

import pytest

from store import PrefixStore, TCPStore
from store.errors import StoreTimeoutError
from store.quorum import QuorumRound
from store.quorum_rounds import QuorumRounds
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(60)
ctx = mp.get_context("spawn")


def test_a_round_with_a_count_is_complete_when_that_many_arrived():
    r = QuorumRound("q")
    r.arrive("a", b"1", count=2)
    assert not r.complete()
    r.arrive("b", b"2", count=2)
    assert r.complete() and r.result() == {"a": b"1", "b": b"2"}


def test_a_round_waits_for_the_intersection_of_what_the_arrivals_expect():
    r = QuorumRound("q")
    r.arrive("a", b"", expect=["a", "b", "c"])  # a has not seen c die
    r.arrive("b", b"", expect=["a", "b"])  # b has
    assert r.complete() and r.missing() == []
    r2 = QuorumRound("q2")
    r2.arrive("a", b"", expect=["a", "b", "c"])
    assert not r2.complete() and r2.missing() == ["b", "c"]


def test_an_arrival_without_expectations_never_releases_a_round_alone():
    r = QuorumRound("q")
    r.arrive("joiner", b"")
    assert not r.complete() and not r.enough()
    r.arrive("a", b"", expect=["a"], min_size=1)
    assert r.complete() and set(r.result()) == {"a", "joiner"}


def test_a_deadline_releases_the_round_only_with_min_size_members():
    r = QuorumRound("q")
    r.arrive("a", b"", expect=["a", "b"], min_size=2)
    assert not r.enough()
    r.arrive("c", b"")
    assert r.enough() and not r.complete()


def test_withdrawing_a_member_removes_its_arrival_and_its_expectation():
    r = QuorumRound("q")
    r.arrive("a", b"", expect=["a", "b"])
    r.arrive("b", b"", expect=["b"])
    r.withdraw("b")
    assert r.missing() == ["b"] and not r.complete()


def test_a_departed_member_is_waited_for_by_nobody_until_it_arrives_again():
    r = QuorumRound("q")
    r.arrive("a", b"", expect=["a", "b", "c"])
    r.arrive("c", b"", expect=["a", "b", "c"])
    r.depart("c")  # its process died: it cannot arrive
    assert r.missing() == ["b"] and "c" not in r.arrivals
    r.arrive("b", b"", expect=["a", "b", "c"])
    assert r.complete() and set(r.result()) == {"a", "b"}
    r.arrive("c", b"", expect=["a", "b", "c"])  # back (restarted): waited for again
    r.withdraw("b")
    assert r.missing() == ["b"] and not r.complete()


def test_a_departed_member_does_not_count_toward_a_count():
    r = QuorumRound("q")
    r.arrive("a", b"", count=2)
    r.arrive("b", b"", count=2, expect=["a", "b"])
    r.depart("b")
    assert not r.complete() and list(r.arrivals) == ["a"]


def test_members_that_disagree_on_the_count_are_refused():
    r = QuorumRound("q")
    r.arrive("a", b"", count=2)
    with pytest.raises(ValueError, match="count=3"):
        r.arrive("b", b"", count=3)


def _arrive_all(tcp_master, members, **kwargs):
    results, errors = {}, {}

    def run(member):
        client = TCPStore("127.0.0.1", tcp_master.port, timeout=20)
        try:
            results[member] = client.quorum("round", member, member.encode(), **kwargs)
        except Exception as exc:  # noqa: BLE001 - inspected by the test
            errors[member] = exc
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(m,)) for m in members]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(t.is_alive() for t in threads)
    return results, errors


def test_every_member_gets_the_same_result_from_one_request_each(tcp_master, monkeypatch):
    requests = []
    original = TCPStore._call

    def counting(self, kind, payload, *args):
        requests.append(kind.name)
        return original(self, kind, payload, *args)

    monkeypatch.setattr(TCPStore, "_call", counting)
    results, errors = _arrive_all(tcp_master, ["0", "1", "2", "3"], count=4, timeout=10)
    assert not errors
    expected = {m: m.encode() for m in "0123"}
    assert all(result == expected for result in results.values())
    assert requests.count("STORE_QUORUM") == 4 and len(requests) == 4


def test_a_member_that_never_arrives_times_the_others_out_naming_it(tcp_master):
    results, errors = _arrive_all(tcp_master, ["a", "b"], expect=["a", "b", "c"], timeout=0.5)
    assert not results and set(errors) == {"a", "b"}
    assert all(isinstance(e, StoreTimeoutError) and "'c'" in str(e) for e in errors.values())


def test_a_deadline_releases_the_members_there_when_min_size_is_reached(tcp_master):
    results, errors = _arrive_all(tcp_master, ["a", "b"], expect=["a", "b", "c"], min_size=2,
                                  timeout=0.5)
    assert not errors and results["a"] == results["b"] == {"a": b"a", "b": b"b"}


def test_a_member_arriving_after_the_release_gets_the_result_without_it(tcp_master):
    tcp_master.quorum("r", "a", count=1, timeout=5)
    assert tcp_master.quorum("r", "late", count=1, timeout=5) == {"a": b""}


def test_a_prefix_store_puts_rounds_in_its_namespace(tcp_master):
    assert PrefixStore("job", tcp_master).quorum("r", "a", count=1, timeout=5) == {"a": b""}
    assert tcp_master.quorum("job/r", "b", count=1, timeout=5) == {"a": b""}


def _arrive_and_block(port, ready):
    client = TCPStore("127.0.0.1", port, timeout=20)
    ready.put("arriving")
    client.quorum("round", "dies", count=2, timeout=30)


@pytest.mark.slow
def test_a_member_that_dies_while_it_waits_is_withdrawn_from_the_round(tcp_master):
    ready = ctx.Queue()
    proc = ctx.Process(target=_arrive_and_block, args=(tcp_master.port, ready), daemon=True)
    proc.start()
    try:
        assert ready.get(timeout=30) == "arriving"
        assert wait_until(lambda: _parked(tcp_master), timeout=20)
        proc.kill()
        proc.join(10)
        assert wait_until(lambda: not _parked(tcp_master), timeout=10)
        results, errors = _arrive_all(tcp_master, ["b"], count=2, timeout=1.0)
        assert not results and "1 of 2 members" in str(errors["b"])
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)


def _parked(tcp_master):
    return tcp_master._server.service.quorums.waiting_in("round") == ["dies"]


def _arrive_expecting_all_and_block(port, ready):
    client = TCPStore("127.0.0.1", port, timeout=20)
    ready.put("arriving")
    client.quorum("round", "dies", b"", expect=["a", "b", "dies"], timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("waiting", [["a"], []], ids=["one-waits-before", "none-waits-before"])
def test_members_that_expect_a_member_that_died_are_released_at_once_without_it(tcp_master,
                                                                              waiting):
    ready = ctx.Queue()
    proc = ctx.Process(target=_arrive_expecting_all_and_block, args=(tcp_master.port, ready),
                       daemon=True)
    proc.start()
    outcome = {}

    def arrive(members):
        results, errors = _arrive_all(tcp_master, members, expect=["a", "b", "dies"],
                                      timeout=30)  # a deadline far beyond the test's waits
        outcome.update(results)
        outcome.update(errors)

    early = threading.Thread(target=arrive, args=(waiting,))
    try:
        assert ready.get(timeout=30) == "arriving"
        quorums = tcp_master._server.service.quorums
        early.start()
        assert wait_until(lambda: quorums.waiting_in("round") == sorted(waiting + ["dies"]), 20)
        proc.kill()
        assert wait_until(lambda: quorums.waiting_in("round") == waiting, 20)
        arrive([m for m in ("a", "b") if m not in waiting])
        early.join(20)
        assert not early.is_alive()
        assert outcome == {"a": {"a": b"a", "b": b"b"}, "b": {"a": b"a", "b": b"b"}}
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)
        if early.is_alive():
            early.join(30)


def test_a_member_that_learns_of_a_loss_while_it_waits_arrives_again_without_it(tcp_master):
    learnt = threading.Event()
    results = {}

    def arrive(member, **kwargs):
        client = TCPStore("127.0.0.1", tcp_master.port, timeout=20)
        try:  # a deadline far beyond the test's waits: only the release may end it
            results[member] = client.quorum("round", member, member.encode(),
                                            expect=["a", "b", "c"], timeout=30, **kwargs)
            # the replaced arrival's answer is dropped: the connection serves on
            results[member, "after"] = client.quorum(f"next-{member}", member, count=1,
                                                     timeout=5)
            assert client._channel.calls_waiting() == []
        finally:
            client.close()

    quorums = tcp_master._server.service.quorums
    first = threading.Thread(target=arrive, args=("a",), kwargs={
        "expect_now": lambda: ["a", "b"] if learnt.is_set() else ["a", "b", "c"]})
    second = threading.Thread(target=arrive, args=("b",))  # it never learns
    first.start()
    second.start()
    try:
        assert wait_until(lambda: quorums.waiting_in("round") == ["a", "b"], 20)
        learnt.set()  # "c" is lost: a stops waiting for it, which releases the round
        first.join(20)
        second.join(20)
        assert not first.is_alive() and not second.is_alive()
        released = {"a": b"a", "b": b"b"}
        assert results == {"a": released, "b": released, ("a", "after"): {"a": b""},
                           ("b", "after"): {"b": b""}}
    finally:
        learnt.set()
        first.join(40)
        second.join(40)


class _Timers:
    """The server actor's `call_later`, kept by the test: no deadline fires by itself."""

    def __init__(self):
        self.due = []

    def __call__(self, delay, fn, *args):
        timer = threading.Timer(3600, fn, args)  # never started
        self.due.append(timer)
        return timer


def test_a_round_left_with_only_departed_members_is_dropped_and_remembers_only_them():
    rounds = QuorumRounds(_Timers())
    first = rounds.arrive("r", "dies", b"", b"s1", count=None, expect=["a", "dies"],
                          min_size=2, timeout=30)
    rounds.sender_lost(b"s1")
    assert rounds.waiting_in("r") == [] and not first.done()
    assert "r" not in rounds._open  # nothing scanned for it any more
    # a fresh round: the dead arrival's min_size is gone, its departure is not
    released = rounds.arrive("r", "a", b"x", b"s2", count=None, expect=["a", "dies"],
                             min_size=1, timeout=30)
    assert released.done() and released.wait(0).value == {"a": b"x"}
