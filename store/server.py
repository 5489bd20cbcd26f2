"""The TCPStore server: an actor whose handlers apply store operations to one KeySpace.

Every handler runs inline on the mailbox thread (no operation blocks it), so the
KeySpace needs no lock. A blocking operation whose keys are missing is parked as a
`_Waiter` and answered from the change hook the moment its keys exist, or with a
StoreTimeoutError when its deadline passes. Watchers get `STORE_WATCH_EVENT` pushes.

Ephemeral keys (`STORE_SET_EPHEMERAL`) are owned by the connection that set them,
like etcd leases or ZooKeeper ephemeral nodes: when the runtime reports that sender
lost (connection closed, or ZMTP heartbeats missed), its keys are deleted through
the KeySpace, so waiters and watchers hear of it like of any delete.

`StoreServer` is what callers hold: the actor and the `StoreService` that handles
its requests. The service's handlers reference the actor's core, never the
`StoreServer`, so a dropped server stops (see `actors.runtime.actor`).

Run on its own with ``python -m store.server --host H --port P``.
"""
from __future__ import annotations

import argparse
import collections
import signal
import sys
import threading
from typing import Any, Callable, Deque, Dict, List, Optional, Set

from actors.runtime import Actor, ActorCore, Future, Kind, Message, ProtocolError
from actors.runtime.process.log import get_logger, say
from actors.runtime.protocol.serialization import allow_pickle
from store.base import check_amount, check_key, check_keys, check_values, to_bytes
from store.errors import QueueEmptyError, StoreError, StoreTimeoutError
from store.keyspace import KeySpace
from store.quorum_rounds import QuorumRounds

log = get_logger(__name__)


class _Waiter:
    """A parked request: it completes with `answer()` once none of `keys` is missing."""

    __slots__ = ("operation", "keys", "answer", "future", "timer", "parked_on", "msg")

    def __init__(self, operation: str, keys: List[str], answer: Callable[[], Any],
                 msg: Optional[Message] = None):
        self.operation, self.keys, self.answer, self.msg = operation, keys, answer, msg
        self.future = Future()
        self.timer = None
        self.parked_on = keys[0]  # the key under which it waits in its registry


