"""What this test process holds (threads, open descriptors), to show that an owner
took everything it opened with it."""
from __future__ import annotations

import os
import threading


def resources() -> set:
    """This process's threads, and its open descriptors with what each points to.

    Compare as sets (``resources() - before``): a descriptor that something else
    closed meanwhile is no leak, and one whose number was reused points elsewhere."""
    return {("thread", t.ident) for t in threading.enumerate()} | \
        {("fd", fd, target) for fd, target in _descriptors()}


def open_fds() -> int:
    """How many descriptors this process has open."""
    return len(os.listdir("/proc/self/fd"))


def os_threads() -> int:
    """How many OS threads this process runs (Python's and libzmq's)."""
    return len(os.listdir("/proc/self/task"))


def _descriptors():
    for fd in os.listdir("/proc/self/fd"):
        try:
            yield fd, os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor the listing itself used, closed by now
            continue
