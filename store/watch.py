"""Delivery of `watch_key` callbacks on one background thread, in order.

A store calls `notify(key, old, new)` where the change happens, often under its own
lock; the dispatcher only enqueues there. Callbacks run later on the dispatcher's
daemon thread, so a callback never runs under a store lock, never on the thread
that made the change, and may call back into the store without deadlocking.
"""
from __future__ import annotations

import queue
import threading
from typing import Callable, Dict, Optional, Tuple

from actors.runtime.process.log import get_logger
from actors.runtime.concurrency.contained import escapes
from actors.runtime.concurrency.threads import start_thread
from store.base import WatchCallback

log = get_logger(__name__)

_STOP = object()  # sentinel: everything queued before it is still delivered
DEFAULT_JOIN_TIMEOUT = 5.0


class WatchDispatcher:
    """A per-key registry of callbacks and the thread that calls them."""

    def __init__(self, name: str = "actorgrad-store-watch"):
        self._name = name
        # key -> ((callback, the revision it was registered at, or None), ...)
        self._callbacks: Dict[str, Tuple[Tuple[WatchCallback, Optional[int]], ...]] = {}
        self._events: "queue.SimpleQueue" = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    def add(self, key: str, callback: WatchCallback, since: Optional[int] = None) -> None:
        """Register `callback(old, new)` for changes of `key` made from now on: for a
        store that numbers its changes, those after revision `since`."""
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        with self._lock:
            if self._closed:
                raise RuntimeError("watch dispatcher is closed")
            # Copy-on-write tuples: notify() reads them without taking the lock.
            self._callbacks[key] = self._callbacks.get(key, ()) + ((callback, since),)
            if self._thread is None:
                # The thread holds the queue only: events carry their callbacks, so a
                # callback that refers to the store (or this dispatcher) never keeps
                # it alive, and a dropped store's finalizer can stop the thread.
                self._thread = start_thread(_deliver, args=(self._events,), name=self._name,
                                            owner="store.watch.WatchDispatcher",
                                            purpose="calls a store's watch callbacks in order")

    def watched(self, key: str) -> bool:
        return key in self._callbacks

    def keys(self) -> list:
        """The keys that have at least one callback."""
        return list(self._callbacks)

    def notify(self, key: str, old: Optional[bytes], new: Optional[bytes],
               revision: Optional[int] = None) -> None:
        """Queue one change (made at `revision`, if the store numbers its changes) for
        the key's callbacks; cheap and non-blocking."""
        entries = self._callbacks.get(key)
        if not entries or self._closed:
            return
        # The callbacks are captured now: one registered after this change misses it.
        callbacks = tuple(callback for callback, since in entries
                          if since is None or revision is None or revision > since)
        if callbacks:
            self._events.put((key, callbacks, old, new))

    def close_soon(self) -> Optional[threading.Thread]:
        """Deliver what is already queued, then end the thread; returns at once.

        Returns the thread to join, if this call stopped one.
        """
        with self._lock:
            if self._closed:
                return None
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._events.put(_STOP)
        return thread

    def stopper(self) -> Callable[[], None]:
        """A function that ends the thread once what is queued is delivered.

        It holds the queue only, not this dispatcher or its callbacks, so an owner's
        finalizer can hold it without keeping the owner alive.
        """
        events = self._events
        return lambda: events.put(_STOP)

    def close(self, timeout: float = DEFAULT_JOIN_TIMEOUT) -> None:
        """`close_soon`, then join the thread for at most `timeout`."""
        thread = self.close_soon()
        if thread is None:
            return
        if thread is threading.current_thread():
            return  # close() called from a callback: the thread ends after this event
        thread.join(timeout)
        if thread.is_alive():
            log.warning("watch_dispatcher_not_stopped", thread=self._name, timeout=timeout)


def _deliver(events: "queue.SimpleQueue") -> None:
    """The dispatcher thread: run each event's callbacks in order until the stop sentinel."""
    while True:
        event = events.get()
        if event is _STOP:
            return
        _run_callbacks(*event)
        event = None  # hold nothing between events


def _run_callbacks(key: str, callbacks: Tuple[WatchCallback, ...], old: Optional[bytes],
                   new: Optional[bytes]) -> None:
    for callback in callbacks:
        try:
            callback(old, new)
        except BaseException as exc:  # noqa: BLE001
            if escapes(exc):
                raise
            # One faulty callback must not starve the others or later events.
            log.exception("watch_callback_failed", key=key, callback=repr(callback))