class StoreServer:
    """The store server actor, bound at ``tcp://host:port`` (port 0 picks a free one)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self._actor = Actor(f"tcp://{host}:{port}", name="store-server", num_worker_threads=1)
        self.service = StoreService(self._actor.core)

    @property
    def address(self) -> str:
        return self._actor.address

    @property
    def port(self) -> int:
        return self._actor.port

    def start(self) -> "StoreServer":
        self._actor.start()
        log.info("store_server_started", address=self.address)
        return self

    def stop(self) -> None:
        self._actor.stop()
        log.info("store_server_stopped", address=self.address)


class StoreService:
    """The store operations, as handlers of `actor` that apply them to one KeySpace."""

    def __init__(self, actor: ActorCore):
        self._space = KeySpace()
        self._space.on_change = self._on_change
        self._space.on_queue_push = self._on_queue_push
        self._waiting: Dict[str, List[_Waiter]] = {}
        self._poppers: Dict[str, Deque[_Waiter]] = {}
        self._watchers: Dict[str, List[Message]] = {}
        self._ephemeral_owner: Dict[str, bytes] = {}  # key -> identity of its connection
        self._ephemeral_keys: Dict[bytes, Set[str]] = {}  # identity -> the keys it owns
        self.quorums = QuorumRounds(actor.call_later)
        self._actor = actor
        handlers = {
            Kind.STORE_SET: self._set,
            Kind.STORE_GET: self._get,
            Kind.STORE_ADD: self._add,
            Kind.STORE_COMPARE_SET: self._compare_set,
            Kind.STORE_DELETE_KEY: lambda p: self._space.delete(_key(p)),
            Kind.STORE_CHECK: lambda p: self._space.check(_keys(p)),
            Kind.STORE_NUM_KEYS: lambda p: self._space.num_keys(),
            Kind.STORE_LIST_KEYS: lambda p: self._space.list_keys(),
            Kind.STORE_WAIT: self._wait,
            Kind.STORE_MULTI_GET: self._multi_get,
            Kind.STORE_MULTI_SET: self._multi_set,
            Kind.STORE_APPEND: lambda p: self._space.append(_key(p), _value(p, "value")),
            Kind.STORE_QUEUE_PUSH: lambda p: self._space.queue_push(
                _key(p), _value(p, "value"), _field(p, "front", False) is True),
            Kind.STORE_QUEUE_LEN: lambda p: self._space.queue_len(_key(p)),
        }
        for kind, handler in handlers.items():
            self._actor.register(kind, _on_payload(handler), inline=True)
        self._actor.register(Kind.STORE_WATCH_KEY, self._watch_key, inline=True)
        self._actor.register(Kind.STORE_SET_EPHEMERAL, self._set_ephemeral, inline=True)
        self._actor.register(Kind.STORE_QUORUM, self._quorum, inline=True)
        self._actor.register(Kind.STORE_QUEUE_POP, self._queue_pop, inline=True)
        self._actor.on_sender_lost(self._on_sender_lost)

    # ---- operations ---------------------------------------------------------------

    def _set(self, payload: Any) -> None:
        self._space.set(_key(payload), _value(payload, "value"))

    def _add(self, payload: Any) -> int:
        return self._space.add(_key(payload), check_amount(_field(payload, "amount")))

    def _compare_set(self, payload: Any) -> bytes:
        return self._space.compare_set(_key(payload), _value(payload, "expected"),
                                       _value(payload, "desired"))

    def _multi_set(self, payload: Any) -> None:
        keys = _keys(payload)
        self._space.multi_set(keys, check_values(_field(payload, "values"), len(keys)))

    def _get(self, payload: Any) -> Any:
        key = _key(payload)
        return self._when_present("get", [key], _timeout(payload), lambda: self._space.get(key))

    def _wait(self, payload: Any) -> Any:
        return self._when_present("wait", _keys(payload), _timeout(payload), lambda: None)

    def _multi_get(self, payload: Any) -> Any:
        keys = _keys(payload)
        space = self._space
        return self._when_present("multi_get", keys, _timeout(payload),
                                  lambda: [space.get(k) for k in keys])

    def _when_present(self, operation: str, keys: List[str], timeout: Optional[float],
                      answer: Callable[[], Any]) -> Any:
        """Answer now if every key exists, else park the request until they do."""
        missing = self._space.missing(keys)
        if not missing:
            return answer()
        waiter = _Waiter(operation, keys, answer)
        self._park(waiter, missing[0])
        if timeout is not None:
            waiter.timer = self._actor.call_later(timeout, self._expire, waiter, timeout)
        return waiter.future

    def _queue_pop(self, msg: Message) -> Any:
        payload, key = msg.payload, _key(msg.payload)
        if _field(payload, "withdraw", False) is True:
            self._drop_poppers(lambda waiter: waiter.msg.sender == msg.sender
                               and waiter.parked_on == key, "withdrawn by its client")
            return None
        value = self._space.queue_peek(key)
        if value is not None:
            # Answered here, to learn whether the reply left: the item leaves the queue
            # only then (as in _on_queue_push). The future returned never completes.
            if self._actor.reply(msg, value):
                self._space.queue_pop(key)
            return Future()
        if not _field(payload, "block", True):
            raise QueueEmptyError(f"queue {key!r} is empty")
        timeout = _timeout(payload)
        waiter = _Waiter("queue_pop", [key], lambda: None, msg)
        self._poppers.setdefault(key, collections.deque()).append(waiter)
        if timeout is not None:
            waiter.timer = self._actor.call_later(timeout, self._expire, waiter, timeout)
        # Its timeout comes through this future; an item does not (see _on_queue_push).
        return waiter.future

    def _drop_poppers(self, which: Callable[[_Waiter], bool], why: str) -> None:
        """Stop the parked pops `which` selects: no item goes to them any more."""
        for waiter in [w for parked in self._poppers.values() for w in parked if which(w)]:
            self._unpark(waiter)
            if waiter.timer is not None:
                waiter.timer.cancel()
            waiter.future.set_exception(StoreError(f"queue_pop of {waiter.parked_on!r} {why}"))

    def _watch_key(self, msg: Message) -> None:
        self._watchers.setdefault(_key(msg.payload), []).append(msg)

    # ---- quorum rounds (mailbox thread): `store.quorum_rounds` ---------------------

    def _quorum(self, msg: Message) -> Any:
        payload = msg.payload
        expect = _field(payload, "expect", None)
        return self.quorums.arrive(
            _key(payload), check_key(_field(payload, "member"), "member"),
            _value(payload, "data"), msg.sender, count=_count(payload, "count"),
            expect=None if expect is None else check_keys(expect, "expect"),
            min_size=_count(payload, "min_size"), timeout=_timeout(payload))

    # ---- ephemeral keys (mailbox thread) --------------------------------------------

    def _set_ephemeral(self, msg: Message) -> None:
        key, value = _key(msg.payload), _value(msg.payload, "value")
        self._space.set(key, value)  # the change hook releases any previous owner
        self._ephemeral_owner[key] = msg.sender
        self._ephemeral_keys.setdefault(msg.sender, set()).add(key)

    def _release_ephemeral(self, key: str) -> None:
        """`key` was written or deleted: it no longer belongs to a connection."""
        owner = self._ephemeral_owner.pop(key, None)
        if owner is not None:
            keys = self._ephemeral_keys.get(owner)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._ephemeral_keys[owner]

    def _on_sender_lost(self, identity: bytes) -> None:
        """A client connection closed: forget its watches, delete its ephemeral keys."""
        for key in [k for k, watches in self._watchers.items()
                    if any(w.sender == identity for w in watches)]:
            kept = [w for w in self._watchers[key] if w.sender != identity]
            if kept:
                self._watchers[key] = kept
            else:
                del self._watchers[key]
        self.quorums.sender_lost(identity)
        self._drop_poppers(lambda waiter: waiter.msg.sender == identity, "lost its client")
        keys = self._ephemeral_keys.pop(identity, None)
        if not keys:
            return
        log.info("ephemeral_keys_expired", sender=identity.hex(), keys=sorted(keys))
        for key in sorted(keys):
            self._space.delete(key)

    # ---- change hooks (mailbox thread) ----------------------------------------------

    def _on_change(self, key: str, old: Optional[bytes], new: Optional[bytes]) -> None:
        if key in self._ephemeral_owner:
            self._release_ephemeral(key)
        if new is not None and key in self._waiting:
            for waiter in self._waiting.pop(key):
                if waiter.future.done():
                    continue
                missing = self._space.missing(waiter.keys)
                if missing:
                    self._park(waiter, missing[0])
                else:
                    self._settle(waiter, waiter.answer())
        for watch in self._watchers.get(key, ()):
            self._actor.push(watch, Kind.STORE_WATCH_EVENT, {"key": key, "old": old, "new": new})

    def _on_queue_push(self, key: str) -> None:
        """Hand the oldest item to the oldest parked pop. It is answered directly, not
        through its future, to learn whether the reply left: an item leaves the queue
        only then, and one whose popper's connection is gone goes to the next."""
        poppers = self._poppers.get(key)
        while poppers and self._space.queue_len(key):
            waiter = poppers.popleft()
            if waiter.timer is not None:
                waiter.timer.cancel()
            if self._actor.reply(waiter.msg, self._space.queue_peek(key)):
                self._space.queue_pop(key)
        if poppers is not None and not poppers:
            del self._poppers[key]

    def _settle(self, waiter: _Waiter, value: Any) -> None:
        if waiter.timer is not None:
            waiter.timer.cancel()
        waiter.future.set_result(value)

    def _park(self, waiter: _Waiter, key: str) -> None:
        waiter.parked_on = key
        self._waiting.setdefault(key, []).append(waiter)

    def _unpark(self, waiter: _Waiter) -> bool:
        """Take `waiter` out of its registry, and its key too once none waits there, so
        that the registries hold only the keys waited on now; whether it was parked."""
        registry: Dict[str, Any] = \
            self._poppers if waiter.operation == "queue_pop" else self._waiting
        parked = registry.get(waiter.parked_on)
        if parked is None or waiter not in parked:
            return False
        parked.remove(waiter)
        if not parked:
            del registry[waiter.parked_on]
        return True

    def _expire(self, waiter: _Waiter, timeout: float) -> None:
        if waiter.future.done() or not self._unpark(waiter):
            return
        missing = waiter.keys if waiter.operation == "queue_pop" else \
            self._space.missing(waiter.keys)
        waiter.future.set_exception(StoreTimeoutError(waiter.operation, missing, timeout))


