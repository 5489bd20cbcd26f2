"""The store operations' rules on plain in-memory data, shared by every store.

`KeySpace` holds no lock, never blocks and does no I/O: HashStore wraps it in a
condition variable, FileStore loads and saves it under a file lock, and the
TCPStore server applies it on its mailbox thread. Arguments are already
validated (`str` keys, `bytes` values) by the store that calls in;
`KeySpaceStore` at the bottom is that checking layer for the local stores.

Plain keys and queues are two separate namespaces: `queue_push("q", ...)` does not
create a plain key `"q"`, and `set("q", ...)`, `delete("q")` or `check(["q"])` never
touch the queue `"q"`. Keys under `INTERNAL_PREFIX` hold the stores' own
bookkeeping and are left out of `num_keys`.
"""
from __future__ import annotations

import abc
from collections import deque
from typing import Callable, Deque, Dict, List, Optional, Sequence, TypeVar

from store.base import (
    Store,
    Timeout,
    Value,
    COUNTER_MAX,
    COUNTER_MIN,
    check_amount,
    check_key,
    check_keys,
    check_values,
    to_bytes,
)
from store.errors import QueueEmptyError

INTERNAL_PREFIX = "__actorgrad__/"

T = TypeVar("T")
ChangeHook = Callable[[str, Optional[bytes], Optional[bytes]], None]
QueueHook = Callable[[str], None]


class KeySpace:
    """Plain keys and FIFO queues with the c10d store semantics; not thread-safe.

    `on_change(key, old, new)` is called synchronously after every write of a plain
    key, even one that leaves the bytes unchanged (torch notifies watchers of every
    set): `old` is None on creation, `new` is None on deletion. `on_queue_push(key)`
    is called after every push. `version` counts mutations of either namespace, so
    a caller can tell whether an operation changed anything.
    """

    __slots__ = ("_data", "_queues", "_internal", "version", "on_change", "on_queue_push")

    def __init__(self) -> None:
        self._data: Dict[str, bytes] = {}
        self._queues: Dict[str, Deque[bytes]] = {}
        self._internal = 0  # how many keys of _data are internal, so num_keys is O(1)
        self.version = 0
        self.on_change: Optional[ChangeHook] = None
        self.on_queue_push: Optional[QueueHook] = None

    # -- plain keys ---------------------------------------------------------------

    def _put(self, key: str, value: bytes) -> Optional[bytes]:
        """Every write of a plain key goes through here: bookkeeping, then the hook."""
        old = self._data.get(key)
        self._data[key] = value
        if old is None and key.startswith(INTERNAL_PREFIX):
            self._internal += 1
        self.version += 1
        hook = self.on_change
        if hook is not None:
            hook(key, old, value)
        return old

    def set(self, key: str, value: bytes) -> None:
        self._put(key, value)

    def get(self, key: str) -> Optional[bytes]:
        """The value of `key`, or None when it is missing."""
        return self._data.get(key)

    def add(self, key: str, amount: int) -> int:
        """Add to a counter stored as decimal ASCII; a missing key counts as 0.

        The key is written even when `amount` is 0, so `add(key, 0)` creates it.
        """
        current = self._data.get(key)
        if current is None:
            total = amount
        else:
            try:
                total = int(current) + amount
            except ValueError:
                raise ValueError(
                    f"add: key {key!r} holds {current[:32]!r}, not a decimal integer"
                ) from None
        if not COUNTER_MIN <= total <= COUNTER_MAX:  # torch's would wrap around
            raise OverflowError(f"add: key {key!r} would pass a signed 64-bit counter's "
                                f"range ({current.decode('ascii')} + {amount}); it is unchanged")
        self._put(key, str(total).encode("ascii"))
        return total

    def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        """torch's compare-and-set; returns the value the key holds afterwards, or `expected`.

        present and equal to `expected` -> set, return `desired`;
        present and different            -> return the current value;
        missing and `expected == b""`    -> set, return `desired`;
        missing otherwise                -> return `expected`, set nothing.
        """
        current = self._data.get(key)
        if current is None:
            if expected:
                return expected
        elif current != expected:
            return current
        self._put(key, desired)
        return desired

    def delete(self, key: str) -> bool:
        """Remove `key`; True if it existed."""
        old = self._data.pop(key, None)
        if old is None:
            return False
        if key.startswith(INTERNAL_PREFIX):
            self._internal -= 1
        self.version += 1
        hook = self.on_change
        if hook is not None:
            hook(key, old, None)
        return True

    def check(self, keys: Sequence[str]) -> bool:
        """True when every key exists (vacuously true for no keys)."""
        data = self._data
        return all(k in data for k in keys)

    def missing(self, keys: Sequence[str]) -> List[str]:
        """The keys that do not exist, in the order given."""
        data = self._data
        return [k for k in keys if k not in data]

    def num_keys(self) -> int:
        """Number of plain user keys: internal keys and queues are not counted."""
        return len(self._data) - self._internal

    def list_keys(self) -> List[str]:
        """The plain user keys, sorted."""
        return sorted(k for k in self._data if not k.startswith(INTERNAL_PREFIX))

    def multi_set(self, keys: Sequence[str], values: Sequence[bytes]) -> None:
        """Set each key in order (the caller has checked the lengths match)."""
        for key, value in zip(keys, values):
            self._put(key, value)

    def append(self, key: str, value: bytes) -> None:
        """Append to the key's value, creating it when missing."""
        current = self._data.get(key)
        self._put(key, value if current is None else current + value)

    # -- queues -------------------------------------------------------------------

    def queue_push(self, key: str, value: bytes, front: bool = False) -> None:
        """Append `value`; with `front`, put it back as the oldest item instead."""
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
        if front:
            queue.appendleft(value)
        else:
            queue.append(value)
        self.version += 1
        hook = self.on_queue_push
        if hook is not None:
            hook(key)

    def queue_pop(self, key: str) -> Optional[bytes]:
        """The oldest item of the queue, or None when it is empty."""
        queue = self._queues.get(key)
        if not queue:
            return None
        value = queue.popleft()
        if not queue:
            del self._queues[key]  # empty queues are not kept, so abandoned names cost nothing
        self.version += 1
        return value

    def queue_peek(self, key: str) -> Optional[bytes]:
        """The oldest item of the queue, left in it; None when it is empty."""
        queue = self._queues.get(key)
        return queue[0] if queue else None

    def queue_len(self, key: str) -> int:
        queue = self._queues.get(key)
        return 0 if queue is None else len(queue)

    # -- snapshots ----------------------------------------------------------------

    def to_state(self) -> dict:
        """A plain, picklable copy: `{"data": {key: bytes}, "queues": {key: [bytes]}}`."""
        return {
            "data": dict(self._data),
            "queues": {k: list(q) for k, q in self._queues.items()},
        }

    @classmethod
    def from_state(cls, state: dict) -> "KeySpace":
        """A KeySpace holding a `to_state()` snapshot (hooks unset, version 0)."""
        space = cls()
        space._data = dict(state.get("data", {}))
        space._queues = {k: deque(v) for k, v in state.get("queues", {}).items() if v}
        space._internal = sum(1 for k in space._data if k.startswith(INTERNAL_PREFIX))
        return space


