"""`DumpWriter`: flight-recorder files written beside the thread that hit the failure.

Formatting a full recorder and writing it takes tens of milliseconds of Python. The
thread that asks for a dump is the one that must report a failure at once: a
collective's waiter raising RankLostError, an I/O thread failing a request that timed
out. So it only takes a copy of what goes in the file and hands the writing to
`submit`; one registered thread writes what was handed over, oldest first, and ends
when nothing is left. At a normal exit, after the exit's other steps (which may dump
too), what is still queued is written within a bound of its own (`at_exit`'s
`after_deliveries`), and what could not be is named in a WARNING line; a dump asked
for after that is written on the caller's thread.
"""
from __future__ import annotations

import collections
import os
import threading
import time
from typing import Callable, Deque, Tuple

from ..concurrency.threads import start_thread
from ..process import at_exit
from ..process.log import get_logger

log = get_logger(__name__)

# (path, reason, write): `write(path)` produces the file at `path`.
Dump = Tuple[str, str, Callable[[str], None]]


class DumpWriter:
    """A queue of dumps and the thread, started on demand, that writes them.

    A dump leaves the queue once written, so the queue is also what is unwritten, and
    a writer runs exactly while the queue is not empty.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: Deque[Dump] = collections.deque()
        self._exiting = False
        self._idle = threading.Event()
        self._idle.set()

    def submit(self, path: str, reason: str, write: Callable[[str], None]) -> None:
        """Have ``write(path)`` run on the writer thread; returns at once (at exit, once
        the queue's last flush began: runs it here)."""
        with self._lock:
            queued = not self._exiting
            if queued:
                self._queue.append((path, reason, write))
                self._idle.clear()
                if len(self._queue) == 1:
                    # Started holding the lock, which the writer takes first: `start`
                    # returns at once, not after the writer's first slice of the GIL.
                    start_thread(self._run, name="actorgrad-recorder-dump",
                                 owner=f"{__name__}.DumpWriter",
                                 purpose="writes flight-recorder files off the failing thread")
        if queued:
            at_exit.after_deliveries(self._flush_at_exit)
        else:
            write_now(path, reason, write)

    def flush(self, deadline: float) -> bool:
        """Wait until `deadline` (monotonic) for the queued dumps to be written; False,
        with a WARNING naming the files left unwritten, if they were not."""
        if self._idle.wait(max(0.0, deadline - time.monotonic())):
            return True
        with self._lock:
            left = [path for path, _, _ in self._queue]
        log.warning("flight_recorder_not_written", reason="the process ended first",
                    paths=left)
        return False

    def _flush_at_exit(self, deadline: float) -> None:
        with self._lock:
            self._exiting = True
        self.flush(deadline)

    def _run(self) -> None:
        while True:
            with self._lock:
                path, reason, write = self._queue[0]
            write_now(path, reason, write)
            with self._lock:
                self._queue.popleft()
                if not self._queue:
                    self._idle.set()
                    return

    def _forget_the_parent(self) -> None:
        """A forked child has no writer thread, and none of its parent's dumps."""
        self._lock = threading.Lock()
        self._queue.clear()
        self._exiting = False
        self._idle = threading.Event()
        self._idle.set()


def write_now(path: str, reason: str, write: Callable[[str], None]) -> None:
    """Run ``write(path)`` on this thread, and log whether the file was written."""
    try:
        write(path)
    except Exception as error:  # noqa: BLE001 - a dump must never end its writer
        log.warning("flight_recorder_not_written", reason=reason, error=str(error))
    else:
        log.warning("flight_recorder_written", reason=reason, path=path)


WRITER = DumpWriter()
os.register_at_fork(after_in_child=WRITER._forget_the_parent)


def keep_newest(folder: str, count: int, prefix: str = "flight-") -> None:
    """Delete all but the newest `count` files of `folder` named `prefix`*`.json`.

    Other processes prune and write the same folder: a file gone meanwhile, or one that
    cannot be deleted, is passed over.
    """
    files = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(prefix) and entry.name.endswith(".json"):
                try:
                    files.append((entry.stat().st_mtime, entry.path))
                except OSError:
                    pass
    files.sort(reverse=True)
    for _, path in files[count:]:
        try:
            os.remove(path)
        except OSError:
            pass
