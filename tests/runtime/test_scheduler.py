"""The scheduler: the bounded worker pool."""
import threading

import pytest

from actors.runtime import ActorStoppedError, WorkerPool

pytestmark = pytest.mark.timeout(30)


def started_pool(threads: int) -> WorkerPool:
    pool = WorkerPool(threads, "test")
    pool.start()
    return pool


def test_the_pool_never_runs_more_than_its_threads_at_once():
    pool = started_pool(2)
    started, release, finished = threading.Semaphore(0), threading.Event(), threading.Semaphore(0)

    def work():
        started.release()
        release.wait(5)
        finished.release()

    for _ in range(6):
        pool.submit(work)
    assert started.acquire(timeout=5) and started.acquire(timeout=5)
    assert not started.acquire(timeout=0.2)  # both threads are busy: the third task waits
    release.set()
    for _ in range(6):
        assert finished.acquire(timeout=5)
    pool.stop()


def test_a_failing_task_does_not_kill_its_worker():
    pool = started_pool(1)
    done = threading.Event()
    pool.submit(lambda: 1 / 0)
    pool.submit(done.set)
    assert done.wait(5)
    pool.stop()


def test_stop_joins_every_thread_and_refuses_more_work():
    before = threading.active_count()
    pool = started_pool(3)
    pool.stop()
    assert threading.active_count() == before
    with pytest.raises(ActorStoppedError):
        pool.submit(print)


def test_the_pool_keeps_no_reference_to_a_finished_task():
    import gc
    import weakref

    class Payload:
        pass

    pool = started_pool(1)
    done = threading.Event()
    payload = Payload()
    alive = weakref.ref(payload)
    pool.submit(lambda p: done.set(), payload)
    del payload
    assert done.wait(5)
    deadline = threading.Event()
    for _ in range(100):  # the worker drops it right after the task returns
        gc.collect()
        if alive() is None:
            break
        deadline.wait(0.01)
    assert alive() is None
    pool.stop()


def test_close_soon_returns_at_once_and_the_threads_end_after_their_queued_work():
    pool = started_pool(2)
    release, ran = threading.Event(), []
    pool.submit(release.wait, 5)
    pool.submit(ran.append, 1)
    pool.close_soon()  # returns while a task still runs
    with pytest.raises(ActorStoppedError):
        pool.submit(print)
    release.set()
    pool.stop()
    assert ran == [1]
    assert not any(t.is_alive() for t in pool._threads)
