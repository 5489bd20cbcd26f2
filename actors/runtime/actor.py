"""`Actor`: a mailbox plus message handlers, pending requests and a worker pool.

Requests arriving at the actor's `Router` are decoded and dispatched by kind to a
handler, either inline (for handlers that never block, like store operations) or on
the worker pool. Who reads the router is decided once, when the actor is built: the
mailbox's I/O thread, or with ``workers_receive`` the pool's own threads
(`LeaderPool`), so that a request runs on the thread that read it.

A handler's return value is the reply; a returned `Future` is replied when it
completes; an exception becomes an error reply. Malformed or foreign input is
logged and answered with an error, and the actor keeps serving.

**Lifecycle** (`ActorCore`): *setup* in the constructor (bind the router, build the
mailbox and the pool), *running* from `start()`, *teardown* when the mailbox loop has
closed its sockets (`_teardown`, on the I/O thread): the router is closed and every
pending request fails with ActorStoppedError. `close_soon()` only asks for the
teardown and returns at once; `stop()` also waits for the threads.

**Ownership**: the threads run an `ActorCore`; users hold an `Actor`, a handle that
the threads never reference. Dropping the handle runs its finalizer, which calls
`close_soon()`: a dropped actor releases its threads, sockets and port.
"""
from __future__ import annotations

import itertools
import threading
import time
import weakref
from time import monotonic, monotonic_ns
from typing import (Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple,
                    Union)

import zmq

from .process import at_exit

from .protocol import envelope
from .protocol.bounded import text_of
from .protocol.envelope import Message, message_bytes
from .errors import (ActorStoppedError, PeerLostError, ProtocolError, RequestTimeoutError,
                     UnknownKindError)
from .concurrency.futures import Future, failed
from .io.attachments import Attachment, MessageHandler, check_type, open_socket
from .io.context import process_context
from .concurrency.leaders import LeaderPool
from .process.log import get_logger
from .io.mailbox import Mailbox, TimerHandle
from .io.peers import Liveness, Pending, PeerTable
from .protocol import (ERROR, INTROSPECTION_KINDS, JSON, ONEWAY, PROTOCOL_VERSION, PUSH,
                       RESPONSE, Kind, kind_name)
from .io.router import Router
from .concurrency.scheduler import WorkerPool
from .io.security import secure
from .introspection.recorder import (ANSWERED, CALLED, FOLD_INTERVAL, RECEIVED, RECORDING,
                                     SENT, SERVED, TRAFFIC, record)
from .introspection.server import IntrospectionServer
from .introspection import status
from .introspection.status import dump_recorder
from .protocol.remote_errors import exception_from_payload

log = get_logger(__name__)

Handler = Callable[[Message], Any]


class _Registration(NamedTuple):
    fn: Handler
    inline: bool


