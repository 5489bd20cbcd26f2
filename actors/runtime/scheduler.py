"""The per-actor scheduler: a bounded worker pool, and dependency-counted tasks.

`WorkerPool` runs handler work off the I/O thread so the mailbox never waits on user
code. `CountedTask` is pure bookkeeping (no threads): a task with N pending inputs
becomes runnable when the N-th input arrives, with inputs for the same slot
accumulated; `WorkerPool.deliver` joins the two.
"""
from __future__ import annotations

import operator
import queue
import threading
from typing import Any, Callable, Dict, Hashable

from .errors import ActorStoppedError
from .log import get_logger

log = get_logger(__name__)

_STOP = object()


class CountedTask:
    """A task that runs once `pending` inputs have been delivered.

    `deliver(slot, value)` stores the value for `slot`, combining it with
    `accumulate(old, new)` when the slot already holds one (default: ``+``, as for
    gradients), and returns True exactly once: on the delivery that makes the task
    runnable. Thread-safe.
    """

    __slots__ = ("_lock", "_pending", "_inputs", "_accumulate", "run")

    def __init__(self, pending: int, run: Callable[[Dict[Hashable, Any]], Any],
                 accumulate: Callable[[Any, Any], Any] = operator.add):
        if pending < 1:
            raise ValueError(f"a counted task needs at least one pending input, got {pending}")
        self._lock = threading.Lock()
        self._pending = pending
        self._inputs: Dict[Hashable, Any] = {}
        self._accumulate = accumulate
        self.run = run

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def inputs(self) -> Dict[Hashable, Any]:
        return self._inputs

    def deliver(self, slot: Hashable, value: Any) -> bool:
        with self._lock:
            if self._pending == 0:
                raise ValueError(f"input for slot {slot!r} delivered to a task that already ran")
            if slot in self._inputs:
                self._inputs[slot] = self._accumulate(self._inputs[slot], value)
            else:
                self._inputs[slot] = value
            self._pending -= 1
            return self._pending == 0


class WorkerPool:
    """A fixed number of threads that run submitted callables in arrival order."""

    def __init__(self, num_threads: int, name: str = "actor", start: bool = True):
        if num_threads < 1:
            raise ValueError(f"num_worker_threads must be >= 1, got {num_threads}")
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-worker-{i}", daemon=True)
            for i in range(num_threads)
        ]
        self._stopped = False
        if start:
            self.start()

    def start(self) -> None:
        """Start the threads (done by the constructor unless told otherwise)."""
        for thread in self._threads:
            thread.start()

    @property
    def num_threads(self) -> int:
        return len(self._threads)

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._stopped:
            raise ActorStoppedError("worker pool is stopped")
        self._queue.put((fn, args))

    def deliver(self, task: CountedTask, slot: Hashable, value: Any) -> None:
        """Deliver an input to `task` and run it on the pool when it becomes runnable."""
        if task.deliver(slot, value):
            self.submit(task.run, task.inputs)

    def stop(self, timeout: float = 5.0) -> None:
        """Finish queued work, then join every thread (each join bounded by `timeout`)."""
        if self._stopped:
            return
        self._stopped = True
        for _ in self._threads:
            self._queue.put(_STOP)
        self._join(timeout)

    def _join(self, timeout: float) -> None:
        current = threading.current_thread()
        for thread in self._threads:
            if thread is not current and thread.ident is not None:  # started
                thread.join(timeout)
                if thread.is_alive():
                    log.warning("worker_thread_still_running", thread=thread.name)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            self._run(*item)
            # Drop the finished task now, not when the next one arrives: its arguments
            # may hold references (RRefs) whose release others are waiting for.
            del item

    @staticmethod
    def _run(fn: Callable[..., Any], args: tuple) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - one failing task must not kill the worker
            log.exception("worker_task_failed", task=getattr(fn, "__qualname__", repr(fn)))
