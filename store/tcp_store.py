"""`TCPStore`: a client of a store server actor, which it hosts itself when `is_master`.

Each operation is one request/reply on the calling thread's own connection
(`actors.runtime.Channel`). Blocking operations are timed on the server, which
answers StoreTimeoutError at the deadline; the client waits a little longer for
that answer. A lost server fails every call at once with StoreConnectionError.

Watch pushes and ephemeral keys go over one long-lived session connection (a
client-only actor made on first use), so an ephemeral key lives exactly as long as
this client: `close()`, a killed process or a hung one (missed transport heartbeats)
ends the session and the server deletes the key.

Requests are pickled, except in a safe-mode process (which must not load the
pickled replies) and against a safe-mode server (which refuses pickles: the first
refusal switches the client to JSON for good); both codecs carry every operation.

A dropped TCPStore releases everything it holds: its channel and the server and
session actors stop through their own finalizers (no thread references the store),
and its finalizer ends the watch callbacks' thread.
"""
from __future__ import annotations

import threading
import time
import weakref
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional, Sequence

from actors.runtime import (Actor, ActorStoppedError, Kind, PeerLostError, RequestTimeoutError,
                            SafeModeError)
from actors.runtime.io.channel import Channel
from actors.runtime.process.log import get_logger
from actors.runtime.process.waits import SlowWait
from actors.runtime.protocol.serialization import pickle_allowed
from store.base import (Store, Timeout, Value, WatchCallback, check_amount, check_key,
                        check_keys, check_values, to_bytes)
from store.errors import StoreConnectionError, StoreError, StoreTimeoutError
from store.keyspace import INTERNAL_PREFIX
from store.quorum import ArriveAgain, arrive_again_if_changed, quorum_wait_text
from store.server import StoreServer
from store.tcp_servers import resolve, servers
from store.waiting import Attempt, block, wait_keys
from store.watch import WatchDispatcher

log = get_logger(__name__)

_JOINED_KEY = INTERNAL_PREFIX + "tcpstore/joined"
_READY_KEY = INTERNAL_PREFIX + "tcpstore/ready"
# How much longer than the server's deadline a client waits for the timeout answer.
_REPLY_GRACE = 5.0


