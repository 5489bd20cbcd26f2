"""`EtcdStore`: the Store API on etcd v3, so a job's coordination outlives any one host.

Layout under `prefix` (`layout.Layout`): ``<prefix>/#k/<key>`` holds a plain key,
``<prefix>/#q/<queue>/<id>`` one queued item (FIFO by etcd's creation revision), with
the characters that would let one store's or queue's range reach into another's
escaped. The rules are `KeySpace`'s, the same as every other store's:

- a read-modify-write (`add`, `compare_set`, `append`) reads the key, applies the
  KeySpace rule to it, and writes in a transaction that holds only if the key was
  not written meanwhile; a conflict retries;
- a blocking operation (`get`, `wait`, `multi_get`, a blocking `queue_pop`) reads,
  and if it must wait, watches the namespace from the revision it read (so no
  change is missed, and nothing polls) until it can answer or its deadline passes;
- `set_ephemeral` puts the key on a lease this client keeps alive: a killed client's
  keys vanish within `ephemeral_ttl` seconds, a closed client's at once; a client that
  went unscheduled for longer loses its keys as a dead one does, and the keys it sets
  afterwards go on a new lease;
- `watch_key` callbacks run on the store's `WatchDispatcher` thread.
"""
from __future__ import annotations

import random
import threading
import time
import uuid
import weakref
from typing import Any, Callable, List, Optional, Sequence, Tuple, TypeVar

from actors.runtime.process.log import get_logger
from store.base import (Store, Timeout, Value, WatchCallback, check_amount, check_key,
                        check_keys, check_values, to_bytes)
from store.errors import QueueEmptyError, StoreError
from store.keyspace import INTERNAL_PREFIX, KeySpace
from store.waiting import block

from .gateway import (Event, Gateway, LeaseNotFoundError, UncertainWriteError, delete_op,
                      prefix_end, put_op, range_op, same_revision)
from .layout import Layout
from .limits import MAX_REQUEST_BYTES
from .session import KeyWatches, Session

log = get_logger(__name__)

T = TypeVar("T")
# What a blocking operation's attempt yields: (answer or None, revision read, missing keys).
Attempt = Tuple[Optional[T], int, List[str]]
Revisioned = Tuple[bytes, int]  # a value and the etcd revision it was written at
EPHEMERAL_TTL = 15  # seconds, as DESIGN §8 asks


