"""`Attachment`: an existing ZeroMQ socket (PULL, SUB, DEALER, PAIR, ROUTER; PUSH, PUB to
send) in an actor's loop, so that an actor can take part in a pipeline it did not define.

The socket is read and written only on the actor's I/O thread. Each message (its
frames as received, a ROUTER's identity frame first) goes to ``on_message(frames)``
on the worker pool; a value it returns other than None is a message (a list of
frames) sent back on the same socket. At most `max_pending` messages are being
handled at once: at the bound the socket leaves the poll loop, so further messages
wait in ZeroMQ's queues and its high-water marks push back on the senders. Sends
(`send`, and handler replies) queue at most `max_pending` messages on the actor's
side and then make the sending thread wait: a slow receiver pushes back on the
handlers. Memory stays bounded either way.

`send` checks each frame's type on the calling thread (TypeError there), so every
message queued can be sent; one that ZeroMQ refuses anyway is logged and dropped,
never tried again.

Detaching, or stopping the actor, delivers first: the socket stops taking messages
and sends, the queued sends go out to ZeroMQ (`confirm_delivery`, at most `timeout`
seconds, and at a normal exit `at_exit.EXIT_FLUSH_TIMEOUT`; what did not is logged
at warning, with counts). A socket the actor connected then closes with a LINGER of
CLOSE_LINGER_MS, during which ZeroMQ goes on sending what it holds while the process
lives; one it bound closes at once, its address free again when detach returns.
ZeroMQ cannot tell when that is done without terminating the context every socket of
the process shares: at an exit right after, what it still holds may be lost. It then
waits (bounded) for the handlers the socket started, but not for the handler that
detaches it; a socket the caller made is handed back open, its LINGER its own.

A socket the actor made is monitored: a peer that refuses the handshake (one side
uses CURVE and the other does not, or a key is not authorised) is logged at warning,
once per peer, where libzmq would retry it silently forever.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Any, Deque, Dict, List, Optional, Sequence, Set, Tuple

import zmq

from ..errors import ActorStoppedError
from ..concurrency.futures import Future, failed
from ..process import at_exit
from ..process.log import get_logger
from .attached_sockets import RECEIVING, SEND_ONLY, MessageHandler, check_frames
from .sockets import (HANDSHAKE_FAILED, NOBLOCK, POLLIN, RECV_BATCH, close_monitored,
                      close_releasing, recv_frames, recv_monitor_message,
                      refusal, send_frames)

log = get_logger(__name__)

_POLLOUT = int(zmq.POLLOUT)
CLOSE_LINGER_MS = 30_000  # see `Attachment._detach_now`
DETACH_GRACE = 1.0  # seconds; see `Attachment.confirm_delivery`


class Attachment:
    """One socket in an actor's loop (made by `ActorCore.attach`; see the module doc).

    `endpoint` is the address the socket last bound or connected (with the port
    picked for ``tcp://HOST:0``). A socket the actor made (`owned`) and `bound` has
    its port free again when its detach returns; `monitor` is its monitor of
    handshake failures.
    """

    blocks_to_confirm = True  # `confirm_delivery` waits (see `at_exit.confirm_deliveries`)

    def __init__(self, core: Any, sock: zmq.Socket, on_message: Optional[MessageHandler],
                 owned: bool, max_pending: int, monitor: Optional[zmq.Socket] = None,
                 bound: bool = False):
        self.socket_type = sock.type
        self.kind = RECEIVING.get(sock.type) or SEND_ONLY[sock.type]
        self.name = core.name  # the actor's, as delivery warnings name it
        self._core, self._sock, self._on_message = core, sock, on_message
        self._owned, self._max_pending, self._monitor = owned, max_pending, monitor
        self._bound = bound
        self._lock = threading.Condition(threading.Lock())
        self._running = 0  # handlers submitted and not finished
        # Of those, the ones that started: what a detach waits for. One queued behind
        # the handler that detaches (one worker thread) runs after the detach returns.
        self._active = 0
        self._in_handler = threading.local()  # set on a pool thread while it runs a handler
        self._outbox: Deque[List[Any]] = collections.deque()
        self._dropped = 0  # queued sends a delivering detach dropped, not yet reported
        self._events = 0  # what the loop waits for on the socket now
        self._closing = False  # detaching: no more sends, nor messages taken
        self._flushed: Optional[Future] = None  # done once the outbox is empty, when closing
        self._detached = False
        self._refused: Set[str] = set()  # peers whose refused handshake was logged
        last = sock.getsockopt(zmq.LAST_ENDPOINT)
        self.endpoint: Optional[str] = last.decode() if last else None
        at_exit.track(self)

    @property
    def pending(self) -> int:
        """Messages being handled right now (never more than `max_pending`)."""
        return self._running

    # ---- any thread ---------------------------------------------------------------

    def send(self, frames: Sequence[Any], timeout: Optional[float] = None) -> None:
        """Queue `frames` as one message on the socket; any thread.

        TypeError or ValueError, at once, for frames ZeroMQ cannot send (see
        `check_frames`). Waits while `max_pending` messages are queued already (at
        most `timeout` seconds: TimeoutError). ActorStoppedError once detaching or
        stopped.
        """
        message = check_frames(frames)
        in_loop = self._core.in_io_thread()
        with self._lock:
            if not in_loop and not self._lock.wait_for(
                    lambda: len(self._outbox) < self._max_pending or self._closing, timeout):
                raise TimeoutError(f"{self.kind} attachment: {len(self._outbox)} messages "
                                   f"still queued after {timeout:g}s")
            if self._closing:
                raise ActorStoppedError(f"{self.kind} attachment is detached")
            self._outbox.append(message)
        if in_loop:
            self._flush()
        else:
            self._core.call_soon(self._flush)

    def detach(self, timeout: float = 5.0) -> Optional[zmq.Socket]:
        """Deliver what was sent, leave the loop, and wait for the handlers the socket
        started (all within `timeout`; see the module doc).

        Returns the caller's own socket, open, or None for a socket the actor made
        (closed). On the I/O thread, which cannot wait, what ZeroMQ holds is dropped.
        """
        deadline = time.monotonic() + timeout
        if self._core.in_io_thread():
            self.detach_without_delivery()
        else:
            at_exit.confirm_deliveries([self], deadline, "detach")
        # A handler that detaches its own socket is one of those running.
        calling = 1 if getattr(self._in_handler, "active", False) else 0
        with self._lock:
            self._lock.wait_for(lambda: self._active <= calling,
                                max(0.0, deadline - time.monotonic()))
        return None if self._owned else self._sock

    def confirm_delivery(self, deadline: float) -> Dict[str, Tuple[int, Future]]:
        """Detach, delivering first (`at_exit.confirm_deliveries` calls this at detach,
        stop and exit); not on the I/O thread. Returns the endpoint with the number of
        queued sends not handed to ZeroMQ by `deadline` (monotonic), dropped, and a
        failed future; nothing when every one was."""
        if self._detached:
            return {}  # detached before: it has nothing left to deliver
        flushed, closed = Future(), Future()
        try:
            self._core.call_soon(self._finish, flushed)
            _wait(flushed, deadline)
            self._core.call_soon(self._detach_now, closed, deadline)
            # Short work on the I/O thread, waited for even past the deadline: what it
            # drops is counted below.
            _wait(closed, max(deadline, time.monotonic() + DETACH_GRACE))
        except ActorStoppedError:
            pass  # the actor's teardown detached it
        with self._lock:  # asked once: a later check (at exit) finds nothing in question
            dropped, self._dropped = self._dropped, 0
        if not dropped:
            return {}
        return {self.endpoint or self.kind: (dropped, failed(TimeoutError(
            "queued sends were not handed to ZeroMQ before the deadline")))}

    def detach_without_delivery(self) -> None:
        """Detach at once, delivering nothing more (the teardown, and a detach on the I/O
        thread, which cannot wait)."""
        self._detach_now()

    # ---- I/O thread ---------------------------------------------------------------

    def start(self) -> None:
        if self._monitor is not None:
            self._core.watch_socket(self._monitor, POLLIN, self._on_monitor_ready)
        self._watch()

    def _watch(self) -> None:
        """Wait for what there is to do: messages while below the bound and not
        closing, room to send while sends are queued."""
        if self._detached:
            return
        taking = self._on_message is not None and not self._closing and \
            self._running < self._max_pending
        events = (POLLIN if taking else 0) | (_POLLOUT if self._outbox else 0)
        if events != self._events:
            self._events = events
            self._core.watch_socket(self._sock, events, self._on_ready)

    def _on_ready(self, events: int) -> None:
        if events & _POLLOUT:
            self._flush()
        if events & POLLIN:
            self._take()

    def _on_monitor_ready(self, events: int) -> None:
        monitor = self._monitor
        while monitor is not None and not monitor.closed and monitor.poll(0):
            event, _, peer = recv_monitor_message(monitor)
            if event & HANDSHAKE_FAILED and self._first_refusal(peer):
                log.warning("attached_peer_refused", actor=self.name, kind=self.kind,
                            peer=peer, reason=refusal())

    def _first_refusal(self, peer: str) -> bool:
        """Whether `peer`'s refused handshake is news (libzmq retries it again and again)."""
        known = peer in self._refused
        self._refused.add(peer)
        return not known

    def _take(self) -> None:
        for _ in range(RECV_BATCH):
            with self._lock:
                if self._running >= self._max_pending or self._closing:
                    break
            try:
                frames = recv_frames(self._sock, NOBLOCK)
            except zmq.Again:
                break
            with self._lock:
                self._running += 1
            self._core.pool.submit(self._handle, frames)
        self._watch()

    def _flush(self) -> None:
        if self._detached:
            if self._flushed is not None:  # nothing will be sent any more
                flushed, self._flushed = self._flushed, None
                flushed.set_result(None)
            return
        sent = False
        while self._outbox:
            try:
                send_frames(self._sock, self._outbox[0], NOBLOCK)
            except zmq.Again:
                break  # the peer's high-water mark: wait for POLLOUT
            except Exception as exc:  # noqa: BLE001 - e.g. a ROUTER reply to a peer that left
                # Sent again it would fail again: it is dropped.
                log.warning("attachment_send_failed", kind=self.kind, error=repr(exc))
            with self._lock:
                self._outbox.popleft()
            sent = True
        if sent:
            with self._lock:
                self._lock.notify_all()
        if self._flushed is not None and not self._outbox:
            flushed, self._flushed = self._flushed, None
            flushed.set_result(None)
        self._watch()

    def _finish(self, flushed: Future) -> None:
        """Stop taking messages and sends; `flushed` is done once the queued sends left."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()  # senders waiting for room fail now
        self._flushed = flushed
        self._flush()

    def _detach_now(self, done: Optional[Future] = None,
                    deadline: Optional[float] = None) -> None:
        """Leave the loop; close a socket the actor made, with until `deadline`
        (monotonic; None: no time) for what ZeroMQ holds to leave."""
        if not self._detached:
            self._detached = self._closing = True
            self._core.watch_socket(self._sock, 0, self._on_ready)
            with self._lock:
                dropped = len(self._outbox)
                self._outbox.clear()
                self._lock.notify_all()
            if deadline is not None:
                self._dropped = dropped  # `confirm_delivery` reports them
            elif dropped:
                log.warning("attachment_sends_dropped", kind=self.kind, messages=dropped)
            if self._owned:
                self._close_own(deadline is not None)
            log.info("socket_detached", kind=self.kind, closed=self._owned)
        if done is not None:
            done.set_result(None)

    def _close_own(self, delivering: bool) -> None:
        """Close a socket the actor made. A bound one frees its address before detach
        returns, as a store hosted anew on its port needs; a connected one, when
        `delivering`, leaves ZeroMQ to go on sending what it holds, in the background
        while the process lives."""
        if self._monitor is not None:
            self._core.watch_socket(self._monitor, 0, self._on_monitor_ready)
        if self._bound:
            close_releasing(self._sock, self.endpoint)
            if self._monitor is not None:
                self._monitor.close(0)
        elif self._monitor is not None:
            close_monitored(self._sock, self._monitor, CLOSE_LINGER_MS if delivering else 0)
        else:
            self._sock.close(CLOSE_LINGER_MS if delivering else 0)

    # ---- worker pool --------------------------------------------------------------

    def _handle(self, frames: List[zmq.Frame]) -> None:
        with self._lock:
            self._active += 1
        self._in_handler.active = True
        try:
            reply = self._on_message(frames)
            if reply is not None and not self._closing:
                self.send(reply)
        except Exception:  # noqa: BLE001 - a faulty message (or reply) must not stop the actor
            log.exception("attached_message_failed", kind=self.kind)
        finally:
            self._in_handler.active = False
            with self._lock:
                self._active -= 1
                self._running -= 1
                was_full = self._running == self._max_pending - 1
                self._lock.notify_all()
            if was_full:
                try:
                    self._core.call_soon(self._watch)
                except ActorStoppedError:
                    pass


def _wait(future: Future, deadline: float) -> None:
    """Wait for `future` until `deadline` (monotonic); it may still be pending after."""
    try:
        future.wait(max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        pass
