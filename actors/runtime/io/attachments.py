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

Detaching, or stopping the actor, takes the socket out of the loop, waits (bounded)
for the handlers it started, and closes a socket the actor made; a socket the
caller made is handed back open.
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Deque, List, Optional, Sequence

import zmq

from ..errors import ActorStoppedError
from ..concurrency.futures import Future
from ..process.log import get_logger
from .sockets import (NOBLOCK, POLLIN, RECV_BATCH, close_releasing, recv_frames,
                      send_frames)

log = get_logger(__name__)

MessageHandler = Callable[[List[zmq.Frame]], Optional[Sequence[Any]]]

RECEIVING = {zmq.PULL: "PULL", zmq.SUB: "SUB", zmq.DEALER: "DEALER", zmq.PAIR: "PAIR",
             zmq.ROUTER: "ROUTER"}
SEND_ONLY = {zmq.PUSH: "PUSH", zmq.PUB: "PUB"}
_POLLOUT = int(zmq.POLLOUT)


class Attachment:
    """One socket in an actor's loop (made by `ActorCore.attach`; see the module doc).

    `endpoint` is the address the socket last bound or connected (with the port
    picked for ``tcp://HOST:0``). A socket the actor made (`owned`) and `bound` has
    its port free again when its detach returns.
    """

    def __init__(self, core: Any, sock: zmq.Socket, on_message: Optional[MessageHandler],
                 owned: bool, max_pending: int, bound: bool = False):
        self.socket_type = sock.type
        self.kind = RECEIVING.get(sock.type) or SEND_ONLY[sock.type]
        self._core, self._sock, self._on_message = core, sock, on_message
        self._owned, self._max_pending, self._bound = owned, max_pending, bound
        self._lock = threading.Condition(threading.Lock())
        self._running = 0  # handlers submitted and not finished
        self._outbox: Deque[List[Any]] = collections.deque()
        self._events = 0  # what the loop waits for on the socket now
        self._detached = False
        last = sock.getsockopt(zmq.LAST_ENDPOINT)
        self.endpoint: Optional[str] = last.decode() if last else None

    @property
    def pending(self) -> int:
        """Messages being handled right now (never more than `max_pending`)."""
        return self._running

    # ---- any thread ---------------------------------------------------------------

    def send(self, frames: Sequence[Any], timeout: Optional[float] = None) -> None:
        """Queue `frames` as one message on the socket; any thread.

        Waits while `max_pending` messages are queued already (at most `timeout`
        seconds: TimeoutError). ActorStoppedError once detached or stopped.
        """
        message = list(frames)
        in_loop = self._core.in_io_thread()
        with self._lock:
            if not in_loop and not self._lock.wait_for(
                    lambda: len(self._outbox) < self._max_pending or self._detached, timeout):
                raise TimeoutError(f"{self.kind} attachment: {len(self._outbox)} messages "
                                   f"still queued after {timeout:g}s")
            if self._detached:
                raise ActorStoppedError(f"{self.kind} attachment is detached")
            self._outbox.append(message)
        if in_loop:
            self._flush()
        else:
            self._core.call_soon(self._flush)

    def detach(self, timeout: float = 5.0) -> Optional[zmq.Socket]:
        """Leave the loop; wait (at most `timeout`) for running handlers.

        Returns the caller's own socket, open, or None for a socket the actor made
        (closed). Queued sends that could not go out are dropped (logged).
        """
        done = Future()
        try:
            self._core.call_soon(self._detach_now, done)
            done.wait(timeout)
        except ActorStoppedError:
            pass  # the teardown detached it
        with self._lock:
            self._lock.wait_for(lambda: self._running == 0, timeout)
        return None if self._owned else self._sock

    # ---- I/O thread ---------------------------------------------------------------

    def start(self) -> None:
        self._watch()

    def _watch(self) -> None:
        """Wait for what there is to do: messages while below the bound, room to send
        while sends are queued."""
        if self._detached:
            return
        events = (POLLIN if self._on_message is not None and self._running < self._max_pending
                  else 0) | (_POLLOUT if self._outbox else 0)
        if events != self._events:
            self._events = events
            self._core.watch_socket(self._sock, events, self._on_ready)

    def _on_ready(self, events: int) -> None:
        if events & _POLLOUT:
            self._flush()
        if events & POLLIN:
            self._take()

    def _take(self) -> None:
        for _ in range(RECV_BATCH):
            with self._lock:
                if self._running >= self._max_pending:
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
            return
        sent = False
        while self._outbox:
            try:
                send_frames(self._sock, self._outbox[0], NOBLOCK)
            except zmq.Again:
                break  # the peer's high-water mark: wait for POLLOUT
            except zmq.ZMQError as exc:  # e.g. a ROUTER reply to a peer that left
                log.warning("attachment_send_failed", kind=self.kind, error=str(exc))
            with self._lock:
                self._outbox.popleft()
            sent = True
        if sent:
            with self._lock:
                self._lock.notify_all()
        self._watch()

    def _detach_now(self, done: Optional[Future] = None) -> None:
        if not self._detached:
            self._detached = True
            self._core.watch_socket(self._sock, 0, self._on_ready)
            with self._lock:
                dropped = len(self._outbox)
                self._outbox.clear()
                self._lock.notify_all()
            if dropped:
                log.warning("attachment_sends_dropped", kind=self.kind, messages=dropped)
            if self._owned:
                close_releasing(self._sock, self.endpoint if self._bound else None)
            log.info("socket_detached", kind=self.kind, closed=self._owned)
        if done is not None:
            done.set_result(None)

    # ---- worker pool --------------------------------------------------------------

    def _handle(self, frames: List[zmq.Frame]) -> None:
        try:
            reply = self._on_message(frames)
            if reply is not None and not self._detached:
                self.send(reply)
        except Exception:  # noqa: BLE001 - a faulty message must not stop the actor
            log.exception("attached_message_failed", kind=self.kind)
        finally:
            with self._lock:
                self._running -= 1
                was_full = self._running == self._max_pending - 1
                self._lock.notify_all()
            if was_full:
                try:
                    self._core.call_soon(self._watch)
                except ActorStoppedError:
                    pass


def open_socket(ctx: zmq.Context, endpoint: str, socket_type: int, bind: bool,
                subscribe: Sequence[bytes], secure: Callable[..., None]) -> zmq.Socket:
    """A new socket of `socket_type` bound or connected to `endpoint`, secured first."""
    sock = ctx.socket(socket_type)
    try:
        sock.setsockopt(zmq.LINGER, 0)
        secure(sock, server=bind)
        if socket_type == zmq.SUB:
            for topic in subscribe:
                sock.setsockopt(zmq.SUBSCRIBE, topic)
        if bind:
            sock.bind(endpoint[:-2] + ":*" if endpoint.startswith("tcp://")
                      and endpoint.endswith(":0") else endpoint)
        else:
            sock.connect(endpoint)
    except BaseException:
        sock.close(0)
        raise
    return sock


def check_type(kind: int, on_message: Optional[MessageHandler]) -> None:
    """TypeError/ValueError unless a socket of type `kind` can be attached with `on_message`."""
    if kind in RECEIVING:
        if not callable(on_message):
            raise TypeError(f"a {RECEIVING[kind]} socket needs an on_message callable")
    elif kind in SEND_ONLY:
        if on_message is not None:
            raise ValueError(f"a {SEND_ONLY[kind]} socket only sends: attach it without "
                             f"on_message and use Attachment.send")
    else:
        names = sorted([*RECEIVING.values(), *SEND_ONLY.values()])
        raise ValueError(f"cannot attach a socket of type {kind}: one of {names}")

