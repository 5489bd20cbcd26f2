"""`Router`: an actor's ROUTER socket, the only code that touches it.

The socket is guarded by one lock. Whoever reads requests (the mailbox's I/O thread,
or the worker that leads the reading, see `concurrency/leaders.py`) calls `take` and waits on
`fd`; any thread that answers a request calls `send`. ZeroMQ allows a socket to pass
between threads with a full memory barrier between uses, which the lock provides.

ZeroMQ's notification descriptor is edge-triggered: a `send` from another thread
may consume the notification the reader sleeps on. The reader looks for requests
itself before it sleeps; after a `send` from any other thread the socket's
``EVENTS`` is read under the lock, and the reader is woken when requests wait
(`set_reader`).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import zmq

from .context import process_context
from ..errors import AddressInUseError
from ..process.log import get_logger
from .sockets import (EVENTS, POLLIN, close_releasing, new_socket, open_monitor, recv_frames,
                      send_frames)

log = get_logger(__name__)


Request = Tuple[bytes, List[zmq.Frame]]


class Router:
    """A bound ROUTER at `address` (``tcp://HOST:0`` picks a free port; `address` tells it).

    `heartbeat_ms` / `heartbeat_timeout_ms` set ZMTP heartbeats on the connections it
    accepts. AddressInUseError if the address is taken.
    """

    def __init__(self, address: str, heartbeat_ms: int, heartbeat_timeout_ms: int):
        self._lock = threading.Lock()
        self._is_reader: Callable[[], bool] = _no
        self._wake_reader: Callable[[], None] = _nothing
        self._senders: Optional[Dict[bytes, int]] = None  # identity -> connection fd
        # Before bind: a listener takes the socket's options when it is bound.
        sock = new_socket(process_context(), zmq.ROUTER, heartbeat_ms, heartbeat_timeout_ms,
                          server=True)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        if address.startswith("tcp://") and address.endswith(":0"):
            address = address[:-2] + ":*"
        try:
            sock.bind(address)
        except zmq.ZMQError as exc:
            sock.close(0)
            if exc.errno == zmq.EADDRINUSE:
                raise AddressInUseError(address) from None
            raise OSError(exc.errno, f"cannot bind {address}: {exc}") from None
        self.address: str = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        self.fd: int = sock.getsockopt(zmq.FD)
        self._sock: Optional[zmq.Socket] = sock

    def set_reader(self, is_reader: Callable[[], bool], wake_reader: Callable[[], None]) -> None:
        """Who reads: `is_reader()` is true on the reading thread, and `wake_reader()`
        wakes it when a send from another thread finds requests waiting."""
        self._is_reader, self._wake_reader = is_reader, wake_reader

    def take(self) -> Optional[Request]:
        """One waiting request as ``(identity, frames)``, or None; never blocks.

        Call it before sleeping on `fd`: it also re-arms the descriptor.
        """
        with self._lock:
            sock = self._sock
            # Asking EVENTS is cheaper than a receive that ends in zmq.Again.
            if sock is None or not sock.getsockopt(EVENTS) & POLLIN:
                return None
            return self._receive(sock)

    def take_woken(self) -> Optional[Request]:
        """`take` for a reader that `fd` just woke: a request is most likely waiting, so
        the receive is tried at once (ZeroMQ processes its pending commands on a miss)."""
        with self._lock:
            sock = self._sock
            if sock is None:
                return None
            try:
                return self._receive(sock, zmq.NOBLOCK)
            except zmq.Again:
                return None

    def _receive(self, sock: zmq.Socket, flags: int = 0) -> Request:
        frames = recv_frames(sock, flags)
        identity = frames[0].bytes
        if self._senders is not None:
            self._senders[identity] = frames[0].get(zmq.SRCFD)
        del frames[0]
        return identity, frames

    def send(self, identity: bytes, frames: List[Any]) -> bool:
        """Send `frames` to the peer `identity`; False when they were dropped (the peer
        vanished, or the router is closed)."""
        reader = self._is_reader()
        with self._lock:
            sock = self._sock
            if sock is None:
                return False
            try:
                send_frames(sock, [identity, *frames])
            except zmq.ZMQError as exc:
                # ROUTER_MANDATORY: the requester disconnected before its reply was ready.
                log.info("reply_undeliverable", address=self.address, reason=str(exc))
                sent = False
            else:
                sent = True
            waiting = not reader and sock.getsockopt(EVENTS) & POLLIN
        if waiting:
            self._wake_reader()
        return sent

    def track_senders(self) -> zmq.Socket:
        """Note the connection of each sender; returns the disconnect monitor to read.

        ZeroMQ hides connections behind the ROUTER, so each request's source
        descriptor is noted and matched against `senders_lost` when the monitor
        reports that descriptor disconnected.
        """
        with self._lock:
            self._senders = {}
            return open_monitor(self._sock, zmq.EVENT_DISCONNECTED)

    def senders_lost(self, fd: int) -> List[bytes]:
        """Forget and return the senders that spoke on connection `fd`, now closed."""
        # Under the lock `take` notes senders under: nothing read from the closed
        # connection is noted after this.
        with self._lock:
            lost = [identity for identity, known in self._senders.items() if known == fd]
            for identity in lost:
                del self._senders[identity]
        return lost

    def close(self) -> None:
        """Close the socket, its port free on return (`sockets.close_releasing`); the
        PAIR of its monitor, if any, is left to the reader to close."""
        with self._lock:
            if self._sock is not None:
                close_releasing(self._sock, self.address)
                self._sock = None


def _nothing() -> None:
    return None


def _no() -> bool:
    return False
