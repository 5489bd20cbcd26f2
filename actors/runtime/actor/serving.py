"""`Serving`: the requests an actor receives, decoded, dispatched by kind and answered.

Requests are read by the I/O thread or, with ``workers_receive``, by the pool's own
threads; a handler runs inline (on the reading thread) or on the pool. Its return
value is the reply, a returned `Future` is replied when it completes, an exception
becomes an error reply; bad input is answered with an error and never raised.
"""
from __future__ import annotations

from time import monotonic, monotonic_ns
from typing import Any, Callable, List, NamedTuple, Optional

from ..concurrency.contained import escapes
from ..concurrency.futures import Future
from ..errors import ActorStoppedError, ProtocolError, UnknownKindError
from ..introspection.recorder import RECEIVED, RECORDING, SERVED, record
from ..process.log import get_logger
from ..protocol import (JSON, ONEWAY, PROTOCOL_VERSION, PUSH, RESPONSE, SAME_HOST, Kind, envelope,
                        kind_name)
from ..protocol.bounded import text_of
from ..protocol.envelope import Message, message_bytes

log = get_logger(__name__)


Handler = Callable[[Message], Any]


class Registration(NamedTuple):
    fn: Handler
    inline: bool
    json: bool  # whether the kind takes JSON bodies too


class Serving:
    """The receiving half of `ActorCore` (see `actors.runtime.actor`): it uses the core's
    name, handlers, router, pool and its set of requests not answered."""

    def register(self, kind: int, handler: Handler, *, inline: bool = False,
                 json: bool = True) -> None:
        """Serve requests of `kind` with `handler(message)`; `inline` runs it on the I/O
        thread. Without `json`, a JSON body of that kind is refused with ProtocolError
        before the handler sees it (kinds whose payload only Python code makes)."""
        self._handlers[int(kind)] = Registration(handler, inline, json)

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

    def requests_being_served(self) -> List[Message]:
        """The requests received here and not answered yet (empty when introspection is
        off, though `finish_serving` keeps count of them either way)."""
        return list(self._unanswered) if RECORDING else []

    def finish_serving(self, timeout: float) -> List[Message]:
        """Take no new calls, and wait up to `timeout` seconds until every request being
        served is answered; the requests still unanswered then.

        From now on a request whose handler would run on the pool gets an
        ActorStoppedError reply saying that this actor is stopping; one-way messages
        and inline kinds (ping, introspection) are still served. For a server stopped
        by a signal, before `stop`: its callers get the replies of the calls it began.
        """
        with self._answered:
            self._refusing = True
            log.info("actor_finishing_calls", actor=self.name, calls=len(self._unanswered),
                     timeout_s=timeout)
            self._answered.wait_for(lambda: not self._unanswered, timeout)
            return list(self._unanswered)

    def reply(self, msg: Message, payload: Any) -> bool:
        """Answer request `msg` with `payload`, in the codec it came in; any thread.
        Whether the reply left: False when its sender's connection is gone."""
        if msg.oneway or msg.sender is None:
            return False
        flags = RESPONSE | (msg.flags & (JSON | SAME_HOST))
        try:
            frames = envelope.encode(msg.kind, msg.req_id, payload, flags)
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result
            frames = envelope.encode_error(msg.kind, msg.req_id, exc, msg.json)
        return self._send_reply(msg, frames)

    def reply_error(self, msg: Message, exc: BaseException) -> None:
        """Answer request `msg` with an error reply describing `exc`; any thread. A
        one-way message gets no reply: its error is logged, the only trace it leaves."""
        if msg.oneway:
            log.warning("oneway_request_failed", actor=self.name, kind=kind_name(msg.kind),
                        req_id=msg.req_id, error_type=type(exc).__name__, error=text_of(exc))
        if msg.oneway or msg.sender is None:
            return
        self._send_reply(msg, envelope.encode_error(msg.kind, msg.req_id, exc, msg.json))

    def push(self, msg: Message, kind: int, payload: Any) -> None:
        """Send an unsolicited event to the sender of request `msg`, tagged with its id."""
        flags = PUSH | (msg.flags & JSON)
        self._send_to_sender(msg.sender, envelope.encode(kind, msg.req_id, payload, flags))

    # ---- the reading thread ----------------------------------------------------------

    def _on_disconnect(self, fd: int) -> None:
        for identity in self._router.senders_lost(fd):
            log.info("sender_lost", actor=self.name, sender=identity.hex())
            try:
                self._sender_lost_callback(identity)
            except BaseException as exc:  # noqa: BLE001 - one listener must not stop the mailbox
                if escapes(exc):
                    raise
                log.exception("sender_lost_callback_failed", actor=self.name)

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
                envelope.discard(frames)
                return None
            registration = self._handlers.get(header.kind)
            if registration is None:
                raise UnknownKindError(f"unknown message kind {kind_name(header.kind)}")
            if self._refusing and not (registration.inline or header.flags & ONEWAY):
                envelope.discard(frames)
                self._refuse(identity, header)
                return None
            if header.flags & JSON and not registration.json:
                raise ProtocolError(f"{kind_name(header.kind)} takes a pickled body, not JSON "
                                    f"(docs/PROTOCOL.md); a JSON client calls the functions "
                                    f"a process exposes with RPC_CALL_NAMED")
            payload = envelope.read_payload(header, frames)
            msg = Message(header.kind, header.req_id, header.flags, payload, sender=identity)
            if not header.flags & ONEWAY:
                self._unanswered.add(msg)
                # Looked at again once it counts: `finish_serving`, begun while the payload
                # was read, either waits for it or finds it refused here.
                if self._refusing and not registration.inline:
                    self._refuse(identity, header)
                    self._answer_noted(msg)
                    return None
            if RECORDING:
                if header.flags & ONEWAY:
                    record((monotonic_ns(), RECEIVED, identity, header.kind, header.req_id, 0,
                            message_bytes(frames), None, None))
                else:  # recorded with its reply
                    msg.received, msg.size = monotonic(), message_bytes(frames)
            return registration, msg
        except Exception as exc:  # noqa: BLE001 - bad input is answered, never raised
            self._reject(identity, frames, exc)
            return None

    def _refuse(self, identity: bytes, header: Any) -> None:
        """Answer a call that comes while the actor finishes serving (`finish_serving`)."""
        log.info("request_refused_while_stopping", actor=self.name,
                 kind=kind_name(header.kind), req_id=header.req_id)
        error = ActorStoppedError(f"actor {self.name} is stopping: it finishes the calls it "
                                  f"serves and takes no new ones")
        self._send_to_sender(identity, envelope.encode_error(header.kind, header.req_id, error,
                                                             bool(header.flags & JSON)))

    def _reject(self, identity: bytes, frames: list, exc: Exception) -> None:
        """Answer a message that could not be accepted with an error reply describing `exc`.

        The reply goes to the message's req_id in its codec; to req_id 0 with kind
        PROTOCOL_ERROR in JSON when its header cannot be read, and in JSON when its
        protocol version is not ours. One-way messages, responses and pushes are only
        logged.
        """
        header = envelope.peek_header(frames)
        envelope.discard(frames)
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
        except BaseException as exc:  # noqa: BLE001 - becomes the caller's error
            self.reply_error(msg, exc)
            if escapes(exc):
                raise
            return
        if isinstance(result, Future):
            result.add_done_callback(lambda done: self._reply_with(msg, done))
        else:
            self.reply(msg, result)

    def _send_reply(self, msg: Message, frames: list) -> bool:
        if self._refusing and msg not in self._unanswered:
            # Answered already: a call that `finish_serving` gave up on, then finished.
            envelope.discard(frames)
            return False
        if RECORDING:
            record((monotonic_ns(), SERVED, msg.sender, msg.kind, msg.req_id,
                    message_bytes(frames), msg.size, None, msg.received))
        sent = self._send_to_sender(msg.sender, frames)
        self._answer_noted(msg)
        return sent

    def _answer_noted(self, msg: Message) -> None:
        """`msg` is answered: no longer among the requests being served."""
        self._unanswered.discard(msg)
        if self._refusing:
            with self._answered:
                self._answered.notify_all()

    def _send_to_sender(self, identity: bytes, frames: list) -> bool:
        if self._router is None or not self._router.send(identity, frames):
            envelope.discard(frames)
            return False
        return True

    def _reply_with(self, msg: Message, done: Future) -> None:
        exc = done.exception()
        if exc is not None:
            self.reply_error(msg, exc)
        else:
            self.reply(msg, done.value())
