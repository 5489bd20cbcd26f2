"""`RpcAgent`: one worker of an RPC world, an actor that runs functions for its peers.

Calls travel as `RPC_CALL` messages holding ``(fn, args, kwargs, caller_rank,
meta)``; the callee runs them on its worker pool inside the context managers its
hooks return, and replies ``(value, meta)`` (that half is `callee.Callee`).
`RPC_REMOTE` does the same but keeps the value in the owner table and replies only
when it exists. Functions marked `async_execution` return a Future: the reply waits
for it, the worker thread does not. Services (`services.py`) are kinds of their own,
served the same way without the hooks. Leaving the world is `leaving.Leaving`.
"""
from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, Dict, Optional, Set, Tuple

from actors.runtime import (Actor, ActorStoppedError, Future, Kind, PeerLostError,
                            ProtocolError, RequestTimeoutError, SafeModeError)
from actors.runtime.io.channel import Channel
from actors.runtime.concurrency.futures import failed
from actors.runtime.introspection import status
from actors.runtime.introspection.status import dump_recorder
from actors.runtime.process.log import get_logger
from actors.runtime.protocol.serialization import pickle_allowed
from store.base import Store

from actors.debug.directory import publish

from . import hooks as hook_registry
from . import services
from .callee import Callee
from .leaving import Leaving
from .named import serve_named_call
from .directory import Destination, WorkerDirectory, WorkerInfo
from .errors import WorkerLostError
from .failures import lost_here, name_raiser, raised_here, timed_out
from .hooks import RpcEnvelope
from .inflight import calls_status
from .owners import OwnerTable
from .sending import Sending
from .world import join_world

log = get_logger(__name__)

_CONNECT_TIMEOUT = 5.0
# How long a caller whose connection closed has to answer before it counts as lost.
_CALLER_CHECK_TIMEOUT = 5.0
# How long joining may take when calls have no default timeout (0), as torch's
# rendezvous, which does not use the RPC timeout, allows by default.
INIT_TIMEOUT = 1800.0


