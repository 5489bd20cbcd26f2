"""`HashStore`: an in-process, thread-safe store (torch's `c10d::HashStore`)."""
from __future__ import annotations

import threading
import time
from typing import Callable, List, Optional, TypeVar

from store.base import DEFAULT_TIMEOUT, Timeout, WatchCallback, check_key
from store.errors import StoreError
from store.keyspace import KeySpace, KeySpaceStore, missing_keys
from store.waiting import Attempt, block
from store.watch import WatchDispatcher

T = TypeVar("T")


class HashStore(KeySpaceStore):
    """A store shared by the threads of one process.

    One lock guards a `KeySpace`; blocking operations wait on a condition bound to
    that lock, which every change notifies, so a waiter wakes as soon as the key it
    needs appears (no polling). Watch callbacks run on a `WatchDispatcher` thread.
    """

    def __init__(self, timeout: Timeout = DEFAULT_TIMEOUT):
        super().__init__(timeout)
        self._cond = threading.Condition(threading.Lock())
        self._watchers = WatchDispatcher("actorgrad-hashstore-watch")
        self._keys = KeySpace()
        self._keys.on_change = self._on_change
        self._keys.on_queue_push = self._on_queue_push
        self._closed = False

    def clone(self) -> "HashStore":
        """The store itself, as torch's `HashStore.clone` (one lock already serves every
        thread); closing either closes both."""
        return self

    # Both hooks run with self._cond held, inside the KeySpace operation.
    def _on_change(self, key: str, old: Optional[bytes], new: Optional[bytes]) -> None:
        self._cond.notify_all()
        self._watchers.notify(key, old, new)

    def _on_queue_push(self, key: str) -> None:
        self._cond.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("HashStore is closed")

    def _apply(self, op: Callable[[KeySpace], T], write: bool) -> T:
        with self._cond:
            self._check_open()
            return op(self._keys)

    def _block(
        self,
        attempt: Callable[[KeySpace], Optional[T]],
        operation: str,
        keys: List[str],
        timeout: float,
        write: bool = False,
    ) -> T:
        def attempt_for(seconds: float) -> Attempt:
            with self._cond:
                until = time.monotonic() + seconds
                while True:
                    self._check_open()
                    result = attempt(self._keys)
                    if result is not None:
                        return True, result
                    remaining = until - time.monotonic()
                    if remaining <= 0:
                        return False, missing_keys(self._keys, operation, keys)
                    self._cond.wait(remaining)

        return block(attempt_for, operation, keys, timeout)

    def watch_key(self, key: str, callback: WatchCallback) -> None:
        key = check_key(key)
        with self._cond:
            self._check_open()
            # Under the lock, so no change slips between "from now on" and the registration.
            self._watchers.add(key, callback)

    def close(self) -> None:
        """Fail blocked and later operations with StoreError; stop the watch thread."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._watchers.close()