def missing_keys(space: KeySpace, operation: str, keys: List[str]) -> List[str]:
    """The keys a blocked operation still waits for: a queue_pop waits for its queue,
    the others for the plain keys that do not exist yet."""
    return list(keys) if operation == "queue_pop" else space.missing(keys)


class KeySpaceStore(Store):
    """A Store whose operations check their arguments, then apply one KeySpace rule.

    A subclass decides how a rule reaches the data: `_apply` runs it once under the
    store's exclusion (a lock, a file lock), `_block` retries it until it yields a
    value or the deadline passes. Everything else is shared, so every local store
    applies the same checks and the same rules.
    """

    @abc.abstractmethod
    def _apply(self, op: Callable[[KeySpace], T], write: bool) -> T:
        """Run `op` on the current data; `write` says whether it may change it."""

    @abc.abstractmethod
    def _block(
        self,
        attempt: Callable[[KeySpace], Optional[T]],
        operation: str,
        keys: List[str],
        timeout: float,
        write: bool = False,
    ) -> T:
        """Retry `attempt` until it returns non-None (through `store.waiting.block`, which
        reports a long wait); on expiry raise StoreTimeoutError naming the `keys` still
        missing (`missing_keys`) and `timeout`."""

    def set(self, key: str, value: Value) -> None:
        key, value = check_key(key), to_bytes(value)
        self._apply(lambda ks: ks.set(key, value), True)

    def get(self, key: str) -> bytes:
        key = check_key(key)
        return self._block(lambda ks: ks.get(key), "get", [key], self.timeout_seconds)

    def add(self, key: str, amount: int) -> int:
        key, amount = check_key(key), check_amount(amount)
        return self._apply(lambda ks: ks.add(key, amount), True)

    def compare_set(self, key: str, expected: Value, desired: Value) -> bytes:
        key = check_key(key)
        expected, desired = to_bytes(expected, "expected"), to_bytes(desired, "desired")
        return self._apply(lambda ks: ks.compare_set(key, expected, desired), True)

    def delete_key(self, key: str) -> bool:
        key = check_key(key)
        return self._apply(lambda ks: ks.delete(key), True)

    def check(self, keys: Sequence[str]) -> bool:
        keys = check_keys(keys)
        return self._apply(lambda ks: ks.check(keys), False)

    def num_keys(self) -> int:
        return self._apply(lambda ks: ks.num_keys(), False)

    def list_keys(self) -> List[str]:
        return self._apply(lambda ks: ks.list_keys(), False)

    def wait(self, keys: Sequence[str], timeout: Optional[Timeout] = None) -> None:
        keys = check_keys(keys)
        self._block(
            lambda ks: True if ks.check(keys) else None,
            "wait",
            keys,
            self._timeout_or_default(timeout),
        )

    def multi_get(self, keys: Sequence[str]) -> list:
        keys = check_keys(keys)
        return self._block(
            lambda ks: [ks.get(k) for k in keys] if ks.check(keys) else None,
            "multi_get",
            keys,
            self.timeout_seconds,
        )

    def multi_set(self, keys: Sequence[str], values: Sequence[Value]) -> None:
        keys = check_keys(keys)
        values = check_values(values, len(keys))
        self._apply(lambda ks: ks.multi_set(keys, values), True)

    def append(self, key: str, value: Value) -> None:
        key, value = check_key(key), to_bytes(value)
        self._apply(lambda ks: ks.append(key, value), True)

    def queue_push(self, key: str, value: Value) -> None:
        key, value = check_key(key), to_bytes(value)
        self._apply(lambda ks: ks.queue_push(key, value), True)

    def queue_pop(self, key: str, block: bool = True, timeout: Optional[Timeout] = None) -> bytes:
        key = check_key(key)
        if block:
            return self._block(
                lambda ks: ks.queue_pop(key),
                "queue_pop",
                [key],
                self._timeout_or_default(timeout),
                write=True,
            )
        value = self._apply(lambda ks: ks.queue_pop(key), True)
        if value is None:
            raise QueueEmptyError(f"queue {key!r} is empty")
        return value

    def queue_len(self, key: str) -> int:
        key = check_key(key)
        return self._apply(lambda ks: ks.queue_len(key), False)
