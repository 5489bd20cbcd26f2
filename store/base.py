"""The `Store` contract shared by every store, and the argument checks they all apply.

Keys are `str` (`bytes` keys are taken as UTF-8, as torch takes them); values are
`bytes` or `str` (str is stored UTF-8 encoded); `get` returns `bytes`. Every timeout
accepts float seconds or a `timedelta`.
"""
from __future__ import annotations

import abc
from datetime import timedelta
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Union

Timeout = Union[float, int, timedelta]
Value = Union[bytes, bytearray, memoryview, str]
WatchCallback = Callable[[Optional[bytes], Optional[bytes]], None]

DEFAULT_TIMEOUT = 300.0


def to_seconds(timeout: Optional[Timeout], name: str = "timeout") -> Optional[float]:
    """Normalise a float-seconds or timedelta timeout; None stays None.

    TypeError for another type, ValueError for NaN."""
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(
            f"{name} must be seconds (float) or a timedelta, got {type(timeout).__name__}"
        )
    if timeout != timeout:  # NaN: no deadline compares to it, none is ever due
        raise ValueError(f"{name} must be a number of seconds, got nan")
    return float(timeout)


def check_key(key: object, name: str = "key") -> str:
    if isinstance(key, bytes):
        try:
            return key.decode("utf-8")
        except UnicodeDecodeError:
            raise TypeError(f"{name} must be str or UTF-8 bytes, got {key!r}") from None
    if not isinstance(key, str):
        raise TypeError(f"{name} must be str, got {type(key).__name__}")
    return key


def check_keys(keys: object, name: str = "keys") -> list:
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise TypeError(f"{name} must be a list of str, got {type(keys).__name__}")
    return [check_key(k, name) for k in keys]