class EtcdStore(Store):
    """A client of the keys under `prefix` on the etcd server at `endpoint` (``host:port``).

    Clients with the same endpoint and prefix share one store. StoreConnectionError
    when etcd cannot be reached; StoreTimeoutError when a blocking operation's
    deadline passes; ValueTooLargeError (a ValueError) for a write over
    `max_request_bytes`, the server's --max-request-bytes (etcd's default: 1.5 MiB).
    """

    def __init__(self, endpoint: str, prefix: str = "/actorgrad", timeout: Timeout = 300.0,
                 *, ephemeral_ttl: int = EPHEMERAL_TTL,
                 max_request_bytes: int = MAX_REQUEST_BYTES):
        super().__init__(timeout)
        self.endpoint, self.prefix = endpoint, prefix.rstrip("/")
        # Requests, and the retries of one call while etcd restarts, are bounded by the
        # store's timeout (at most 30 s: a blocking call waits longer, but by watching).
        bound = min(self.timeout_seconds, 30.0) or 30.0
        self._etcd = Gateway(endpoint, timeout=bound, retry_for=bound,
                             max_request_bytes=max_request_bytes)
        self._layout = Layout(self.prefix)
        self._ephemeral_ttl = ephemeral_ttl
        self._session = session = Session(self._etcd)
        self._closed = session.closed
        self._lock = threading.Lock()  # guards starting the watch stream
        self._watching = False
        self._watches = KeyWatches(session)
        self._etcd.range(self._layout.keys, count_only=True)  # reachable now, or a clear error
        # A dropped store ends its session too; nothing in a finalizer blocks.
        weakref.finalize(self, session.close_soon).atexit = False
        log.info("etcd_store_connected", endpoint=endpoint, prefix=self.prefix)

    # ---- names ----------------------------------------------------------------------

    def _key(self, key: str) -> bytes:
        return self._layout.key(key)

    def _queue(self, key: str) -> bytes:
        return self._layout.queue(key)

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise StoreError(f"EtcdStore {self.endpoint}{self.prefix} is closed")

    # ---- plain keys -------------------------------------------------------------------

    def set(self, key: str, value: Value) -> None:
        key, value = check_key(key), to_bytes(value)
        self._check_open()
        self._etcd.put(self._key(key), value)

    def get(self, key: str) -> bytes:
        key = check_key(key)
        return self._block(lambda: self._read_all([key]), "get", [key],
                           self.timeout_seconds)[0]

    def add(self, key: str, amount: int) -> int:
        key, amount = check_key(key), check_amount(amount)
        return self._update(key, lambda space: space.add(key, amount))

    def compare_set(self, key: str, expected: Value, desired: Value) -> bytes:
        key = check_key(key)
        expected, desired = to_bytes(expected, "expected"), to_bytes(desired, "desired")
        return self._update(key, lambda space: space.compare_set(key, expected, desired))

    def append(self, key: str, value: Value) -> None:
        key, value = check_key(key), to_bytes(value)
        self._update(key, lambda space: space.append(key, value))

    def delete_key(self, key: str) -> bool:
        key = check_key(key)
        self._check_open()
        return self._etcd.delete(self._key(key)) > 0

    def check(self, keys: Sequence[str]) -> bool:
        keys = check_keys(keys)
        self._check_open()
        return self._read_all(keys)[0] is not None

    def num_keys(self) -> int:
        return len(self.list_keys())

    def list_keys(self) -> List[str]:
        self._check_open()
        start = self._layout.keys
        kvs, _, _ = self._etcd.range(start, prefix_end(start), keys_only=True)
        names = (self._layout.key_name(kv.key) for kv in kvs)
        return sorted(name for name in names if not name.startswith(INTERNAL_PREFIX))

    def wait(self, keys: Sequence[str], timeout: Optional[Timeout] = None) -> None:
        keys = check_keys(keys)
        self._block(lambda: self._read_all(keys), "wait", keys, self._timeout_or_default(timeout))

    def multi_get(self, keys: Sequence[str]) -> list:
        keys = check_keys(keys)
        return self._block(lambda: self._read_all(keys), "multi_get", keys,
                           self.timeout_seconds)

    def multi_set(self, keys: Sequence[str], values: Sequence[Value]) -> None:
        keys = check_keys(keys)
        values = check_values(values, len(keys))
        self._check_open()
        latest = dict(zip(keys, values))  # etcd refuses two writes of one key in a txn
        self._etcd.txn([], [put_op(self._key(k), v) for k, v in latest.items()])

    def set_ephemeral(self, key: str, value: Value) -> None:
        """Set `key` for as long as this client lives (its lease is kept alive)."""
        key, value = check_key(key), to_bytes(value)
        self._check_open()
        lease = self._ephemeral_lease()
        try:
            self._etcd.put(self._key(key), value, lease=lease)
        except LeaseNotFoundError:
            # etcd ended the lease before the keep-alive noticed (this client went
            # unscheduled past its TTL, or the lease was revoked): its keys are gone, as
            # a dead client's are.
            self._session.expired(lease)
            self._etcd.put(self._key(key), value, lease=self._ephemeral_lease())

    # ---- queues -----------------------------------------------------------------------

    def queue_push(self, key: str, value: Value) -> None:
        key, value = check_key(key), to_bytes(value)
        self._check_open()
        self._etcd.put(self._queue(key) + uuid.uuid4().hex.encode(), value)

    def queue_pop(self, key: str, block: bool = True, timeout: Optional[Timeout] = None) -> bytes:
        key = check_key(key)
        if block:
            return self._block(lambda: self._pop(key), "queue_pop", [key],
                               self._timeout_or_default(timeout), self._queue(key))
        value = self._pop(key)[0]
        if value is None:
            raise QueueEmptyError(f"queue {key!r} is empty")
        return value

    def queue_len(self, key: str) -> int:
        key = check_key(key)
        self._check_open()
        _, count, _ = self._etcd.range(self._queue(key), prefix_end(self._queue(key)),
                                       count_only=True)
        return count

    def _pop(self, key: str) -> Attempt:
        """Take the oldest item, if any (an `Attempt`)."""
        while True:
            self._check_open()
            start = self._queue(key)
            kvs, _, revision = self._etcd.range(start, prefix_end(start), limit=1,
                                                oldest_first=True)
            if not kvs:
                return None, revision, [key]
            oldest = kvs[0]
            taken, _, _ = self._etcd.txn([same_revision(oldest.key, oldest.mod_revision)],
                                      [delete_op(oldest.key)])
            if taken:
                return oldest.value, revision, []

    # ---- watches ----------------------------------------------------------------------

    def watch_key(self, key: str, callback: WatchCallback) -> None:
        key = check_key(key)
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        self._check_open()
        since = self._watch_from()
        self._watches.dispatcher().add(key, callback, since)

    def _watch_from(self) -> int:
        """The revision after which a watch registered now counts: the newest this client
        has seen, so every change it has made or read is behind it. The first call
        starts the one etcd watch of this client's whole key space that feeds every
        watch."""
        revision = self._etcd.revision_seen
        with self._lock:
            if not self._watching:
                self._watching = True
                # The stream's thread holds the registry weakly: callbacks may refer to
                # this store, which must stay collectable.
                watches = weakref.ref(self._watches)
                key_name = self._layout.key_name

                def deliver(event: Event) -> None:
                    found = watches()
                    if found is not None:
                        found.deliver(key_name(event[0]), *event[1:])

                self._session.on_close(self._etcd.watch(
                    self._layout.keys, prefix_end(self._layout.keys), revision + 1, deliver))
        return revision

    # ---- compare-and-set by revision (the rendezvous backend's) ----------------------

    def get_revisioned(self, key: str) -> Optional[Revisioned]:
        """`key`'s value and the revision it was written at; None if it does not exist."""
        key = check_key(key)
        self._check_open()
        kvs, _, _ = self._etcd.range(self._key(key))
        return (kvs[0].value, kvs[0].mod_revision) if kvs else None

    def set_revisioned(self, key: str, value: bytes, revision: Optional[int]
                       ) -> Tuple[Optional[Revisioned], bool]:
        """Write `value` if `key` is still at `revision` (None: absent), in one transaction.

        Returns (the key's value and revision now, or None if it is absent; whether
        `value` was written). When the connection fails mid-write, the key is read
        again: finding `value` there means it was written.
        """
        key = check_key(key)
        self._check_open()
        name = self._key(key)
        try:
            written, reads, txn_revision = self._etcd.txn(
                [same_revision(name, revision or 0)], [put_op(name, value)], [range_op(name)])
        except UncertainWriteError:
            current = self.get_revisioned(key)
            return current, current is not None and current[0] == value
        if written:
            return (value, txn_revision), True
        return ((reads[0][0].value, reads[0][0].mod_revision) if reads[0] else None), False

    def watch_revisioned(self, key: str,
                         callback: Callable[[Optional[Revisioned]], None]) -> None:
        """Call `callback((value, revision))` (None: deleted) on each change of `key`, on
        the watch stream's thread, until this store closes."""
        key = check_key(key)
        self._check_open()
        since = self._watch_from()
        self._watches.add_revisioned(key, callback, since)

    # ---- the two patterns: read-modify-write and read-or-wait -----------------------------

    def _update(self, key: str, rule: Callable[[KeySpace], T]) -> T:
        """Apply a KeySpace `rule` to `key` atomically; its return value.

        A write holds only if the key is as read; when it is not, the transaction's
        failure branch reads the key again, so a conflict costs one round trip.
        """
        name = self._key(key)
        self._check_open()
        kvs, _, _ = self._etcd.range(name)
        conflicts = 0
        while True:
            current = kvs[0] if kvs else None
            space = KeySpace.from_state({"data": {key: current.value}} if current else {})
            result = rule(space)
            if space.version == 0:
                return result  # the rule wrote nothing
            written, reads, _ = self._etcd.txn(
                [same_revision(name, current.mod_revision if current else 0)],
                [put_op(name, space.get(key))], [range_op(name)])
            if written:
                return result
            self._check_open()
            kvs = reads[0]
            conflicts += 1
            # Writers that collided back off a random while, so that one of them wins
            # the next round instead of all of them failing it again.
            time.sleep(random.uniform(0, min(0.0005 * conflicts, 0.005)))

    def _read_all(self, keys: Sequence[str]) -> Attempt:
        """`keys`' values read in one transaction (an `Attempt`: None if any is missing)."""
        self._check_open()
        if not keys:
            return [], 0, []
        _, reads, revision = self._etcd.txn([], [range_op(self._key(k)) for k in keys])
        missing = [k for k, kvs in zip(keys, reads) if not kvs]
        if missing:
            return None, revision, missing
        return [kvs[0].value for kvs in reads], revision, []

    def _block(self, attempt: Callable[[], Attempt], operation: str, keys: List[str],
               timeout: float, watched: Optional[bytes] = None) -> T:
        """`attempt()` until it answers, woken by changes under `watched` (the plain keys
        by default) from the revision it read; StoreTimeoutError naming what is missing
        once `timeout` seconds pass (0: after one attempt)."""
        changed = threading.Event()
        stops: List[Callable[[], None]] = []
        missing: List[str] = list(keys)

        def attempt_for(seconds: float) -> Tuple[bool, Any]:
            until = time.monotonic() + seconds
            if not stops:  # the first slice reads, then watches from what it read
                result, revision, missing[:] = attempt()
                if result is not None:
                    return True, result
                if seconds <= 0:
                    return False, list(missing)  # a check once needs no watch
                start = watched or self._layout.keys
                stops.append(self._etcd.watch(start, prefix_end(start), revision + 1,
                                              lambda event: changed.set()))
            while True:
                remaining = until - time.monotonic()
                if remaining <= 0:
                    return False, list(missing)
                # Bounded slices, so that a close() from another thread is noticed.
                if changed.wait(min(remaining, 1.0)):
                    changed.clear()
                    result, _, missing[:] = attempt()
                    if result is not None:
                        return True, result
                self._check_open()

        try:
            return block(attempt_for, operation, keys, timeout,
                         where=f"{self.endpoint} {self.prefix}")
        finally:
            for stop in stops:
                stop()

    # ---- lifecycle --------------------------------------------------------------------

    def _ephemeral_lease(self) -> int:
        return self._session.lease(self._ephemeral_ttl)

    def clone(self) -> "EtcdStore":
        return EtcdStore(self.endpoint, self.prefix, self.timeout_seconds,
                         ephemeral_ttl=self._ephemeral_ttl,
                         max_request_bytes=self._etcd.max_request_bytes)

    def close(self) -> None:
        """Stop watches and the lease's keep-alive; this client's ephemeral keys go now."""
        self._session.close()
        self._watches.close()
