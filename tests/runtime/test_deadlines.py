"""Request deadlines: the heap alone, and every future of many threads finished in time."""
from __future__ import annotations

import random
import threading
import time

import pytest

from actors.runtime import RequestTimeoutError
from actors.runtime.concurrency.deadlines import Deadlines
from tests.runtime.peers import SLOW
from tests.waiting import run_in_threads


def test_due_returns_the_pending_requests_whose_deadline_passed_in_deadline_order():
    deadlines, pending = Deadlines(), {1, 2, 3}
    assert deadlines.push(3.0, 1, pending)
    assert deadlines.push(1.0, 2, pending)      # earlier: the timer must move up
    assert not deadlines.push(2.0, 3, pending)  # later than the earliest
    assert deadlines.earliest() == 1.0
    assert deadlines.due(2.5, pending.__contains__) == [2, 3]
    assert deadlines.due(2.9, pending.__contains__) == []
    assert deadlines.earliest() == 3.0


def test_answered_requests_are_skipped_when_their_deadline_comes():
    deadlines, pending = Deadlines(), {1, 2}
    deadlines.push(1.0, 1, pending)
    deadlines.push(1.0, 2, pending)
    pending.discard(1)
    assert deadlines.due(5.0, pending.__contains__) == [2]
    assert deadlines.earliest() is None


def test_a_heap_of_mostly_answered_requests_is_rebuilt_from_the_pending_ones():
    deadlines, pending = Deadlines(), set()
    for req_id in range(10_000):
        pending.add(req_id)
        deadlines.push(100.0 + req_id, req_id, pending)
        pending.discard(req_id)  # answered at once
    assert len(deadlines) < 200


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("peer_process", ["workers-read"], indirect=True)
def test_requests_with_timeouts_from_16_threads_for_30_s_all_finish_within_timeout_plus_1_s(
        peer_process, client):
    address, _ = peer_process
    late, outcomes, errors = [], {"answered": 0, "timed out": 0}, []
    lock = threading.Lock()
    stop_at = time.monotonic() + 30

    def caller(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while time.monotonic() < stop_at:
                timeout, delay = rng.uniform(0.05, 0.5), rng.uniform(0.0, 0.1)
                started = time.monotonic()
                future = client.request(address, SLOW, delay, timeout)
                try:
                    future.wait(timeout + 5)
                    outcome = "answered"
                except RequestTimeoutError:
                    outcome = "timed out"
                took = time.monotonic() - started
                with lock:
                    outcomes[outcome] += 1
                    if took > timeout + 1:
                        late.append((timeout, took))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    assert run_in_threads(caller, 16, 60) and not errors
    assert not late, f"{len(late)} requests finished late, e.g. {late[:3]}"
    assert outcomes["answered"] > 20 and outcomes["timed out"] > 20, outcomes


def test_a_channel_call_with_a_timeout_under_a_receive_slice_goes_back_to_slices_after():
    """Its first receive waits only as long as the timeout (5 ms timed out after 6.7 ms as
    the median of 10 calls, against 50.8 ms when it waited a whole slice); afterwards the
    connection receives in slices again, to keep watching for a lost peer."""
    import zmq

    from actors.runtime import Actor, Kind
    from actors.runtime.io import channel as channels

    release = threading.Event()
    server = Actor(name="slow").start()
    server.register(0xF001, lambda msg: release.wait(10))
    call = channels.Channel(server.address, connect_timeout=10)
    try:
        call.call(Kind.PING, None, 10)
        with pytest.raises(RequestTimeoutError, match="within 0.005s"):
            call.call(0xF001, None, 0.005)
        socket = call._local.conn.socket  # this thread's connection
        assert socket.getsockopt(zmq.RCVTIMEO) == channels._SLICE_MS
    finally:
        release.set()
        call.close()
        server.stop(5)
