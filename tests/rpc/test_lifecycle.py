"""Joining, leaving and losing workers."""
import threading
import time

import pytest

import actors
from actors.rpc import RpcInitError, RpcNotInitializedError, WorkerLostError
from actors.rpc.state import current_agent
from tests import limits
from tests.limits import within
from tests.waiting import wait_until
from tests.net import free_port
from tests.rpc import workers
from tests.rpc.conftest import ctx, reap, rpc_world

pytestmark = pytest.mark.timeout(120)


def test_a_dead_worker_fails_pending_calls_promptly_with_a_runtime_error_as_in_torch():
    with rpc_world(3) as procs:
        pending = actors.rpc_async("worker2", workers.hang, timeout=60)
        assert actors.rpc_sync("worker2", workers.add, args=(1, 1)) == 2  # it is serving
        procs[1].kill()
        started = time.monotonic()
        with pytest.raises(WorkerLostError, match="worker2") as info:
            pending.wait(10)
        within(started, limits.CONNECTION_CLOSED, "connection closed")
        assert isinstance(info.value, ConnectionError)
        assert isinstance(info.value, RuntimeError)  # what torch scripts catch
        started = time.monotonic()
        with pytest.raises(WorkerLostError, match="worker2"):
            actors.rpc_sync("worker2", workers.add, args=(1, 1))
        within(started, limits.AT_ONCE, "at once")
        assert actors.rpc_sync("worker1", workers.add, args=(2, 2)) == 4


def test_a_worker_lost_further_down_a_chain_is_named_and_the_one_between_serves_on():
    with rpc_world(4):
        with pytest.raises(WorkerLostError, match="worker 'worker2'") as info:
            actors.rpc_sync("worker1", workers.call_dying, args=("worker2",), timeout=60)
        assert info.value.worker == "worker2" and info.value.remote_traceback
        with pytest.raises(WorkerLostError, match="worker 'worker3'"):
            actors.rpc_async("worker1", workers.call_dying, args=("worker3",), timeout=60).wait(60)
        assert actors.rpc_sync("worker1", workers.add, args=(2, 2)) == 4
        assert actors.rpc_async("worker1", workers.add, args=(2, 3)).wait(60) == 5


def test_a_call_to_a_worker_killed_before_this_worker_ever_reached_it_fails_promptly():
    with rpc_world(3) as procs:
        procs[1].kill()
        procs[1].join(10)
        started = time.monotonic()
        with pytest.raises(WorkerLostError, match="worker2"):
            actors.rpc_async("worker2", workers.add, args=(1, 1), timeout=60).wait(10)
        within(started, limits.NOTHING_LISTENS, "nothing listens")
        assert actors.rpc_sync("worker1", workers.add, args=(2, 2)) == 4


def test_a_graceful_shutdown_leaves_without_a_worker_that_was_lost(capfd):
    port = free_port()
    procs = [ctx.Process(target=workers.serve, args=(rank, 3, port, 4, False), daemon=True)
             for rank in (1, 2)]
    for proc in procs:
        proc.start()
    try:
        actors.init_rpc("worker0", 0, 3, init_method=f"tcp://127.0.0.1:{port}", timeout=30)
        assert actors.rpc_sync("worker2", workers.add, args=(1, 1)) == 2
        with pytest.raises(WorkerLostError):
            actors.rpc_sync("worker1", workers.die_now)
        started = time.monotonic()
        actors.shutdown(graceful=True, timeout=60)  # worker2 never talked to worker1
        within(started, limits.LEFT_BEHIND, "shutdown without a lost worker")
        procs[1].join(30)
        assert procs[1].exitcode == 0  # its own graceful shutdown returned too
        assert "rpc_shutdown_without_lost_workers" in capfd.readouterr().err
    finally:
        reap(procs, 30)


def test_a_caller_whose_calling_threads_end_is_not_taken_for_lost_and_a_dead_one_is():
    """Each thread that calls has a connection of its own, closed once the thread has
    ended; before, the callee took such a close for its caller's loss (after some
    hundred threads of one call each), and went on without it: calls failed with
    WorkerLostError and its shutdown left without the caller."""
    with rpc_world(3) as procs:
        for i in range(300):
            thread = threading.Thread(
                target=actors.rpc_sync, args=("worker1", workers.add, (i, 1)))
            thread.start()
            thread.join(30)
        assert actors.rpc_sync("worker1", workers.lost_workers) == []
        assert actors.rpc_sync("worker1", workers.add, args=(2, 2)) == 4
        # worker2 only ever called worker1: its death is still noticed there.
        assert actors.rpc_sync("worker2", workers.nested_add, args=("worker1", 1, 2)) == 30
        procs[1].kill()
        started = time.monotonic()
        assert wait_until(lambda: actors.rpc_sync("worker1", workers.lost_workers)
                          == ["worker2"], timeout=30)
        within(started, limits.CONNECTION_CLOSED, "connection closed")