class TCPStore(Store):
    """A store served over TCP by a `StoreServer` actor.

    `port=0` with `is_master=True` picks a free port (`store.port` tells it). With
    `world_size` and `wait_for_workers`, the master waits until `world_size` clients
    (itself included) have joined and raises StoreTimeoutError saying how many did.
    A port already in use raises AddressInUseError (an OSError), unless `multi_tenant`
    and this process already serves it: then the master joins that server.
    `use_libuv` is accepted and ignored (torch's choice of server loop); a
    `master_listen_fd` is refused with ValueError.
    """

    def __init__(self, host_name: str, port: int, world_size: Optional[int] = None,
                 is_master: bool = False, timeout: Timeout = timedelta(seconds=300),
                 wait_for_workers: bool = True, multi_tenant: bool = False,
                 use_libuv: bool = True, master_listen_fd: Optional[int] = None):
        super().__init__(timeout)
        if master_listen_fd is not None:
            raise ValueError("master_listen_fd is not supported: the server binds its own "
                             "socket; pass port=0 for a free one")
        self.host = host_name
        self._server: Optional[StoreServer] = None
        if is_master:
            self._server = servers.open(resolve(host_name), port, multi_tenant)
            port = self._server.port
        self.port = port
        self.world_size = world_size
        self._address = f"tcp://{resolve(host_name)}:{port}"
        self._json = False  # set once a safe-mode server refused a pickle
        self._channel = Channel(self._address, connect_timeout=self.timeout_seconds)
        self._watch_lock = threading.Lock()
        self._watch_actor: Optional[Actor] = None
        self._watchers: Optional[WatchDispatcher] = None
        self._closed = False  # set under _watch_lock, so that no session starts after close
        try:
            self._connect()
            if world_size is not None:
                self._join(world_size, is_master and wait_for_workers)
        except BaseException:
            self.close()
            raise
        log.info("tcp_store_connected", address=self._address, master=is_master,
                 world_size=world_size)

    @property
    def is_master(self) -> bool:
        """True when this store hosts the server."""
        return self._server is not None

    # ---- connection ---------------------------------------------------------------

    def _connect(self) -> None:
        try:
            self._channel.connect()
        except PeerLostError as exc:
            raise StoreConnectionError(
                f"store server at {self.host}:{self.port} unreachable: {exc.reason}") from None

    def _join(self, world_size: int, wait: bool) -> None:
        joined = self.add(_JOINED_KEY, 1)
        if joined == world_size:
            self.set(_READY_KEY, b"1")
        if not wait:
            return
        try:
            wait_keys(self, [_READY_KEY], self.timeout_seconds,
                      lambda: f"TCPStore at {self.host}:{self.port}: "
                              f"{self.add(_JOINED_KEY, 0)} of {world_size} workers joined")
        except StoreTimeoutError:
            joined = self.add(_JOINED_KEY, 0)
            raise StoreTimeoutError(
                "wait_for_workers", [_READY_KEY], self.timeout_seconds,
                detail=f"{joined} of {world_size} workers joined") from None

    def _call(self, kind: Kind, payload: dict, blocking_timeout: Optional[float] = None,
              waiting: Optional[Callable[[], Any]] = None,
              stray: Optional[Callable[[int, Any], Any]] = None) -> Any:
        """One request/reply; blocking operations get the grace beyond their server deadline.
        `waiting()` runs now and then while the reply is awaited; `stray` is given the
        replies to this thread's abandoned calls (`Channel.call`)."""
        wait = self.timeout_seconds if blocking_timeout is None else blocking_timeout + _REPLY_GRACE
        try:
            return self._in_server_codec(lambda json: self._channel.call(
                kind, payload, wait, json=json, waiting=waiting, stray=stray))
        except ActorStoppedError:
            raise self._closed_error() from None
        except PeerLostError as exc:
            raise StoreConnectionError(
                f"store server at {self.host}:{self.port} lost: {exc.reason}") from None
        except RequestTimeoutError:
            raise StoreConnectionError(
                f"store server at {self.host}:{self.port} did not answer "
                f"{kind.name} within {wait:g}s") from None

    def _closed_error(self) -> StoreError:
        return StoreError(f"TCPStore {self.host}:{self.port} is closed")

    def _blocking(self, kind: Kind, payload: dict, operation: str, keys: List[str],
                  timeout: float) -> Any:
        """A blocking operation, asked of the server in slices that end when a report of
        the wait is due; each slice's timeout answer names the keys still missing."""
        def attempt_for(seconds: float) -> Attempt:
            try:
                return True, self._call(kind, {**payload, "timeout": seconds}, seconds)
            except StoreTimeoutError as exc:
                return False, exc.keys

        return block(attempt_for, operation, keys, timeout, where=f"{self.host}:{self.port}")

    def _in_server_codec(self, send: Callable[[bool], Any]) -> Any:
        """`send(json)` in the codec the server takes: a safe-mode server refuses pickles."""
        if self._json or not pickle_allowed():
            return send(True)
        try:
            return send(False)
        except SafeModeError as exc:
            if getattr(exc, "remote_traceback", None) is None:
                raise  # refused here, not by the server
            self._json = True
            return send(True)

    # ---- operations ---------------------------------------------------------------

    def set(self, key: str, value: Value) -> None:
        self._call(Kind.STORE_SET, {"key": check_key(key), "value": to_bytes(value)})

    def get(self, key: str) -> bytes:
        key = check_key(key)
        return self._blocking(Kind.STORE_GET, {"key": key}, "get", [key], self.timeout_seconds)

    def add(self, key: str, amount: int) -> int:
        return self._call(Kind.STORE_ADD, {"key": check_key(key), "amount": check_amount(amount)})

    def compare_set(self, key: str, expected: Value, desired: Value) -> bytes:
        return self._call(Kind.STORE_COMPARE_SET, {
            "key": check_key(key), "expected": to_bytes(expected, "expected"),
            "desired": to_bytes(desired, "desired")})

    def delete_key(self, key: str) -> bool:
        return self._call(Kind.STORE_DELETE_KEY, {"key": check_key(key)})

    def check(self, keys: Sequence[str]) -> bool:
        return self._call(Kind.STORE_CHECK, {"keys": check_keys(keys)})

    def num_keys(self) -> int:
        return self._call(Kind.STORE_NUM_KEYS, {})

    def list_keys(self) -> List[str]:
        return self._call(Kind.STORE_LIST_KEYS, {})

    def clone(self) -> "TCPStore":
        """A new client of the same server (closing it leaves the server running).

        A clone is another handle of this worker, not another worker: it does not
        count towards `world_size` (torch's clone does not join either)."""
        clone = TCPStore(self.host, self.port, is_master=False, timeout=self.timeout_seconds,
                         wait_for_workers=False)
        clone.world_size = self.world_size
        return clone

    def wait(self, keys: Sequence[str], timeout: Optional[Timeout] = None) -> None:
        keys = check_keys(keys)
        self._blocking(Kind.STORE_WAIT, {"keys": keys}, "wait", keys,
                       self._timeout_or_default(timeout))

    def multi_get(self, keys: Sequence[str]) -> List[bytes]:
        keys = check_keys(keys)
        return self._blocking(Kind.STORE_MULTI_GET, {"keys": keys}, "multi_get", keys,
                              self.timeout_seconds)

    def multi_set(self, keys: Sequence[str], values: Sequence[Value]) -> None:
        keys = check_keys(keys)
        self._call(Kind.STORE_MULTI_SET, {"keys": keys, "values": check_values(values, len(keys))})

    def append(self, key: str, value: Value) -> None:
        self._call(Kind.STORE_APPEND, {"key": check_key(key), "value": to_bytes(value)})

    def queue_push(self, key: str, value: Value) -> None:
        self._call(Kind.STORE_QUEUE_PUSH, {"key": check_key(key), "value": to_bytes(value)})

    def queue_pop(self, key: str, block: bool = True, timeout: Optional[Timeout] = None) -> bytes:
        """Pop the oldest item; a pop interrupted by an exception of the caller's own
        (KeyboardInterrupt, a signal handler's) takes no item (see `_withdraw_pop`)."""
        key, seconds = check_key(key), self._timeout_or_default(timeout)
        try:
            if not block:
                return self._call(Kind.STORE_QUEUE_POP,
                                  {"key": key, "block": False, "timeout": seconds}, seconds)
            return self._blocking(Kind.STORE_QUEUE_POP, {"key": key, "block": True},
                                  "queue_pop", [key], seconds)
        except StoreConnectionError:
            # The server did not answer in time (its pop may still be parked), or the
            # connection is gone (the server drops the pop, and the withdrawal fails).
            self._withdraw_pop(key)
            raise
        except StoreError:
            raise  # the server's answer
        except BaseException:
            self._withdraw_pop(key)
            raise

    def _withdraw_pop(self, key: str) -> None:
        """Withdraw this thread's abandoned pop of `key` from the server, and put back at
        the front of the queue an item the server handed it meanwhile: one connection
        keeps its order, so such an item arrives before the withdrawal's answer."""
        handed: List[bytes] = []

        def stray(kind: int, item: Any) -> None:
            if kind == Kind.STORE_QUEUE_POP:
                handed.append(item)
        try:
            self._call(Kind.STORE_QUEUE_POP, {"key": key, "withdraw": True}, stray=stray)
            for item in reversed(handed):
                self._call(Kind.STORE_QUEUE_PUSH, {"key": key, "value": item, "front": True})
        except StoreError as exc:  # a connection gone: the server drops the pop itself
            log.info("queue_pop_withdraw_failed", key=key, error=str(exc))

    def queue_len(self, key: str) -> int:
        return self._call(Kind.STORE_QUEUE_LEN, {"key": check_key(key)})

    def quorum(self, name: str, member: str, data: Value = b"", *, count: Optional[int] = None,
               expect: Optional[Sequence[str]] = None, min_size: Optional[int] = None,
               timeout: Optional[Timeout] = None,
               expect_now: Optional[Callable[[], Sequence[str]]] = None) -> Dict[str, bytes]:
        """One `STORE_QUORUM` request, answered when the round is released (see
        `Store.quorum`), and one more each time `expect_now()` changes; a member whose
        connection drops is withdrawn from the round, which stops waiting for it by
        name until it arrives again."""
        seconds = self._timeout_or_default(timeout)
        payload = {"key": check_key(name), "member": check_key(member, "member"),
                   "data": to_bytes(data, "data"), "timeout": seconds}
        for field, value in (("count", count), ("min_size", min_size)):
            if value is not None:
                payload[field] = value
        if expect is not None:
            payload["expect"] = check_keys(expect, "expect")
        deadline = time.monotonic() + seconds

        def text() -> str:
            return quorum_wait_text(payload["key"], payload["member"], count,
                                    payload.get("expect"), min_size)

        def waiting() -> None:
            report.tick()
            if expect_now is not None and "expect" in payload:
                arrive_again_if_changed(payload, expect_now)

        # One request per arrival, never sliced: a slice's deadline would release a
        # round with min_size. The report says what this member asked for.
        with SlowWait(text) as report:
            while True:
                try:
                    return self._call(Kind.STORE_QUORUM, payload, payload["timeout"], waiting)
                except ArriveAgain as again:
                    # The server answers the replaced arrival with an error this
                    # connection drops as the late reply of an abandoned call.
                    payload["expect"] = again.expect
                    payload["timeout"] = max(0.0, deadline - time.monotonic())

    def set_ephemeral(self, key: str, value: Value) -> None:
        """Set `key`, owned by this client's session: deleted when the session ends.

        The server deletes the key (waiters and watchers see a delete) once this
        client's session connection closes or misses its transport heartbeats (~4 s).
        A later plain `set` or `delete_key` of the key, by anyone, makes it ordinary.
        """
        payload = {"key": check_key(key), "value": to_bytes(value)}
        self._session_call(Kind.STORE_SET_EPHEMERAL, payload, f"set_ephemeral({key!r})")

    def watch_key(self, key: str, callback: WatchCallback) -> None:
        """Register `callback(old, new)`; the server pushes each change, nothing polls."""
        key = check_key(key)
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        with self._watch_lock:
            self._session()
            already_pushed = self._watchers.watched(key)
            self._watchers.add(key, callback)
            if already_pushed:
                return
        self._session_call(Kind.STORE_WATCH_KEY, {"key": key}, f"watch_key({key!r})")

    def _session(self) -> Actor:
        """The long-lived session actor, started on first use (call under `_watch_lock`)."""
        if self._closed:
            raise self._closed_error()
        if self._watch_actor is None:
            self._watchers = watchers = WatchDispatcher("actorgrad-tcpstore-watch")
            weakref.finalize(self, watchers.stopper()).atexit = False
            self._watch_actor = Actor(None, name="store-session", num_worker_threads=1)
            # The session's threads must not keep the dispatcher, whose callbacks
            # may refer to this store, alive: they reach it through a weak reference.
            dispatcher = weakref.ref(watchers)

            def deliver(msg: Any) -> None:
                found = dispatcher()
                if found is not None:
                    found.notify(msg.payload["key"], msg.payload["old"], msg.payload["new"])

            self._watch_actor.on_push(Kind.STORE_WATCH_EVENT, deliver)
            self._watch_actor.start()
        return self._watch_actor

    def _session_call(self, kind: Kind, payload: dict, what: str) -> Any:
        with self._watch_lock:
            session = self._session()
        try:
            return self._in_server_codec(lambda json: session.request(
                self._address, kind, payload, self.timeout_seconds, json=json
            ).wait(self.timeout_seconds + _REPLY_GRACE))
        except ActorStoppedError:
            raise self._closed_error() from None
        except (PeerLostError, RequestTimeoutError) as exc:
            raise StoreConnectionError(f"{what} failed: {exc}") from None

    def close(self) -> None:
        """Close the connections; a master also stops its server. Calls blocked in
        other threads, and every later call, fail with StoreError; closing twice is
        harmless."""
        with self._watch_lock:
            if self._closed:
                return
            self._closed = True
            session, self._watch_actor = self._watch_actor, None
        if session is not None:
            session.stop()
            self._watchers.close()
        # Before the server stops, so that blocked calls fail as closed, not as lost.
        self._channel.close()
        if self._server is not None:
            servers.release(self._server)
            self._server = None