class ActorCore:
    """The running part of an actor: what its threads execute (see the module doc).

    One ROUTER mailbox at `address` (None: a client-only actor with no mailbox);
    ``tcp://HOST:0`` picks a free port. `workers_receive` lets worker threads read
    requests themselves. `routing_id` is the identity every connection this actor
    opens presents to its peer (the peer's `Message.sender`); None: one per connection
    that ZeroMQ makes up.
    """

    def __init__(self, address: Optional[str] = "tcp://127.0.0.1:0", *, name: str = "actor",
                 num_worker_threads: int = 4, heartbeat: float = 1.0,
                 heartbeat_timeout: float = 3.0, workers_receive: bool = False,
                 routing_id: Optional[bytes] = None):
        self.name = name
        self._handlers: Dict[int, _Registration] = {}
        self._push_handlers: Dict[int, Handler] = {}
        self._peer_lost_callbacks: list = []
        self._sender_lost_callback: Optional[Callable[[bytes], None]] = None
        self._attachments: List[Attachment] = []
        self._introspection: List[IntrospectionServer] = []
        self._req_ids = itertools.count(1)
        self._routing_id = routing_id
        self._expiry: Optional[TimerHandle] = None  # the timer of the earliest deadline
        liveness = Liveness(int(heartbeat * 1000), int(heartbeat_timeout * 1000))
        self._peers = PeerTable(liveness)
        self._router = None if address is None else Router(address, *liveness)
        self._mailbox = Mailbox(name, self._peers, self._on_reply, self._on_peer_lost,
                                self._teardown, routing_id)
        if self._router is not None and workers_receive:
            self._pool: WorkerPool = LeaderPool(num_worker_threads, name, self._router,
                                                self._accept_for_worker, self._mailbox.call_soon,
                                                self._mailbox.call_later)
        else:
            self._pool = WorkerPool(num_worker_threads, name)
            if self._router is not None:
                self._mailbox.read_router(self._router, self._on_request)
        self._started = False
        self._stopped = False
        self._unanswered: Set[Message] = set()  # requests received, not answered
        TRAFFIC.watch(self)
        self.register(Kind.PING, lambda msg: msg.payload, inline=True)

    # ---- lifecycle ----------------------------------------------------------------

    @property
    def address(self) -> Optional[str]:
        """The mailbox's bound address (``tcp://127.0.0.1:PORT`` with the port picked); None without
        one."""
        return None if self._router is None else self._router.address

    @property
    def port(self) -> Optional[int]:
        """The mailbox's TCP port; None without a mailbox or on a non-TCP address."""
        address = self.address
        if address is None or not address.startswith("tcp://"):
            return None
        return int(address.rsplit(":", 1)[1])

    @property
    def pool(self) -> WorkerPool:
        """The worker threads that run this actor's handlers (not inline ones)."""
        return self._pool

    @property
    def started(self) -> bool:
        """Whether `start` has run."""
        return self._started

    def start(self) -> None:
        """Start the I/O thread and the worker threads: from here on the actor serves requests."""
        self._mailbox.start()
        self._pool.start()  # with workers_receive, its threads read the router
        self._started = True
        if RECORDING:
            self._mailbox.call_soon(self._fold_traffic)
        if self.address is not None:
            status.note_mailbox(self.address, self._routing_id)
        at_exit.track(self)
        log.info("actor_started", actor=self.name, address=self.address)

    def close_soon(self) -> None:
        """Ask for the teardown and return at once (what a dropped `Actor` does)."""
        if self._stopped:
            return
        self._stopped = True
        self._pool.close_soon()
        self._mailbox.close_soon()

    def stop(self, timeout: float = 5.0, *, deliver: bool = True) -> None:
        """Tear down and join every thread (each join bounded by `timeout`).

        With `deliver`, first `deliver_sent`, bounded by `timeout` too; an owner that
        confirmed its messages its own way (a leave protocol) passes False.
        """
        if deliver:
            self.deliver_sent(timeout, "stop")
        self.close_soon()
        self._mailbox.stop(timeout)
        self._pool.stop(timeout)

    def deliver_sent(self, timeout: Optional[float], moment: str) -> None:
        """Wait (at most `timeout`, and never over `at_exit.EXIT_FLUSH_TIMEOUT`) until
        every peer has confirmed the messages sent to it; log at warning what stays
        unconfirmed (`messages_maybe_undelivered_at_{moment}`). On the I/O thread, or
        once stopped, it does nothing."""
        if self._started and not self._stopped and not self.in_io_thread():
            bound = at_exit.EXIT_FLUSH_TIMEOUT if timeout is None else min(
                timeout, at_exit.EXIT_FLUSH_TIMEOUT)
            at_exit.confirm_deliveries([self], time.monotonic() + bound, moment)

    def confirm_delivery(self, deadline: float) -> Dict[str, Tuple[int, Future]]:
        """Ask each peer with messages not yet proven delivered for an answer, which
        comes after every earlier message on that connection (a reply to a request
        proves what was sent before it, so a peer that answered needs no asking).

        Returns each such peer with the number of messages in question and the future
        of its answer (the caller waits); nothing once the actor is stopped.
        RequestTimeoutError if the I/O thread does not say whom it sent to by `deadline`
        (monotonic).
        """
        snapshot = Future()
        try:
            self._mailbox.call_soon(lambda: snapshot.set_result(self._peers.take_unproven()))
            counts = snapshot.wait(max(0.0, deadline - time.monotonic()))
        except ActorStoppedError:
            return {}
        answers: Dict[str, Tuple[int, Future]] = {}
        for peer, count in counts.items():
            try:
                answer = self.request(peer, Kind.PING, None,
                                      max(1e-3, deadline - time.monotonic()))
            except ActorStoppedError as exc:
                answer = failed(exc)
            answers[peer] = (count, answer)
        return answers

    def _teardown(self) -> None:
        """The mailbox's sockets are closed: close the router, fail what is pending."""
        self._stopped = True
        for attachment in self._attachments:
            attachment._detach_now()
        if self._router is not None:
            status.forget_mailbox(self._router.address)
            self._router.close()
        for server in self._introspection:
            server.close()
        self._introspection.clear()
        self._fail_requests(lambda p: True, ActorStoppedError(f"actor {self.name} stopped"))
        log.info("actor_stopped", actor=self.name, address=self.address)

    # ---- handlers -----------------------------------------------------------------

    def register(self, kind: int, handler: Handler, *, inline: bool = False) -> None:
        """Serve requests of `kind` with `handler(message)`; `inline` runs it on the I/O thread."""
        self._handlers[int(kind)] = _Registration(handler, inline)

    def on_sender_lost(self, callback: Callable[[bytes], None]) -> None:
        """Call `callback(identity)` on the I/O thread when a sender's connection closes.

        Before `start()`, on an actor with a mailbox; `Message.sender` is the identity
        reported. ZMTP heartbeats close the connection of a sender that stops
        answering, so a hung sender is reported too.
        """
        if self._router is None or self._started:
            raise RuntimeError("on_sender_lost needs an actor with a mailbox, before start()")
        self._sender_lost_callback = callback
        self._mailbox.watch_senders(self._router.track_senders(), self._on_disconnect)

    def _on_disconnect(self, fd: int) -> None:
        for identity in self._router.senders_lost(fd):
            log.info("sender_lost", actor=self.name, sender=identity.hex())
            try:
                self._sender_lost_callback(identity)
            except Exception:  # noqa: BLE001 - one faulty listener must not stop the mailbox
                log.exception("sender_lost_callback_failed", actor=self.name)

    def on_peer_lost(self, callback: Callable[[str], None]) -> None:
        """Call `callback(address)` on the I/O thread when a connection to a peer drops."""
        self._peer_lost_callbacks.append(callback)

    def on_push(self, kind: int, handler: Handler) -> None:
        """Call `handler(message)` on the I/O thread for pushes of `kind` from peers."""
        self._push_handlers[int(kind)] = handler

    # ---- attached sockets ---------------------------------------------------------

    def attach(self, socket_or_endpoint: Union[zmq.Socket, str],
               on_message: Optional[MessageHandler] = None, *, socket_type: Optional[int] = None,
               bind: bool = False, subscribe: Sequence[bytes] = (b"",),
               max_pending: int = 64) -> Attachment:
        """Put a ZeroMQ socket into this actor's loop (see `actors.runtime.io.attachments`).

        Either a socket the caller made from the process's context, bound or
        connected, which it must not touch until `Attachment.detach` hands it back;
        or an endpoint and a `socket_type` (``zmq.PULL``, ...) for a socket the actor
        makes (with the process's security, SUB subscribed to `subscribe`), binds or
        connects, and closes. PULL, SUB, DEALER, PAIR and ROUTER need `on_message`;
        PUSH and PUB only send. ValueError or TypeError for anything else.
        """
        if self._stopped:
            raise ActorStoppedError(f"actor {self.name} is stopped")
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending}")
        if isinstance(socket_or_endpoint, zmq.Socket):
            if socket_type is not None:
                raise TypeError("socket_type goes with an endpoint, not with a socket")
            sock, owned = socket_or_endpoint, False
            check_type(sock.type, on_message)
        elif isinstance(socket_or_endpoint, str) and socket_type is not None:
            check_type(socket_type, on_message)
            sock, owned = open_socket(process_context(), socket_or_endpoint, socket_type, bind,
                                      subscribe, secure), True
        else:
            raise TypeError("attach takes a zmq.Socket, or an endpoint with socket_type")
        attachment = Attachment(self, sock, on_message, owned, max_pending)
        self._attachments.append(attachment)
        if self._started:
            self._mailbox.call_soon(attachment.start)
        else:
            attachment.start()
        log.info("socket_attached", actor=self.name, kind=attachment.kind, owned=owned)
        return attachment

    def watch_socket(self, sock: zmq.Socket, events: int,
                     on_ready: Callable[[int], None]) -> None:
        """The mailbox's `watch`: an attached socket in the poll loop (I/O thread only)."""
        self._mailbox.watch(sock, events, on_ready)

    def in_io_thread(self) -> bool:
        """Whether the calling thread is this actor's I/O thread (where inline handlers and
        reply callbacks run, and nothing may block).
        """
        return self._mailbox.in_io_thread()

    def serve_introspection(self, host: str = "127.0.0.1") -> str:
        """Answer STATUS, STACKS and RECORDER (docs/PROTOCOL.md) on this actor's I/O
        thread, at a new ``tcp://host:port``, returned; the socket closes with the actor.

        The I/O thread answers even while every worker thread is busy or blocked.
        """
        if self._stopped:
            raise ActorStoppedError(f"actor {self.name} is stopped")
        liveness = self._peers.liveness
        server = IntrospectionServer(host, liveness.heartbeat_ms, liveness.timeout_ms)
        self._introspection.append(server)
        if self._started:
            self._mailbox.call_soon(self._mailbox.watch, server.socket, zmq.POLLIN,
                                    server.on_ready)
        else:
            self._mailbox.watch(server.socket, zmq.POLLIN, server.on_ready)
        return server.address

    def open_entries(self) -> list:
        """Flight-recorder entries of what is open here: each request sent and not
        answered yet (its send), each request received and not answered yet (its
        receipt); none once the actor stopped."""
        if self._stopped:
            return []
        return self._peers.open_entries() + [
            (round(msg.received * 1e9), RECEIVED, msg.sender, msg.kind, msg.req_id, 0, msg.size,
             None, None) for msg in self.requests_being_served()]

    def requests_being_served(self) -> List[Message]:
        """The requests received here and not answered yet (empty when introspection is
        off)."""
        return list(self._unanswered)

    def requests_in_flight(self) -> List[Pending]:
        """The requests sent from here that wait for their replies (any thread)."""
        return self._peers.requests()

    # ---- outgoing -----------------------------------------------------------------

    def request(self, peer: str, kind: int, payload: Any = None,
                timeout: Optional[float] = None, *, json: bool = False,
                what: Any = None) -> Future:
        """Send a request to the actor at `peer`; the future holds the reply payload.

        The payload is encoded on the calling thread, so an unpicklable argument raises
        here, before anything is sent. `timeout`: None waits without limit, else
        seconds (0 or less: the request times out as soon as it is sent), as everywhere
        in the runtime. A timeout fails the future with RequestTimeoutError; a lost
        peer with PeerLostError. `what` names what the request calls, in
        `requests_in_flight` and in the flight recorder (default: nothing).
        """
        if self._stopped:
            raise ActorStoppedError(f"actor {self.name} is stopped")
        req_id = next(self._req_ids)
        frames = envelope.encode(kind, req_id, payload, JSON if json else 0)
        future = Future()
        # Taken before it leaves: its receipt must never come first in a timeline.
        now = time.monotonic()
        deadline = None if timeout is None else now + timeout
        # Registered here, not on the I/O thread, so that stop() fails it even if the
        # I/O thread never gets to send it.
        self._peers.register(req_id, Pending(
            future, peer, kind, timeout, what, threading.get_ident(), now, req_id,
            message_bytes(frames) if RECORDING else 0))
        try:
            self._mailbox.call_soon(self._send_request, peer, req_id, frames, deadline)
        except ActorStoppedError:
            self._peers.forget(req_id)
            raise
        return future

    def notify(self, peer: str, kind: int, payload: Any = None) -> None:
        """Send a one-way message to `peer` (no reply, no future)."""
        frames = envelope.encode(kind, 0, payload, ONEWAY)
        if RECORDING:
            record((monotonic_ns(), SENT, peer, kind, 0, message_bytes(frames), 0, None, None))
        self._mailbox.send_to_peer(peer, frames)

    def reply(self, msg: Message, payload: Any) -> None:
        """Answer request `msg` with `payload`, in the codec it came in; any thread."""
        if msg.oneway or msg.sender is None:
            return
        flags = RESPONSE | (msg.flags & JSON)
        try:
            frames = envelope.encode(msg.kind, msg.req_id, payload, flags)
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result
            frames = envelope.encode_error(msg.kind, msg.req_id, exc, msg.json)
        self._send_reply(msg, frames)

    def reply_error(self, msg: Message, exc: BaseException) -> None:
        """Answer request `msg` with an error reply describing `exc`; any thread."""
        if msg.oneway or msg.sender is None:
            return
        self._send_reply(msg, envelope.encode_error(msg.kind, msg.req_id, exc, msg.json))

    def _send_reply(self, msg: Message, frames: list) -> None:
        if RECORDING:
            self._unanswered.discard(msg)
            record((monotonic_ns(), SERVED, msg.sender, msg.kind, msg.req_id,
                    message_bytes(frames), msg.size, None, msg.received))
        self._send_to_sender(msg.sender, frames)

    def push(self, msg: Message, kind: int, payload: Any) -> None:
        """Send an unsolicited event to the sender of request `msg`, tagged with its id."""
        flags = PUSH | (msg.flags & JSON)
        self._send_to_sender(msg.sender, envelope.encode(kind, msg.req_id, payload, flags))

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run `fn(*args)` on the I/O thread after `delay` seconds (I/O thread only)."""
        return self._mailbox.call_later(delay, fn, *args)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the I/O thread; any thread."""
        self._mailbox.call_soon(fn, *args)

    def _fold_traffic(self) -> None:
        """Count what was recorded, every FOLD_INTERVAL (see introspection.recorder)."""
        TRAFFIC.fold()
        self._mailbox.call_later(FOLD_INTERVAL, self._fold_traffic)

    # ---- I/O thread: requests -----------------------------------------------------

    def _send_request(self, peer: str, req_id: int, frames: list,
                      deadline: Optional[float]) -> None:
        if self._peers.sent(req_id, deadline):
            self._arm_expiry()
        reason = self._peers.lost(peer)
        if reason is not None:
            self._fail_request(req_id, PeerLostError(peer, f"the connection is down ({reason})"))
            return
        try:
            self._peers.left_as(req_id, self._mailbox.send_now(peer, frames))
        except Exception as exc:  # noqa: BLE001 - e.g. an address ZeroMQ cannot connect to
            self._fail_request(req_id, PeerLostError(peer, f"cannot send: {exc}"))

    def _fail_request(self, req_id: int, exc: BaseException) -> None:
        pending = self._peers.forget(req_id)
        if pending is not None:
            _fail(pending, exc)

    def _arm_expiry(self) -> None:
        """Point the one expiry timer at the earliest deadline."""
        if self._expiry is not None:
            self._expiry.cancel()
        earliest = self._peers.earliest_deadline()
        self._expiry = None if earliest is None else self._mailbox.call_later(
            max(0.0, earliest - time.monotonic()), self._expire)

    def _expire(self) -> None:
        """Fail the requests whose deadline passed."""
        self._expiry = None
        try:
            for pending in self._peers.expired(time.monotonic()):
                _fail(pending, RequestTimeoutError(
                    f"{kind_name(pending.kind)} to {pending.peer} got no reply within "
                    f"{pending.timeout:g}s"))
                if pending.kind not in INTROSPECTION_KINDS:  # a probe of a hung process
                    dump_recorder("request_timeout")
        finally:
            self._arm_expiry()

    def _on_reply(self, peer: str, frames: list) -> None:
        try:
            header = envelope.read_header(frames)
        except ProtocolError as exc:
            log.warning("malformed_reply_dropped", actor=self.name, peer=peer, error=str(exc))
            return
        if header.flags & PUSH:
            self._on_push(peer, header, frames)
            return
        pending = self._peers.forget(header.req_id)
        if RECORDING:
            if pending is None:
                record((monotonic_ns(), ANSWERED, peer, header.kind, header.req_id, 0,
                        message_bytes(frames), None, None))
            else:
                record((monotonic_ns(), CALLED, peer, header.kind, header.req_id, pending.size,
                        message_bytes(frames), pending.what, pending.started))
        if pending is None:
            log.debug("reply_without_request_dropped", actor=self.name, peer=peer,
                      req_id=header.req_id)
            return
        self._peers.answered(pending)
        try:
            payload = envelope.read_payload(header, frames)
        except ProtocolError as exc:
            pending.future.set_exception(exc)
            return
        if header.flags & ERROR:
            pending.future.set_exception(exception_from_payload(payload))
        else:
            pending.future.set_result(payload)

    def _on_push(self, peer: str, header: Any, frames: list) -> None:
        handler = self._push_handlers.get(header.kind)
        if handler is None:
            log.warning("unexpected_push_dropped", actor=self.name, peer=peer,
                        kind=kind_name(header.kind))
            return
        payload = envelope.read_payload(header, frames)
        handler(Message(header.kind, header.req_id, header.flags, payload, peer=peer))

    def report_lost(self, peer: str, reason: str) -> None:
        """Tell this actor that `peer` is gone, as its owner learnt another way (a thread's
        own connection dropped, a caller's closed); any thread. The peer table decides:
        the first report of a peer's loss fails its requests and calls the `on_peer_lost`
        callbacks; later ones do nothing."""
        if self.in_io_thread():
            self._report_lost_now(peer, reason)
        else:
            try:
                self._mailbox.call_soon(self._report_lost_now, peer, reason)
            except ActorStoppedError:
                pass

    def _report_lost_now(self, peer: str, reason: str) -> None:
        if self._peers.report_lost(peer, reason):
            self._mailbox.announce_lost(peer, reason)

    def _on_peer_lost(self, peer: str, reason: str) -> None:
        self._fail_requests(lambda p: p.peer == peer, PeerLostError(peer, reason))
        for callback in self._peer_lost_callbacks:
            try:
                callback(peer)
            except Exception:  # noqa: BLE001 - one faulty listener must not stop the others
                log.exception("peer_lost_callback_failed", actor=self.name, peer=peer)

    def _fail_requests(self, which: Callable[[Pending], bool], exc: BaseException) -> None:
        for pending in self._peers.take_requests(which):
            _fail(pending, exc)

    # ---- I/O thread: incoming requests --------------------------------------------

    def _on_request(self, identity: bytes, frames: list) -> None:
        accepted = self._accept(identity, frames)
        if accepted is None:
            return
        registration, msg = accepted
        if registration.inline:
            self._serve(registration.fn, msg)
        else:
            self._pool.submit(self._serve, registration.fn, msg)

    def _accept_for_worker(self, identity: bytes, frames: list) -> Optional[tuple]:
        """`LeaderPool`'s accept: serve inline handlers here, return pool work."""
        accepted = self._accept(identity, frames)
        if accepted is None:
            return None
        registration, msg = accepted
        if registration.inline:
            self._serve(registration.fn, msg)
            return None
        return self._serve, (registration.fn, msg)

    def _accept(self, identity: bytes, frames: list) -> Optional[tuple]:
        """Decode a request: ``(registration, message)``, or None once bad input is answered.

        Never raises for bad input: whatever fails while accepting goes to `_reject`.
        """
        try:
            header = envelope.read_header(frames)
            if header.flags & (RESPONSE | PUSH):
                log.warning("stray_response_dropped", actor=self.name,
                            kind=kind_name(header.kind), req_id=header.req_id)
                return None
            registration = self._handlers.get(header.kind)
            if registration is None:
                raise UnknownKindError(f"unknown message kind {kind_name(header.kind)}")
            payload = envelope.read_payload(header, frames)
            msg = Message(header.kind, header.req_id, header.flags, payload, sender=identity)
            if RECORDING:
                if header.flags & ONEWAY:
                    record((monotonic_ns(), RECEIVED, identity, header.kind, header.req_id, 0,
                            message_bytes(frames), None, None))
                else:  # recorded with its reply
                    msg.received, msg.size = monotonic(), message_bytes(frames)
                    self._unanswered.add(msg)
            return registration, msg
        except Exception as exc:  # noqa: BLE001 - bad input is answered, never raised
            self._reject(identity, frames, exc)
            return None

    def _reject(self, identity: bytes, frames: list, exc: Exception) -> None:
        """Answer a message that could not be accepted with an error reply describing `exc`.

        The reply goes to the message's req_id in its codec; to req_id 0 with kind
        PROTOCOL_ERROR in JSON when its header cannot be read, and in JSON when its
        protocol version is not ours. One-way messages, responses and pushes are only
        logged.
        """
        header = envelope.peek_header(frames)
        log.warning("bad_request", actor=self.name, frames=len(frames),
                    kind=None if header is None else kind_name(header.kind),
                    req_id=None if header is None else header.req_id,
                    error=text_of(exc))
        if header is None:
            kind, req_id, json = Kind.PROTOCOL_ERROR, 0, True
        elif header.flags & (ONEWAY | RESPONSE | PUSH):
            return
        else:
            kind, req_id = header.kind, header.req_id
            json = bool(header.flags & JSON) or header.version != PROTOCOL_VERSION
        self._send_to_sender(identity, envelope.encode_error(kind, req_id, exc, json))

    def _serve(self, handler: Handler, msg: Message) -> None:
        try:
            result = handler(msg)
        except Exception as exc:  # noqa: BLE001 - becomes the caller's error
            self.reply_error(msg, exc)
            return
        if isinstance(result, Future):
            result.add_done_callback(lambda done: self._reply_with(msg, done))
        else:
            self.reply(msg, result)

    def _send_to_sender(self, identity: bytes, frames: list) -> None:
        if self._router is not None:
            self._router.send(identity, frames)

    def _reply_with(self, msg: Message, done: Future) -> None:
        exc = done.exception()
        if exc is not None:
            self.reply_error(msg, exc)
        else:
            self.reply(msg, done.value())