def test_calls_count_as_in_flight_until_their_futures_hold_the_reply_from_any_thread():
    """What a graceful shutdown waits for: the count of calls in flight, which a reply
    settles on the I/O thread while other threads are still sending."""
    with rpc_world(2):
        agent, errors = current_agent(), []

        def call_in_windows():
            try:
                for _ in range(40):
                    futures = [actors.rpc_async("worker1", workers.add, args=(1, i))
                               for i in range(8)]
                    assert [future.wait(30) for future in futures] == list(range(1, 9))
            except Exception as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        threads = [threading.Thread(target=call_in_windows) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors and not any(thread.is_alive() for thread in threads)
        assert agent.wait_idle(0)
        slow = actors.rpc_async("worker1", workers.sleep_then, args=(0.3, "finished"))
        assert not agent.wait_idle(0)
        assert slow.wait(10) == "finished" and agent.wait_idle(0)


@pytest.mark.slow
def test_graceful_shutdown_finishes_outstanding_work_first(capfd):
    with rpc_world(2):
        slow = actors.rpc_async("worker1", workers.sleep_then, args=(0.5, "finished"))
    assert slow.done() and slow.wait(0) == "finished"
    # the workers that left after the last barrier were not lost
    assert "rpc_shutdown_without_lost_workers" not in capfd.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("timeout", [0, float("inf")])
def test_a_shutdown_timeout_of_0_or_infinity_means_no_limit_as_in_torch(timeout):
    """torch's shutdown timeout defaults to 0, no limit; before, 0 left without waiting
    for the calls in flight, which failed, and infinity raised OverflowError."""
    port = free_port()
    proc = ctx.Process(target=workers.serve, args=(1, 2, port, 4, False), daemon=True)
    proc.start()
    try:
        actors.init_rpc("worker0", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=30)
        slow = actors.rpc_async("worker1", workers.sleep_then, args=(0.5, "finished"))
        actors.shutdown(timeout=timeout)
        assert slow.done() and slow.wait(0) == "finished"
        proc.join(30)
        assert proc.exitcode == 0
    finally:
        reap([proc], 30)


@pytest.mark.slow
def test_calls_after_shutdown_raise_a_clear_error_and_init_works_again():
    with rpc_world(2):
        assert actors.rpc_sync("worker1", workers.add, args=(1, 2)) == 3
    with pytest.raises(RpcNotInitializedError, match="init_rpc"):
        actors.rpc_sync("worker1", workers.add, args=(1, 2))
    with pytest.raises(RpcNotInitializedError):
        actors.get_worker_info()
    with rpc_world(2):
        assert actors.rpc_sync("worker1", workers.add, args=(2, 3)) == 5


def test_init_twice_without_shutdown_is_an_error():
    with rpc_world(2):
        with pytest.raises(actors.RpcError, match="already initialized"):
            actors.init_rpc("again", 0, 1)


def _try_join(name, rank, world_size, port, results):
    try:
        actors.init_rpc(name, rank, world_size, init_method=f"tcp://127.0.0.1:{port}",
                        timeout=5)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        results.put(f"{type(exc).__name__}: {exc}")
    else:
        results.put("joined")
        actors.shutdown(graceful=False)


def test_a_duplicate_name_is_an_error_that_names_it():
    port = free_port()
    results = ctx.Queue()
    other = ctx.Process(target=_try_join, args=("twin", 1, 3, port, results), daemon=True)
    other.start()
    try:
        actors.init_rpc("twin", 0, 3, init_method=f"tcp://127.0.0.1:{port}", timeout=5)
        actors.shutdown(graceful=False)
        pytest.fail("the second 'twin' should have been refused")
    except RpcInitError as exc:
        refused_here = str(exc)
    else:
        refused_here = None
    finally:
        outcome = results.get(timeout=30)
        other.join(30)
    # Whichever registered first keeps the name; the other is told who has it.
    messages = [m for m in (refused_here, outcome) if m and "duplicate" in m]
    assert messages and "duplicate worker name 'twin'" in messages[0]


@pytest.mark.slow
def test_a_world_that_does_not_assemble_in_time_names_the_missing_ranks():
    port = free_port()
    started = time.monotonic()
    with pytest.raises(RpcInitError, match=r"ranks \[1, 2\] of 3 never joined"):
        actors.init_rpc("lonely", 0, 3, init_method=f"tcp://127.0.0.1:{port}", timeout=1)
    within(started + 1, limits.AFTER_TIMEOUT, "after a timeout")
    with rpc_world(2):  # nothing was left behind
        assert actors.rpc_sync("worker1", workers.add, args=(1, 1)) == 2


def test_a_bad_rank_is_a_clear_error():
    with pytest.raises(ValueError, match="rank"):
        actors.init_rpc("w", 5, 2, init_method=f"tcp://127.0.0.1:{free_port()}")