def _count(payload: Any, name: str) -> Optional[int]:
    value = _field(payload, name, None)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 1):
        raise TypeError(f"{name} must be a positive integer, got {value!r}")
    return value


def _on_payload(handler: Callable[[Any], Any]) -> Callable[[Message], Any]:
    return lambda msg: handler(msg.payload)


def _field(payload: Any, name: str, default: Any = ...) -> Any:
    if not isinstance(payload, dict):
        raise ProtocolError(f"store request body must be a map, got {type(payload).__name__}")
    if name in payload:
        return payload[name]
    if default is ...:
        raise ProtocolError(f"store request lacks field {name!r}")
    return default


def _key(payload: Any) -> str:
    return check_key(_field(payload, "key"))


def _keys(payload: Any) -> List[str]:
    return check_keys(_field(payload, "keys"))


def _value(payload: Any, name: str) -> bytes:
    return to_bytes(_field(payload, name), name)


def _timeout(payload: Any) -> Optional[float]:
    timeout = _field(payload, "timeout", None)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
        raise TypeError(f"timeout must be seconds (a number), got {type(timeout).__name__}")
    if timeout != timeout:  # JSON clients can send NaN: no deadline compares to it
        raise ValueError("timeout must be a number of seconds, got nan")
    return timeout


def build_parser() -> argparse.ArgumentParser:
    """The options of ``python -m store.server``."""
    parser = argparse.ArgumentParser(
        prog="python -m store.server",
        description="Run an actorgrad TCPStore server on its own, so that the store outlives "
                    "any training process. Clients connect with TCPStore(host, port).")
    parser.add_argument("--host", default="127.0.0.1",
                        help="interface to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=29500,
                        help="port to bind; 0 picks a free one (default: 29500); the "
                             "address is printed once the server listens")
    parser.add_argument("--no-pickle", action="store_true",
                        help="safe mode: never load a pickle from the wire; clients speak "
                             "JSON (TCPStore clients switch to it by themselves) "
                             "(default: off)")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Serve a store until SIGINT or SIGTERM, after printing where it listens."""
    args = build_parser().parse_args(argv)
    if args.no_pickle:
        allow_pickle(False)
    # Before the server serves: a client may finish and a SIGTERM arrive at once.
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server = StoreServer(args.host, args.port).start()
    except OSError as exc:
        log.info("store_server_failed", host=args.host, port=args.port, error=str(exc))
        say("store.server", f"cannot listen on {args.host}:{args.port}: {exc}")
        return 1
    log.info("store_server_serving", host=args.host, port=server.port, safe_mode=args.no_pickle)
    say("store.server", f"listening on {args.host}:{server.port}"
        f"{' (safe mode: JSON only)' if args.no_pickle else ''}; clients: "
        f"TCPStore({args.host!r}, {server.port}); stop with Ctrl-C", sys.stdout)
    while not stop.wait(3600):
        pass
    log.info("store_server_shutting_down", port=server.port)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
