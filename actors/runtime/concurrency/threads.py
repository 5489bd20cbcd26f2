"""The process's registry of threads: every thread the project runs, its owner and purpose.

Every thread the project starts is made by `start_thread` (or `new_thread`, for an
owner that must hold its thread before starting it), which records its name, owner
and purpose, and when it started. A thread that a library starts on the project's
behalf (pyzmq's ZAP handler) is added with `register_foreign`. `running_threads()`
is the live list, for a debug dump or a test: a thread leaves it when it ends, and
the registry holds threads weakly, so it keeps no finished thread (or its owner) alive.
"""
from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Callable, List, NamedTuple, Tuple


class ThreadRecord(NamedTuple):
    """One running thread: `owner` starts and stops it; `started` is epoch seconds."""

    name: str
    owner: str
    purpose: str
    started: float
    ident: int


_lock = threading.Lock()
# thread -> (owner, purpose, started); listings skip a thread that is not alive.
_threads: "weakref.WeakKeyDictionary[threading.Thread, Tuple[str, str, float]]" = (
    weakref.WeakKeyDictionary())


def _register(thread: threading.Thread, owner: str, purpose: str) -> None:
    with _lock:
        _threads[thread] = (owner, purpose, time.time())


class _RegisteredThread(threading.Thread):
    """A thread that enters the registry as it starts, so it is listed while alive."""

    def __init__(self, owner: str, purpose: str, **kwargs: Any):
        super().__init__(**kwargs)
        self._registered_as = (owner, purpose)

    def start(self) -> None:
        _register(self, *self._registered_as)
        super().start()


def new_thread(target: Callable[..., Any], *, name: str, owner: str, purpose: str,
               daemon: bool = True, args: tuple = ()) -> threading.Thread:
    """A thread, not yet started, that is registered when it starts.

    `owner` names the object or function that starts and ends it (module-qualified),
    `purpose` says what it does.
    """
    return _RegisteredThread(owner, purpose, target=target, name=name, daemon=daemon,
                             args=args)


def start_thread(target: Callable[..., Any], *, name: str, owner: str, purpose: str,
                 daemon: bool = True, args: tuple = ()) -> threading.Thread:
    """`new_thread`, started."""
    thread = new_thread(target, name=name, owner=owner, purpose=purpose, daemon=daemon,
                        args=args)
    thread.start()
    return thread


def register_foreign(thread: threading.Thread, owner: str, purpose: str) -> None:
    """List a thread that a library started for the project; `started` is now."""
    _register(thread, owner, purpose)


def running_threads() -> List[ThreadRecord]:
    """The registered threads that are alive now, oldest first."""
    with _lock:
        entries = list(_threads.items())
    return [ThreadRecord(thread.name, owner, purpose, started, thread.ident)
            for thread, (owner, purpose, started) in entries if thread.is_alive()]