def to_bytes(value: object, name: str = "value") -> bytes:
    """Encode a store value: bytes-like kept as bytes, str as UTF-8; else a TypeError."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{name} must be bytes or str, got {type(value).__name__}")


# A counter is a signed 64-bit integer, as torch's, so that clients in any language read it.
COUNTER_MIN, COUNTER_MAX = -2**63, 2**63 - 1


def check_amount(amount: object) -> int:
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise TypeError(f"amount must be int, got {type(amount).__name__}")
    if not COUNTER_MIN <= amount <= COUNTER_MAX:
        raise OverflowError(f"amount {amount} does not fit a signed 64-bit counter")
    return amount


def check_values(values: object, count: int, name: str = "values") -> list:
    """Encode multi_set's values; there must be exactly one per key (`count`)."""
    if isinstance(values, (str, bytes, bytearray, memoryview)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a list of bytes or str, got {type(values).__name__}")
    encoded = [to_bytes(v, name) for v in values]
    if len(encoded) != count:
        raise ValueError(f"multi_set got {count} keys but {len(encoded)} {name}")
    return encoded


class Store(abc.ABC):
    """A key-value store for coordinating processes, with the c10d `Store` operations."""

    def __init__(self, timeout: Timeout = DEFAULT_TIMEOUT):
        self._timeout = to_seconds(timeout)

    @property
    def timeout(self) -> timedelta:
        """Default timeout for blocking operations, a `timedelta` as torch's `Store.timeout`."""
        return timedelta(seconds=self.timeout_seconds)

    @property
    def timeout_seconds(self) -> float:
        """The default timeout in seconds, the form the transports send on the wire."""
        return self._timeout

    def set_timeout(self, timeout: Timeout) -> None:
        """Set the default timeout of this handle's blocking calls (seconds or a timedelta)."""
        self._timeout = to_seconds(timeout)

    def _timeout_or_default(self, timeout: Optional[Timeout]) -> float:
        return self._timeout if timeout is None else to_seconds(timeout)

    @abc.abstractmethod
    def set(self, key: str, value: Value) -> None:
        """Set `key` to `value` (bytes, or str stored UTF-8 encoded), waking every waiter on it."""

    @abc.abstractmethod
    def get(self, key: str) -> bytes:
        """Return the value of `key`, blocking until it exists or the store timeout expires."""

    @abc.abstractmethod
    def add(self, key: str, amount: int) -> int:
        """Atomically add to a counter kept as decimal ASCII; a missing key counts as 0."""

    @abc.abstractmethod
    def compare_set(self, key: str, expected: Value, desired: Value) -> bytes:
        """Set `key` to `desired` if it holds `expected` (see docs/STORES.md for the exact rule)."""

    @abc.abstractmethod
    def delete_key(self, key: str) -> bool:
        """Delete `key`; whether it existed."""

    @abc.abstractmethod
    def check(self, keys: Sequence[str]) -> bool:
        """True if every key exists; never blocks."""

    @abc.abstractmethod
    def num_keys(self) -> int:
        """Number of user keys (queues and internal bookkeeping keys excluded)."""

    @abc.abstractmethod
    def list_keys(self) -> List[str]:
        """The user keys, sorted (queues and internal bookkeeping keys excluded)."""

    @abc.abstractmethod
    def clone(self) -> "Store":
        """Another handle on the same data, for another thread (torch's `clone`)."""

    def has_extended_api(self) -> bool:
        """Whether append, multi_get/multi_set, queues and the rest are there: always."""
        return True

    @abc.abstractmethod
    def wait(self, keys: Sequence[str], timeout: Optional[Timeout] = None) -> None:
        """Block until every key exists; StoreTimeoutError names the missing keys."""

    @abc.abstractmethod
    def multi_get(self, keys: Sequence[str]) -> list:
        """Values of all keys, blocking until all exist."""

    @abc.abstractmethod
    def multi_set(self, keys: Sequence[str], values: Sequence[Value]) -> None:
        """Set each key to its value as one change; ValueError unless there is one value per key."""

    @abc.abstractmethod
    def append(self, key: str, value: Value) -> None:
        """Append bytes to a key's value, creating it when missing."""

    @abc.abstractmethod
    def queue_push(self, key: str, value: Value) -> None:
        """Append `value` to the queue at `key` (created when missing), for `queue_pop`."""

    @abc.abstractmethod
    def queue_pop(self, key: str, block: bool = True, timeout: Optional[Timeout] = None) -> bytes:
        """Pop the oldest item; blocking waits up to the timeout, else raises QueueEmptyError."""

    @abc.abstractmethod
    def queue_len(self, key: str) -> int:
        """The number of items in the queue at `key` (0 when there is none)."""

    @abc.abstractmethod
    def watch_key(self, key: str, callback: WatchCallback) -> None:
        """Call `callback(old, new)` on a client thread each time `key` changes.

        `old` is None when the key is created, `new` is None when it is deleted.
        The callback must not block.
        """

    def quorum(self, name: str, member: str, data: Value = b"", *, count: Optional[int] = None,
               expect: Optional[Sequence[str]] = None, min_size: Optional[int] = None,
               timeout: Optional[Timeout] = None,
               expect_now: Optional[Callable[[], Sequence[str]]] = None) -> Dict[str, bytes]:
        """Arrive at quorum round `name` as `member` and wait for its release (see
        `store/quorum.py` for when a round is released); {member: data} of the round.

        One request per member and one reply to each; StoreTimeoutError names the
        missing members. `expect_now()`, when given with `expect`, is asked every few
        tens of milliseconds while the member waits: when it names other members than
        the arrival did, the member arrives again with those (one more request), e.g.
        as soon as it learns that a member it waits for is lost; if it raises, the
        arrival stands (a WARNING says why). Only stores with a server that applies the
        rule have it.
        """
        raise NotImplementedError(f"{type(self).__name__} has no quorum operation; use a "
                                  f"TCPStore (or a PrefixStore over one)")

    def close(self) -> None:  # noqa: B027 - optional hook, deliberately not abstract
        """Release the store's resources; the default has nothing to release."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
