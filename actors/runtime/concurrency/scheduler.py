"""`WorkerPool`: the bounded pool of threads that runs an actor's handlers.

Handler work runs here, off the I/O thread, so the mailbox never waits on user code.
`close_soon` only asks the threads to end (safe in a finalizer); `stop` also waits.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable

from ..errors import ActorStoppedError
from ..process.log import get_logger
from .contained import escapes
from .threads import new_thread

log = get_logger(__name__)

_STOP = object()


class WorkerPool:
    """A fixed number of threads that run submitted callables in arrival order."""

    def __init__(self, num_threads: int, name: str = "actor"):
        if num_threads < 1:
            raise ValueError(f"num_worker_threads must be >= 1, got {num_threads}")
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._threads = [
            new_thread(self._thread_main, name=f"{name}-worker-{i}",
                       owner="actors.runtime.concurrency.scheduler.WorkerPool",
                       purpose="runs handlers and pool tasks (with workers_receive, reads "
                               "requests too)")
            for i in range(num_threads)
        ]
        self._live = 0
        self._live_lock = threading.Lock()
        self._started = False
        self._stopped = False

    def start(self) -> None:
        """Start the pool's threads; work submitted before waits in the queue until then."""
        self._started = True
        with self._live_lock:
            self._live = len(self._threads)
        for thread in self._threads:
            thread.start()

    @property
    def num_threads(self) -> int:
        """How many threads run the submitted work."""
        return len(self._threads)

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)`` for the pool's threads; queued calls start in submission order.

        ActorStoppedError once the pool is stopped.
        """
        if self._stopped:
            raise ActorStoppedError("worker pool is stopped")
        self._queue.put((fn, args))

    def close_soon(self) -> None:
        """Ask every thread to finish queued work and end; returns at once."""
        if self._stopped:
            return
        self._stopped = True
        for _ in self._threads:
            self._queue.put(_STOP)
        if not self._started:
            self._release()

    def stop(self, timeout: float = 5.0) -> None:
        """`close_soon`, then join every thread (each join bounded by `timeout`)."""
        self.close_soon()
        current = threading.current_thread()
        for thread in self._threads:
            if thread is not current and thread.ident is not None:  # started
                thread.join(timeout)
                if thread.is_alive():
                    log.warning("worker_thread_still_running", thread=thread.name)

    def _thread_main(self) -> None:
        try:
            self._work()
        finally:
            with self._live_lock:
                self._live -= 1
                last = self._live == 0
            if last:
                self._release()

    def _release(self) -> None:
        """Free what the threads shared; run by the last thread to end."""

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
        except BaseException as exc:  # noqa: BLE001 - one failing task must not kill the worker
            if escapes(exc):
                raise
            log.exception("worker_task_failed", task=getattr(fn, "__qualname__", repr(fn)))
