"""`Calling`: the requests an actor sends, their futures, deadlines and replies, and
the peers it loses.

A request is encoded and registered with the peer table on the calling thread, and
sent by the I/O thread, which also takes the replies, arms the one expiry timer at
the earliest deadline and fails what a lost peer or a stop leaves unanswered.
"""
from __future__ import annotations

import threading
import time
from contextvars import ContextVar
from time import monotonic_ns
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..concurrency.contained import escapes
from ..concurrency.deadlines import check_timeout
from ..concurrency.futures import Future, Settle, failed
from ..errors import ActorStoppedError, PeerLostError, ProtocolError, RequestTimeoutError
from ..introspection.recorder import ANSWERED, CALLED, RECORDING, SENT, record
from ..introspection.status import dump_recorder
from ..io.peers import Pending
from ..process.log import get_logger
from ..protocol import (ERROR, INTROSPECTION_KINDS, ONEWAY, PUSH, Kind, envelope, kind_name,
                        request_flags)
from ..protocol.envelope import Message, message_bytes
from ..protocol.remote_errors import exception_from_payload
from .serving import Handler

log = get_logger(__name__)

# The call being served that the requests made here are made for, for STATUS's chains:
# a one-item list holding its tag (its thread's ident; a token once an async_execution
# call returned its future; None once the call is over), set while the call runs. The
# callbacks added then run in that context (`Future.add_done_callback`), so their
# requests carry the tag too.
SERVED_CALL: ContextVar[Optional[List[Optional[int]]]] = ContextVar("actors_served_call",
                                                                    default=None)


def _made_for() -> int:
    cell = SERVED_CALL.get()
    tag = None if cell is None else cell[0]
    return threading.get_ident() if tag is None else tag


class Calling:
    """The sending half of `ActorCore` (see `actors.runtime.actor`): it uses the core's
    name, mailbox, peer table and request ids."""

    def request(self, peer: str, kind: int, payload: Any = None,
                timeout: Optional[float] = None, *, json: bool = False,
                same_host: bool = False, what: Any = None,
                settle: Optional[Settle] = None) -> Future:
        """Send a request to the actor at `peer`; the future holds the reply payload.

        The payload is encoded on the calling thread, so an unpicklable argument raises
        here, before anything is sent. `timeout`: None waits without limit, else
        seconds (0 or less: the request times out as soon as it is sent; NaN is a
        ValueError), as everywhere in the runtime. A timeout fails the future with
        RequestTimeoutError; a lost peer with PeerLostError. `same_host`: `peer` runs
        on this host, so large buffers may go through shared memory both ways
        (`protocol.shared_buffers`).
        `what` names what the request calls, in `requests_in_flight` and in the
        flight recorder (default: nothing). `settle(payload, exception)` makes what the
        future holds of the reply, or of the error that ends the request (see
        `Future`); it runs once, on the thread that ends it: the I/O thread, or the one
        that stops the actor. When this raises, the future was never completed.
        """
        if self._stopped:
            raise ActorStoppedError(f"actor {self.name} is stopped")
        check_timeout(timeout)
        req_id = next(self._req_ids)
        frames = envelope.encode(kind, req_id, payload, request_flags(json, same_host))
        future = Future(settle)
        # Taken before it leaves: its receipt must never come first in a timeline.
        now = time.monotonic()
        deadline = None if timeout is None else now + timeout
        # Registered here, not on the I/O thread, so that stop() fails it even if the
        # I/O thread never gets to send it.
        self._peers.register(req_id, Pending(
            future, peer, kind, timeout, what, _made_for(), now, req_id,
            message_bytes(frames) if RECORDING else 0))
        try:
            self._mailbox.call_soon(self._send_request, peer, req_id, frames, deadline,
                                    message=frames)
        except ActorStoppedError:
            envelope.discard(frames)
            if self._peers.forget(req_id) is not None:
                raise
            # The stop failed the request already, and its future (settled) says so.
        return future

    def notify(self, peer: str, kind: int, payload: Any = None) -> None:
        """Send a one-way message to `peer` (no reply, no future)."""
        self.notify_many((peer,), kind, payload)

    def notify_many(self, peers: Sequence[str], kind: int, payload: Any = None) -> None:
        """`notify` each of `peers` in turn, the message encoded once for all of them.

        One-way messages lend no shared-memory blocks, so every peer can be sent the
        same frames. As with `notify` in a loop, a send that raises ends the turn: the
        peers after it are not sent the message.
        """
        frames = envelope.encode(kind, 0, payload, ONEWAY)
        size = message_bytes(frames) if RECORDING else 0
        for peer in peers:
            if RECORDING:
                record((monotonic_ns(), SENT, peer, kind, 0, size, 0, None, None))
            self._mailbox.send_to_peer(peer, frames)

    def requests_in_flight(self) -> List[Pending]:
        """The requests sent from here that wait for their replies (any thread)."""
        return self._peers.requests()

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

    def on_peer_lost(self, callback: Callable[[str], None]) -> None:
        """Call `callback(address)` on the I/O thread when a connection to a peer drops."""
        self._peer_lost_callbacks.append(callback)

    def on_push(self, kind: int, handler: Handler) -> None:
        """Call `handler(message)` on the I/O thread for pushes of `kind` from peers."""
        self._push_handlers[int(kind)] = handler

    # ---- I/O thread ------------------------------------------------------------------

    def _send_request(self, peer: str, req_id: int, frames: list,
                      deadline: Optional[float]) -> None:
        if self._peers.sent(req_id, deadline):
            self._arm_expiry()
        reason = self._peers.lost(peer)
        if reason is not None:
            envelope.discard(frames)
            self._fail_request(req_id, PeerLostError(peer, f"the connection is down ({reason})"))
            return
        try:
            number = self._mailbox.send_now(peer, frames)
        except Exception as exc:  # noqa: BLE001 - e.g. an address ZeroMQ cannot connect to
            envelope.discard(frames)
            self._fail_request(req_id, PeerLostError(peer, f"cannot send: {exc}"))
            return
        self._peers.left_as(req_id, number)

    def _fail_request(self, req_id: int, exc: BaseException) -> None:
        pending = self._peers.forget(req_id)
        if pending is not None:
            fail_request(pending, exc)

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
                fail_request(pending, RequestTimeoutError(
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
            envelope.discard(frames)
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

    def _report_lost_now(self, peer: str, reason: str) -> None:
        if self._peers.report_lost(peer, reason):
            self._mailbox.announce_lost(peer, reason)

    def _on_peer_lost(self, peer: str, reason: str) -> None:
        self._fail_requests(lambda p: p.peer == peer, PeerLostError(peer, reason))
        for callback in self._peer_lost_callbacks:
            try:
                callback(peer)
            except BaseException as exc:  # noqa: BLE001 - one listener must not stop the others
                if escapes(exc):
                    raise
                log.exception("peer_lost_callback_failed", actor=self.name, peer=peer)

    def _fail_requests(self, which: Callable[[Pending], bool], exc: BaseException) -> None:
        for pending in self._peers.take_requests(which):
            fail_request(pending, exc)


def fail_request(pending: Pending, exc: BaseException) -> None:
    """End a request without its reply: recorded as its send alone, its future failed."""
    if RECORDING:
        record(pending.sent_alone())
    if not pending.future.done():
        pending.future.set_exception(exc)