class RpcAgent(Callee, Leaving):
    """This process's worker: its actor, the world directory, owned RRef values."""

    def __init__(self, name: str, rank: int, world_size: int, store: Store, host: str,
                 timeout: float, num_worker_threads: int):
        self.name, self.rank, self.world_size = name, rank, world_size
        self.store = store
        self.timeout = timeout  # the calls' default; 0: none
        self.init_timeout = timeout or INIT_TIMEOUT
        self.owners = OwnerTable()
        self._withdraw: Callable[[], None] = lambda: None  # see publish_introspection
        self._ids = itertools.count(1)
        self._lost: Set[str] = set()
        self._lost_written: Set[str] = set()  # those of `_lost` in the store (`_lost_ranks`)
        self._outstanding = 0  # calls sent from here and not answered, under `_lock`
        self._idle_waiters = 0  # threads in `wait_idle`, under `_lock`
        self._leaving = False
        self._channels: Dict[int, Channel] = {}
        self._lock = threading.Lock()  # the call count and the table of channels
        self._idle = threading.Condition(self._lock)
        self.actor = Actor(f"tcp://{host}:0", name=name, num_worker_threads=num_worker_threads,
                           workers_receive=True)
        # Pickled kinds only: their payloads hold Python objects, and a JSON client
        # that could send them would reach the owner table too.
        self.actor.register(Kind.RPC_CALL, self._serve_call, json=False)
        self.actor.register(Kind.RPC_REMOTE, self._serve_remote, inline=True, json=False)
        self.actor.register(Kind.RPC_CALL_NAMED, serve_named_call)
        self.actor.register(Kind.RREF_FORK, lambda msg: self.owners.add(*msg.payload) and None,
                            inline=True, json=False)
        self.actor.register(Kind.RREF_DELETE, lambda msg: self.owners.remove(*msg.payload),
                            inline=True, json=False)
        self.actor.register(Kind.RREF_REJECTED, lambda msg: self.owners.reject(*msg.payload),
                            inline=True, json=False)
        for kind, handler in services.services().items():
            self.serve(kind, handler)
        self.actor.on_peer_lost(self._on_peer_lost)
        # Callers are noticed too: a worker that only ever called us is lost when the
        # connection it called on closes and it no longer answers.
        self._sender_ranks: Dict[bytes, int] = {}
        self.actor.on_sender_lost(self._on_sender_lost)
        self.info = WorkerInfo(name, rank)
        self.directory: Optional[WorkerDirectory] = None
        self._joined = threading.Event()

    def join(self) -> None:
        """Start serving and wait until the whole world has registered in the store."""
        self.actor.start()
        try:
            self.directory = join_world(self.store, self.name, self.rank, self.world_size,
                                        self.actor.address, self.init_timeout)
            self._joined.set()
        except BaseException:
            self.actor.stop()
            raise
        status.add_section("rpc", self._status)
        log.info("rpc_worker_joined", worker=self.name, rank=self.rank,
                 world_size=self.world_size, address=self.actor.address)

    def publish_introspection(self, job_store: Store) -> None:
        """Answer introspection on the I/O thread and say where in `job_store`."""
        host = self.actor.address.rsplit(":", 1)[0][len("tcp://"):]
        self._withdraw = publish(job_store, "rpc", self.actor.serve_introspection(host),
                                 self.name, self.rank)

    def _status(self) -> dict:
        return {"name": self.name, "rank": self.rank, "world_size": self.world_size,
                **calls_status(self.actor.requests_in_flight(),
                               [call for channel in list(self._channels.values())
                                for call in channel.calls_waiting()],
                               self.actor.requests_being_served(), self._worker_at,
                               self._worker_ranked)}

    def _worker_ranked(self, rank: int) -> Optional[str]:
        try:
            return self.directory.resolve(rank).name
        except (TypeError, ValueError):  # not a worker of this world
            return None

    def _worker_at(self, address: str) -> Optional[str]:
        try:
            return self.directory.by_address(address).name
        except ValueError:  # not a worker of this world: shown by its address
            return None

    # ---- ids ----------------------------------------------------------------------

    def new_id(self) -> int:
        """A globally unique id: ``(rank << 48) | counter``."""
        return (self.rank << 48) | next(self._ids)

    # ---- calls --------------------------------------------------------------------

    def _outgoing(self, to: Destination, fn: Callable, args: tuple, kwargs: dict
                  ) -> Tuple[WorkerInfo, tuple, dict]:
        """Resolve the destination and run the request hooks: (peer, payload, meta)."""
        if not pickle_allowed():
            raise SafeModeError(
                f"this worker runs in safe mode (allow_pickle=False): calls of Python "
                f"functions travel as pickles, which it does not load; call {fn!r} by name "
                f"from a JSON client instead (actors.expose, actors.ExposedClient)")
        info = self._peer(to)
        if hook_registry.all_idle():
            meta: dict = {}
            return info, (fn, tuple(args), kwargs or {}, self.rank, meta), meta
        envelope = RpcEnvelope((tuple(args), kwargs or {}), info)
        for _, hook in hook_registry.hooks():
            hook.request_sent(envelope)
        call_args, call_kwargs = envelope.payload
        return info, (fn, call_args, call_kwargs, self.rank, envelope.meta), envelope.meta

    def call(self, to: Destination, fn: Callable, args: tuple, kwargs: dict,
             timeout: Optional[float], *, remote: Optional[tuple] = None) -> Future:
        """Send `fn(*args, **kwargs)` to `to`; the future holds its value.

        With `remote=(rref_id, fork_id)` the callee keeps the value as an RRef owner and
        the future completes once it exists.
        """
        try:
            info, payload, meta = self._outgoing(to, fn, args, kwargs)
        except WorkerLostError as exc:
            return failed(exc)
        kind = Kind.RPC_CALL
        if remote is not None:
            kind, payload = Kind.RPC_REMOTE, payload + remote
        return self._request(info, kind, payload, timeout,
                             lambda reply: self._response(*reply, info, meta))

    def call_sync(self, to: Destination, fn: Callable, args: tuple, kwargs: dict,
                  timeout: Optional[float]) -> Any:
        """`call(...).wait()`, sent and received on this thread's own connection.

        A blocked caller gains nothing from handing its message to the I/O thread and
        back, so the round trip skips both hand-offs.
        """
        info, payload, meta = self._outgoing(to, fn, args, kwargs)
        value, reply_meta = self._request_here(info, Kind.RPC_CALL, payload, timeout)
        return self._response(value, reply_meta, info, meta)

    def notify(self, to: Destination, fn: Callable, args: tuple, kwargs: dict) -> None:
        """Run `fn(*args, **kwargs)` on `to` with no reply: fire and forget.

        Failures on the callee are logged there; a lost worker is skipped silently.
        """
        try:
            info, payload, _ = self._outgoing(to, fn, args, kwargs)
        except WorkerLostError:
            return
        with self._sending(info):
            self._notify(info, Kind.RPC_CALL, payload)

    def call_service(self, to: Destination, kind: int, payload: Any,
                     timeout: Optional[float]) -> Any:
        return self._request_here(self._peer(to), kind, (self.rank, payload), timeout)

    def call_service_async(self, to: Destination, kind: int, payload: Any,
                           timeout: Optional[float]) -> Future:
        try:
            info = self._peer(to)
        except WorkerLostError as exc:
            return failed(exc)
        return self._request(info, kind, (self.rank, payload), timeout)

    def notify_service(self, to: Destination, kind: int, payload: Any) -> None:
        try:
            info = self._peer(to)
        except WorkerLostError:
            return
        self._notify(info, kind, (self.rank, payload))

    def _notify(self, info: WorkerInfo, kind: int, payload: Any) -> None:
        """A one-way message to `info`; one whose connection is refused is lost, silently."""
        address = self.directory.address(info)
        try:
            self.actor.notify(address, kind, payload)
        except PeerLostError as exc:
            self.actor.report_lost(address, exc.reason)

    def _sending(self, info: WorkerInfo) -> Sending:
        return Sending(info, self.directory.runs_this_script(info))

    def _peer(self, to: Destination) -> WorkerInfo:
        info = self.directory.resolve(to)
        if info.name in self._lost:
            raise WorkerLostError(info.name, "the worker was lost earlier")
        return info

    def _request(self, info: WorkerInfo, kind: int, payload: Any, timeout: Optional[float],
                 then: Optional[Callable[[Any], Any]] = None) -> Future:
        """Send a request through the I/O thread. The future holds the reply's payload
        (`then(payload)` when given) or the error that ended the request, a lost
        connection as WorkerLostError; the call counts as in flight until it does."""
        what = _called(kind, payload)
        seconds = self.timeout if timeout is None else timeout

        def settle(value: Any, exc: Optional[BaseException]) -> Any:
            value = self._settled(value, exc, info, what, seconds)
            return value if then is None else then(value)

        self._track(+1)  # before the reply can settle it, on the I/O thread
        try:
            with self._sending(info):
                return self.actor.request(self.directory.address(info), kind, payload,
                                          seconds or None,
                                          same_host=self.directory.shares_host(info),
                                          what=what, settle=settle)
        except BaseException:  # not sent, and never settled
            self._track(-1)
            raise

    def _settled(self, value: Any, exc: Optional[BaseException], peer: WorkerInfo,
                 what: Any, seconds: float) -> Any:
        """The reply of a `_request` (or the error that ended it), with a lost
        connection as WorkerLostError and a timeout naming the worker and what it
        called; the call is no longer in flight."""
        self._track(-1)
        if lost_here(exc):
            raise WorkerLostError(peer.name, exc.reason) from None
        if raised_here(exc, RequestTimeoutError):
            raise timed_out(peer, what, seconds) from None
        if exc is not None:
            name_raiser(exc, peer)
            raise exc
        return value

    def _request_here(self, info: WorkerInfo, kind: int, payload: Any,
                      timeout: Optional[float]) -> Any:
        """Send a request and wait for its reply on this thread's own connection."""
        seconds = self.timeout if timeout is None else timeout
        channel = self._channel(info)
        what = _called(kind, payload)
        self._track(+1)
        try:
            with self._sending(info):
                return channel.call(kind, payload, seconds or None,
                                    same_host=self.directory.shares_host(info), what=what)
        except Exception as exc:
            if lost_here(exc):
                self.actor.report_lost(self.directory.address(info), exc.reason)
                raise WorkerLostError(info.name, exc.reason) from None
            if raised_here(exc, RequestTimeoutError):
                raise timed_out(info, what, seconds) from None
            name_raiser(exc, info)
            raise
        finally:
            self._track(-1)

    def _channel(self, info: WorkerInfo) -> Channel:
        channel = self._channels.get(info.id)
        if channel is None:
            with self._lock:
                channel = self._channels.get(info.id)
                if channel is None:
                    # Every worker of the world listens before it registers: a peer
                    # that cannot be reached soon is gone.
                    channel = Channel(self.directory.address(info),
                                      connect_timeout=min(self.init_timeout, _CONNECT_TIMEOUT))
                    self._channels[info.id] = channel
        return channel

    @staticmethod
    def _response(value: Any, meta: dict, peer: WorkerInfo, request_meta: dict) -> Any:
        if not meta and not request_meta and hook_registry.all_idle():
            return value
        envelope = RpcEnvelope(value, peer, meta, request_meta)
        for _, hook in hook_registry.hooks():
            hook.response_received(envelope)
        return envelope.payload

    def _track(self, delta: int) -> None:
        with self._lock:  # the plain lock: entering the Condition runs Python
            self._outstanding += delta
            if not self._outstanding and self._idle_waiters:
                self._idle.notify_all()

    def _mark_lost(self, peer: WorkerInfo) -> None:
        if peer.name not in self._lost:
            self._lost.add(peer.name)
            # While everyone leaves, peers going away is expected: no warning then.
            (log.info if self._leaving else log.warning)(
                "rpc_worker_lost", worker=self.name, lost=peer.name)
            if not self._leaving:
                dump_recorder("worker_lost")
            for _, hook in hook_registry.hooks():
                hook.worker_lost(peer)

    def _on_sender_lost(self, identity: bytes) -> None:
        rank = self._sender_ranks.pop(identity, None)
        if rank is not None and self.directory is not None and rank != self.rank \
                and self.directory.resolve(rank).name not in self._lost:
            # A caller has a connection per calling thread, and one closes whenever
            # such a thread ends: the caller is asked, and is lost only if it does
            # not answer (a refused connection is reported by the request itself).
            address = self.directory.address(self.directory.resolve(rank))
            try:
                answer = self.actor.request(address, Kind.PING, None, _CALLER_CHECK_TIMEOUT)
            except ActorStoppedError:  # this worker left meanwhile: nobody to tell
                return
            answer.add_done_callback(lambda done: self._caller_checked(address, done))

    def _caller_checked(self, address: str, answer: Future) -> None:
        if raised_here(answer.exception(), RequestTimeoutError):
            self.actor.report_lost(address, f"its connection to this worker closed and it "
                                            f"did not answer within {_CALLER_CHECK_TIMEOUT:g}s")

    def _on_peer_lost(self, address: str) -> None:
        try:
            self._mark_lost(self.directory.by_address(address))
        except (AttributeError, ValueError):
            pass

    # ---- RRef bookkeeping ---------------------------------------------------------

    def fork(self, owner: WorkerInfo, rref_id: int) -> int:
        """Register a new holder of an RRef with its owner, before the RRef is sent on."""
        fork_id = self.new_id()
        if owner.id == self.rank:
            self.owners.add(rref_id, fork_id)
        else:
            self.actor.notify(self.directory.address(owner), Kind.RREF_FORK, (rref_id, fork_id))
        return fork_id

    def report_rejection(self, owner: WorkerInfo, rref_id: int, fork_id: int,
                         created: Future) -> None:
        """Once `created`, a `remote()` call, has failed with a `ProtocolError` (the owner
        refused it unrun, so it never registered this fork or made the value), tell the
        owner: its fetches of the value then fail at once instead of waiting out their
        timeouts, and this fork's later deletion balances the count."""
        exc = created.exception()
        if not isinstance(exc, ProtocolError):
            return
        if owner.id == self.rank:
            self.owners.reject(rref_id, fork_id, str(exc))
        elif owner.name not in self._lost:
            try:
                self.actor.notify(self.directory.address(owner), Kind.RREF_REJECTED,
                                  (rref_id, fork_id, str(exc)))
            except ActorStoppedError:
                pass  # this worker left meanwhile, and the owner's wait ends with its own

    def release(self, owner: WorkerInfo, rref_id: int, fork_id: int) -> None:
        if owner.id == self.rank:
            self.owners.remove(rref_id, fork_id)
        elif owner.name not in self._lost:
            self.actor.notify(self.directory.address(owner), Kind.RREF_DELETE, (rref_id, fork_id))


def _called(kind: int, payload: Any) -> Any:
    """What a request calls: its function for a call, else its kind."""
    return payload[0] if kind in (Kind.RPC_CALL, Kind.RPC_REMOTE) else kind