def _fail(pending: Pending, exc: BaseException) -> None:
    """End a request without its reply: recorded as its send alone, its future failed."""
    if RECORDING:
        record(pending.sent_alone())
    if not pending.future.done():
        pending.future.set_exception(exc)


class Actor:
    """An actor you hold: `ActorCore`'s methods, and a finalizer that stops it when dropped.

    Same arguments as `ActorCore`. The methods below are the core's own bound methods
    (a callback taken from them keeps the core alive, never this handle).
    """

    def __init__(self, address: Optional[str] = "tcp://127.0.0.1:0", *, name: str = "actor",
                 num_worker_threads: int = 4, heartbeat: float = 1.0,
                 heartbeat_timeout: float = 3.0, workers_receive: bool = False,
                 routing_id: Optional[bytes] = None):
        self.core = core = ActorCore(address, name=name, num_worker_threads=num_worker_threads,
                                     heartbeat=heartbeat, heartbeat_timeout=heartbeat_timeout,
                                     workers_receive=workers_receive, routing_id=routing_id)
        self._finalizer = weakref.finalize(self, core.close_soon)
        self._finalizer.atexit = False  # at exit the process takes its sockets along

    def start(self) -> "Actor":
        """Start the actor (see `ActorCore.start`); returns the actor, for
        ``Actor(...).start()``."""
        self.core.start()
        return self

    def stop(self, timeout: float = 5.0, *, deliver: bool = True) -> None:
        """Deliver what was sent (bounded; see `ActorCore.stop`), close the mailbox and
        join every thread; pending requests fail with ActorStoppedError."""
        self._finalizer.detach()
        self.core.stop(timeout, deliver=deliver)

    def __enter__(self) -> "Actor":
        return self if self.core.started else self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _delegate(name: str) -> property:
    return property(lambda handle: getattr(handle.core, name),
                    doc=getattr(ActorCore, name).__doc__)


for _name in ("address", "port", "pool", "register", "on_sender_lost", "on_peer_lost",
              "report_lost", "on_push", "request", "notify", "reply", "reply_error", "push",
              "call_later", "call_soon", "close_soon", "attach", "deliver_sent",
              "serve_introspection", "requests_in_flight", "requests_being_served"):
    setattr(Actor, _name, _delegate(_name))
