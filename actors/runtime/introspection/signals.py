"""SIGUSR1: write the flight recorder and every thread's stack to a file, then go on.

`install` sets the handler only from the main thread (Python allows no other) and
only while SIGUSR1 has its default disposition, so an application's own handler is
never replaced; no other signal is touched.
"""
from __future__ import annotations

import signal
import threading
from typing import Any

from .recorder import TRAFFIC
from .stacks import thread_stacks
from .status import endpoints, identity

_installed = False


def install() -> bool:
    """Dump on SIGUSR1 from now on; False when it cannot (not the main thread, another
    handler is there, or the platform has no SIGUSR1)."""
    global _installed
    if _installed:
        return True
    usr1 = getattr(signal, "SIGUSR1", None)
    if usr1 is None or threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(usr1) is not signal.SIG_DFL:
        return False
    signal.signal(usr1, _on_signal)
    _installed = True
    return True


def _on_signal(signum: int, frame: Any) -> None:
    del frame
    TRAFFIC.dump("SIGUSR1", identity(), extra={"threads": thread_stacks(), **endpoints()},
                 force=True, even_without_recorder=True, here=True)
