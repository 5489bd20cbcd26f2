"""TCPStore after close: blocked calls and later ones fail with StoreError, nothing aborts."""
import os
import signal
import threading

import pytest

from store import StoreError, StoreTimeoutError, TCPStore
from tests.leftovers import open_fds, resources
from tests.net import free_port
from tests.store import tcp_workers
from tests.store.processes import collect, ctx, spawned
from tests.waiting import raised_by, wait_until

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("who", ["master", "client"])
def test_closing_under_a_blocked_get_fails_it_as_closed_and_the_process_lives_on(who):
    # libzmq aborts the whole process when a socket is closed under a thread using it:
    # a spawned process shows that as an exit code instead of taking pytest with it.
    results = ctx.Queue()
    with spawned(tcp_workers.close_under_blocked_get, [(who, results)]) as procs:
        parked, still_blocked, error_type, message = collect(results, 1)[0]
        procs[0].join(20)
    assert procs[0].exitcode == 0
    assert parked and not still_blocked
    assert error_type == "StoreError" and "is closed" in message


@pytest.fixture
def master():
    with TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10) as store:
        yield store


def test_every_use_after_close_is_a_store_error_saying_so(master):
    client = TCPStore("127.0.0.1", master.port, timeout=10)
    client.set("k", "v")
    client.close()
    client.close()  # twice is harmless
    for call in (lambda: client.get("k"), lambda: client.set("k", "w"),
                 lambda: client.set_ephemeral("e", "v"),
                 lambda: client.watch_key("k", lambda old, new: None)):
        with pytest.raises(StoreError, match="is closed"):
            call()
    on_new_thread = []
    thread = threading.Thread(target=lambda: on_new_thread.append(raised_by(client.get, "k")))
    thread.start()
    thread.join(10)
    assert isinstance(on_new_thread[0], StoreError) and "is closed" in str(on_new_thread[0])


def test_a_closed_master_fails_its_own_calls_as_closed():
    master = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
    master.close()
    with pytest.raises(StoreError, match="is closed"):
        master.get("k")


def test_closing_under_a_blocked_call_leaves_no_thread_or_descriptor_behind(master):
    before = resources()
    client = TCPStore("127.0.0.1", master.port, timeout=10)
    raised = []
    blocked = threading.Thread(target=lambda: raised.append(raised_by(client.get, "never")))
    blocked.start()
    assert wait_until(lambda: "never" in master._server.service._waiting)
    client.close()
    blocked.join(10)
    assert isinstance(raised[0], StoreError) and "is closed" in str(raised[0])
    assert wait_until(lambda: not resources() - before), resources() - before


def test_a_clone_is_not_another_worker_joining():
    # world_size 3: the master and one worker that clones its store are 2 of 3 (torch
    # counts the same), so the master still waits and times out saying so.
    port = free_port()
    outcome = []

    def master() -> None:
        outcome.append(raised_by(TCPStore, "127.0.0.1", port, 3, True, 3.0))

    started = threading.Thread(target=master)
    started.start()
    worker = TCPStore("127.0.0.1", port, world_size=3, timeout=10)
    clone = worker.clone()
    started.join(20)
    try:
        assert isinstance(outcome[0], StoreError) and "2 of 3 workers joined" in str(outcome[0])
        assert clone.world_size == 3
    finally:
        clone.close()
        worker.close()


def test_the_connections_of_ended_threads_are_released(master):
    client = TCPStore("127.0.0.1", master.port, timeout=10)
    try:
        client.set("k", "v")
        before = open_fds()
        for _ in range(40):
            thread = threading.Thread(target=client.get, args=("k",))
            thread.start()
            thread.join(10)
        # The last thread's connection waits for the next thread to connect; libzmq's
        # reaper closes the others' descriptors in the background.
        assert wait_until(lambda: open_fds() - before <= 8, 10), open_fds() - before
    finally:
        client.close()


def test_a_churning_thread_pool_does_not_run_out_of_descriptors(master):
    # ~5 descriptors per connection: 200 kept connections would need 1000.
    results = ctx.Queue()
    with spawned(tcp_workers.churn_threads, [(master.port, 200, 256, results)]):
        assert collect(results, 1, timeout=50) == [None]


def test_the_server_forgets_the_keys_of_timed_out_waits(master):
    service = master._server.service
    for i in range(200):
        with pytest.raises(StoreTimeoutError):
            master.wait([f"step/{i}"], timeout=0)
        with pytest.raises(StoreTimeoutError):
            master.queue_pop(f"jobs/{i}", True, 0)
    # Expiry looks a waiter up by its key: nothing else grows with the keys ever waited on.
    assert service._waiting == {} and service._poppers == {}


def test_an_item_pushed_after_its_popper_was_killed_stays_in_the_queue(master):
    service = master._server.service
    events = ctx.Queue()
    with spawned(tcp_workers.pop_until_killed, [(master.port, events)]) as procs:
        assert collect(events, 1) == ["popping"]
        assert wait_until(lambda: "jobs" in service._poppers)
        procs[0].kill()
        assert wait_until(lambda: "jobs" not in service._poppers)  # its connection closed
    master.queue_push("jobs", b"job-1")
    assert master.queue_len("jobs") == 1
    assert master.queue_pop("jobs", False) == b"job-1"


def test_an_interrupted_pop_takes_no_later_item(master):
    service = master._server.service
    events, go = ctx.Queue(), ctx.Queue()
    with spawned(tcp_workers.pop_interrupted, [(master.port, events, go)]) as procs:
        assert collect(events, 1) == ["popping"]
        assert wait_until(lambda: "jobs" in service._poppers)
        os.kill(procs[0].pid, signal.SIGUSR1)
        assert collect(events, 1) == ["interrupted"]
        assert "jobs" not in service._poppers  # withdrawn before the exception went on
        master.queue_push("jobs", b"job-1")
        assert master.queue_len("jobs") == 1
        go.put("pop")
        assert collect(events, 1) == [b"job-1"]
