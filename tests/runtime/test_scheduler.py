"""The scheduler: dependency counting (pure) and the bounded worker pool."""
import threading

import numpy as np
import pytest

from actors.runtime import ActorStoppedError, CountedTask, WorkerPool

pytestmark = pytest.mark.timeout(30)


def test_a_task_becomes_runnable_exactly_when_its_last_input_arrives():
    task = CountedTask(3, run=lambda inputs: None)
    assert task.deliver("a", 1) is False
    assert task.deliver("b", 2) is False
    assert task.pending == 1
    assert task.deliver("c", 3) is True
    assert task.inputs == {"a": 1, "b": 2, "c": 3}


def test_inputs_for_the_same_slot_are_accumulated():
    task = CountedTask(3, run=lambda inputs: None)
    task.deliver(0, np.ones(2))
    task.deliver(0, np.ones(2))
    assert task.deliver(1, 5) is True
    np.testing.assert_array_equal(task.inputs[0], [2.0, 2.0])


def test_accumulation_rule_can_be_chosen():
    task = CountedTask(2, run=lambda inputs: None, accumulate=lambda old, new: old + [new])
    task.deliver("s", [1])
    task.deliver("s", 2)
    assert task.inputs == {"s": [1, 2]}


def test_a_delivery_after_the_task_ran_is_an_error():
    task = CountedTask(1, run=lambda inputs: None)
    task.deliver("x", 1)
    with pytest.raises(ValueError, match="already ran"):
        task.deliver("x", 1)


def test_a_task_needs_at_least_one_input():
    with pytest.raises(ValueError):
        CountedTask(0, run=lambda inputs: None)


def test_concurrent_deliveries_make_the_task_runnable_exactly_once():
    task = CountedTask(800, run=lambda inputs: None)
    ready = []
    barrier = threading.Barrier(8)

    def deliver_many(worker: int) -> None:
        barrier.wait()
        for i in range(100):
            if task.deliver(i % 4, 1):
                ready.append(worker)

    threads = [threading.Thread(target=deliver_many, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(ready) == 1
    assert sum(task.inputs.values()) == 800


def test_the_pool_runs_a_counted_task_when_it_becomes_runnable():
    pool = WorkerPool(2, "test")
    done = threading.Event()
    result = {}

    def run(inputs):
        result.update(inputs)
        done.set()

    task = CountedTask(2, run)
    pool.deliver(task, "x", 1)
    assert not done.is_set()
    pool.deliver(task, "y", 2)
    assert done.wait(5)
    assert result == {"x": 1, "y": 2}
    pool.stop()


def test_the_pool_never_runs_more_than_its_threads_at_once():
    pool = WorkerPool(2, "test")
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
    pool = WorkerPool(1, "test")
    done = threading.Event()
    pool.submit(lambda: 1 / 0)
    pool.submit(done.set)
    assert done.wait(5)
    pool.stop()


def test_stop_joins_every_thread_and_refuses_more_work():
    before = threading.active_count()
    pool = WorkerPool(3, "test")
    pool.stop()
    assert threading.active_count() == before
    with pytest.raises(ActorStoppedError):
        pool.submit(print)


def test_the_pool_keeps_no_reference_to_a_finished_task():
    import gc
    import weakref

    class Payload:
        pass

    pool = WorkerPool(1, "test")
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
