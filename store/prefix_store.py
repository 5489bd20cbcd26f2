"""`PrefixStore`: a namespace inside another store (torch's `c10d::PrefixStore`)."""
from __future__ import annotations

import functools
from typing import Callable, Dict, List, Optional, Sequence, TypeVar

from store.base import Store, Timeout, Value, WatchCallback, check_key, check_keys, to_seconds
from store.errors import StoreTimeoutError

T = TypeVar("T")


def _translate_timeouts(method: Callable[..., T]) -> Callable[..., T]:
    """Re-raise the underlying store's StoreTimeoutError naming the caller's (unprefixed) keys."""

    @functools.wraps(method)
    def wrapper(self: "PrefixStore", *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except StoreTimeoutError as err:
            raise StoreTimeoutError(
                err.operation, self._unprefix(err.keys), err.timeout
            ) from err

    return wrapper


class PrefixStore(Store):
    """Every key `k` becomes `prefix/k` in the underlying store, on every operation.

    That includes wait, check, multi_get/multi_set, the queue operations and
    watch_key. `num_keys` is delegated unchanged, so like torch it counts every user
    key of the underlying store, not only this prefix's. The timeout is the
    underlying store's; `close()` leaves the underlying store open, but for a
    `clone`'s, which the clone made and owns.
    """

    def __init__(self, prefix: str, store: Store):
        self._prefix = check_key(prefix, "prefix")
        if not isinstance(store, Store):
            raise TypeError(f"store must be a Store, got {type(store).__name__}")
        self._store = store  # Store.__init__ is skipped: the timeout lives in the underlying store
        self._owns_store = False

    @property
    def underlying_store(self) -> Store:
        """The store this one writes to, each key under the prefix."""
        return self._store

    @property
    def prefix(self) -> str:
        """The prefix put before every key (with a ``/`` between)."""
        return self._prefix

    @property
    def timeout_seconds(self) -> float:
        """The underlying store's default timeout in seconds."""
        return self._store.timeout_seconds

    def set_timeout(self, timeout: Timeout) -> None:
        to_seconds(timeout)  # reject a bad type here, with our own argument name
        self._store.set_timeout(timeout)

    def _key(self, key: str) -> str:
        return f"{self._prefix}/{check_key(key)}"

    def _keys(self, keys: Sequence[str]) -> List[str]:
        return [f"{self._prefix}/{k}" for k in check_keys(keys)]

    def _unprefix(self, keys: Sequence[str]) -> List[str]:
        head = self._prefix + "/"
        return [k[len(head):] if k.startswith(head) else k for k in keys]

    @property
    def set_ephemeral(self):
        """The underlying store's `set_ephemeral` under the prefix, where it has one.

        Raises AttributeError otherwise, so ``getattr(store, "set_ephemeral", None)``
        tells whether session-bound keys are available through this store.
        """
        inner = getattr(self._store, "set_ephemeral", None)
        if inner is None:
            raise AttributeError(f"{type(self._store).__name__} has no session-bound keys")
        return lambda key, value: inner(self._key(key), value)

    def set(self, key: str, value: Value) -> None:
        self._store.set(self._key(key), value)

    @_translate_timeouts
    def get(self, key: str) -> bytes:
        return self._store.get(self._key(key))

    def add(self, key: str, amount: int) -> int:
        return self._store.add(self._key(key), amount)

    def compare_set(self, key: str, expected: Value, desired: Value) -> bytes:
        return self._store.compare_set(self._key(key), expected, desired)

    def delete_key(self, key: str) -> bool:
        return self._store.delete_key(self._key(key))

    def check(self, keys: Sequence[str]) -> bool:
        return self._store.check(self._keys(keys))

    def num_keys(self) -> int:
        return self._store.num_keys()

    def list_keys(self) -> List[str]:
        """The keys under this prefix, without it (unlike `num_keys`)."""
        head = f"{self._prefix}/"
        return [k[len(head):] for k in self._store.list_keys() if k.startswith(head)]

    def clone(self) -> "PrefixStore":
        """The same prefix over a clone of the underlying store, closed with it."""
        clone = PrefixStore(self._prefix, self._store.clone())
        clone._owns_store = clone._store is not self._store  # a HashStore is its own clone
        return clone

    @_translate_timeouts
    def wait(self, keys: Sequence[str], timeout: Optional[Timeout] = None) -> None:
        self._store.wait(self._keys(keys), timeout)

    @_translate_timeouts
    def multi_get(self, keys: Sequence[str]) -> list:
        return self._store.multi_get(self._keys(keys))

    def multi_set(self, keys: Sequence[str], values: Sequence[Value]) -> None:
        self._store.multi_set(self._keys(keys), values)

    def append(self, key: str, value: Value) -> None:
        self._store.append(self._key(key), value)

    def queue_push(self, key: str, value: Value) -> None:
        self._store.queue_push(self._key(key), value)

    @_translate_timeouts
    def queue_pop(self, key: str, block: bool = True, timeout: Optional[Timeout] = None) -> bytes:
        return self._store.queue_pop(self._key(key), block, timeout)

    def queue_len(self, key: str) -> int:
        return self._store.queue_len(self._key(key))

    def watch_key(self, key: str, callback: WatchCallback) -> None:
        self._store.watch_key(self._key(key), callback)

    def quorum(self, name: str, member: str, data: Value = b"", *, count: Optional[int] = None,
               expect: Optional[Sequence[str]] = None, min_size: Optional[int] = None,
               timeout: Optional[Timeout] = None,
               expect_now: Optional[Callable[[], Sequence[str]]] = None) -> Dict[str, bytes]:
        """The round `prefix/name` of the underlying store; members are not prefixed."""
        return self._store.quorum(self._key(name), member, data, count=count, expect=expect,
                                  min_size=min_size, timeout=timeout, expect_now=expect_now)

    def close(self) -> None:
        """Close the underlying store if `clone` made it; else it belongs to its creator."""
        if self._owns_store:
            self._store.close()
