"""`WakePipe`: how one thread wakes another that sleeps in a poll."""
from __future__ import annotations

import os
import threading


class WakePipe:
    """A pipe that one thread sleeps on (in a poll) and any thread writes to, to wake it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.fd, self._write_fd = os.pipe()
        os.set_blocking(self.fd, False)
        os.set_blocking(self._write_fd, False)

    def wake(self) -> None:
        # Under the lock that guards closing: a closed descriptor's number may be
        # reused by another file at once, and must never be written to.
        with self._lock:
            if self._write_fd is None:
                return
            try:
                os.write(self._write_fd, b"\0")
            except BlockingIOError:
                pass  # the pipe is full, so a wake-up is already pending

    def drain(self) -> None:
        try:
            while os.read(self.fd, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        with self._lock:
            if self._write_fd is not None:
                os.close(self.fd)
                os.close(self._write_fd)
                self._write_fd = None
