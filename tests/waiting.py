"""Bounded waits for tests: poll a condition until it holds or a deadline passes."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional


def wait_until(condition: Callable[[], bool], timeout: float = 10.0,
               interval: float = 0.02) -> bool:
    """True once `condition()` holds; False if `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def raised_by(fn: Callable[..., Any], *args: Any) -> Optional[BaseException]:
    """The exception `fn(*args)` raises, or None (for calls made on another thread)."""
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - handed to the test to inspect
        return exc
    return None


def run_in_threads(target: Callable[[int], Any], count: int, timeout: float) -> bool:
    """Run `target(i)` on `count` threads at once; True if all ended within `timeout`."""
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(thread.is_alive() for thread in threads)
