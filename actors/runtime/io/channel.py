"""`Channel`: synchronous request/reply to one actor, straight from the calling thread.

A client that blocks on each answer (a store client) gains nothing from handing
its message to an I/O thread and back: each thread gets its own DEALER socket and
waits on it directly, which saves two thread hand-offs per call. A monitor socket
beside each DEALER reports a dropped connection, so a call to a vanished peer fails
within a fraction of a second with PeerLostError instead of waiting out its
timeout; ZeroMQ heartbeats catch a peer that hangs without closing the connection.

A ZeroMQ socket must not be closed while another thread uses it (libzmq aborts
the process), so each socket is closed by the thread that owns it when it is in a
call: `close()` closes the idle ones and marks the channel closed, and a thread
inside a call sees the mark within a receive slice, fails its call with
ActorStoppedError and closes its own socket on the way out. A thread that ends
leaves an idle socket behind; the next thread to connect closes those of threads
no longer alive, so a churning thread pool holds no more sockets than it has
threads. The finalizer of a dropped channel closes the rest (no thread can be
inside a call then: a call holds the channel).
"""
from __future__ import annotations

import itertools
import math
import threading
import time
from time import monotonic_ns
import weakref
from typing import Any, Callable, List, Optional, Tuple

import zmq

from ..protocol import envelope
from ..concurrency.blocking import about_to_block
from ..concurrency.deadlines import check_timeout
from .context import process_context
from ..introspection.recorder import ANSWERED, CALLED, RECORDING, SENT, TRAFFIC, record
from ..introspection.status import dump_recorder
from ..errors import ActorStoppedError, PeerLostError, RequestTimeoutError
from ..protocol import ERROR, RESPONSE, request_flags
from ..protocol.remote_errors import exception_from_payload
from ..process.waits import SlowWait
from .sockets import (EVENTS, HANDSHAKE_FAILED, POLLIN, close_monitored, open_dealer,
                      recv_frames, recv_monitor_event, refusal, send_frames)

# How long a waiting call may go without looking at the monitor for a lost peer.
_SLICE_MS = 50


class _Connection:
    """One thread's DEALER to the peer, its monitor, and whether the handshake is done."""

    __slots__ = ("busy", "calling", "connected", "drops", "ever_connected", "monitor", "owner",
                 "refused", "socket", "thread")

    def __init__(self, ctx: zmq.Context, address: str, heartbeat_ms: int, timeout_ms: int):
        self.socket, self.monitor = open_dealer(ctx, address, heartbeat_ms, timeout_ms)
        self.socket.setsockopt(zmq.RCVTIMEO, _SLICE_MS)
        self.connected = False
        self.ever_connected = False
        self.drops = 0  # disconnections seen: a call spanning one lost its request
        self.refused = False  # the peer refused the handshake (security)
        # (flight-recorder entry of its send, timeout) of the call waiting for its reply,
        # set and taken whole; None when no call waits, or when introspection is off.
        self.calling: Optional[Tuple[tuple, Optional[float]]] = None
        self.thread = threading.get_ident()  # the one thread that uses this connection
        self.owner = threading.current_thread()
        self.busy = False  # its thread is inside a call: only that thread may close it

    def read_monitor(self) -> None:
        # EVENTS, not poll(0): one call instead of a Poller built per check.
        while self.monitor.getsockopt(EVENTS) & POLLIN:
            event = recv_monitor_event(self.monitor)[0]
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.connected = self.ever_connected = True
            elif event == zmq.EVENT_DISCONNECTED:
                self.connected = False
                self.drops += 1
            elif event & HANDSHAKE_FAILED:
                self.refused = True

    def close(self) -> None:
        if not self.socket.closed:
            close_monitored(self.socket, self.monitor)


class Channel:
    """Blocking calls to the actor at `address`, safe to use from many threads at once.

    `connect_timeout` bounds the wait for the first connection of each thread.
    `close()` may be called while other threads are inside calls: those fail with
    ActorStoppedError within a receive slice.
    """

    def __init__(self, address: str, *, connect_timeout: float = 30.0,
                 heartbeat: float = 1.0, heartbeat_timeout: float = 3.0):
        self.address = address
        self.connect_timeout = connect_timeout
        self._heartbeat_ms = int(heartbeat * 1000)
        self._heartbeat_timeout_ms = int(heartbeat_timeout * 1000)
        self._local = threading.local()
        self._connections: List[_Connection] = []
        self._lock = threading.Lock()
        self._req_ids = itertools.count(1)
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_all, self._connections, self._lock)
        self._finalizer.atexit = False
        TRAFFIC.watch(self)

    def connect(self, timeout: Optional[float] = None) -> None:
        """Establish this thread's connection now; PeerLostError if it cannot within `timeout`."""
        self._release(self._using(self.connect_timeout if timeout is None else timeout))

    def call(self, kind: int, payload: Any = None, timeout: Optional[float] = None, *,
             json: bool = False, same_host: bool = False,
             waiting: Optional[Callable[[], Any]] = None, what: Any = None,
             stray: Optional[Callable[[int, Any], Any]] = None) -> Any:
        """Send a request and return the reply's payload, or raise the error it carries.

        `json` sends it in the JSON codec (the reply comes back in it too); `same_host`
        lets large buffers go through shared memory both ways. `waiting()`
        is called every receive slice while no reply has come (to report a long wait).
        `what` names what the request calls in the flight recorder. `stray(kind, result)`
        is given each successful reply to an earlier call of this thread that was
        abandoned (interrupted, or timed out), which is otherwise dropped.

        ActorStoppedError: the channel is closed, or was closed during the call;
        PeerLostError: the connection is down or dropped during the call;
        RequestTimeoutError: no reply within `timeout` seconds (None waits forever), also
        one shorter than the receive slice in which the peer's loss is checked;
        ValueError: a NaN timeout, before anything is sent.
        """
        check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        req_id = next(self._req_ids)
        frames = envelope.encode(kind, req_id, payload, request_flags(json, same_host))
        conn = self._using(self.connect_timeout, frames)
        try:
            return self._exchange(conn, frames, kind, req_id, timeout, deadline, waiting, what,
                                  stray)
        finally:
            self._release(conn)

    def _exchange(self, conn: _Connection, frames: list, kind: int, req_id: int,
                  timeout: Optional[float], deadline: Optional[float],
                  waiting: Optional[Callable[[], Any]], what: Any,
                  stray: Optional[Callable[[int, Any], Any]]) -> Any:
        drops = conn.drops
        if RECORDING:  # taken before it leaves: see ActorCore.request
            conn.calling = ((monotonic_ns(), SENT, self.address, kind, req_id,
                             envelope.message_bytes(frames), 0, what, None), timeout)
        # A timeout shorter than a receive slice ends the first receive.
        short = deadline is not None and timeout * 1000 < _SLICE_MS
        try:
            try:
                send_frames(conn.socket, frames)
            except zmq.ZMQError:  # not queued: the message cannot arrive
                envelope.discard(frames)
                raise
            if short:
                conn.socket.setsockopt(zmq.RCVTIMEO, max(1, math.ceil(timeout * 1000)))
            about_to_block()
            while True:
                try:
                    # Blocking receive in short slices: the fast path is one plain recv,
                    # and between slices the monitor says whether the peer went away.
                    reply = recv_frames(conn.socket)
                except zmq.Again:
                    if self._closed:
                        raise ActorStoppedError(f"channel to {self.address} is closed") from None
                    conn.read_monitor()
                    if conn.refused:
                        self._refused(conn)
                    if not conn.connected or conn.drops != drops:
                        raise PeerLostError(self.address, "connection lost") from None
                    if deadline is not None and time.monotonic() >= deadline:
                        dump_recorder("request_timeout")
                        raise RequestTimeoutError(
                            f"no reply from {self.address} within {timeout:g}s") from None
                    if waiting is not None:
                        waiting()
                    continue
                header = envelope.read_header(reply)
                if header.req_id != req_id or not header.flags & RESPONSE:
                    if RECORDING:  # the late answer to an earlier call that timed out
                        record((monotonic_ns(), ANSWERED, self.address, header.kind,
                                header.req_id, 0, envelope.message_bytes(reply), None, None))
                    if stray is not None and header.flags & RESPONSE \
                            and not header.flags & ERROR:
                        stray(header.kind, envelope.read_payload(header, reply))
                    else:
                        envelope.discard(reply)
                    continue
                calling, conn.calling = conn.calling, None
                if calling is not None:
                    sent = calling[0]
                    record((monotonic_ns(), CALLED, self.address, kind, req_id, sent[5],
                            envelope.message_bytes(reply), what, sent[0] / 1e9))
                result = envelope.read_payload(header, reply)
                if header.flags & ERROR:
                    raise exception_from_payload(result)
                return result
        finally:
            if short and not conn.socket.closed:
                conn.socket.setsockopt(zmq.RCVTIMEO, _SLICE_MS)
            # Ended without its reply: recorded as its send, taken off the connection
            # first so that no reader counts it twice.
            calling, conn.calling = conn.calling, None
            if calling is not None:
                record(calling[0])

    def open_entries(self) -> List[tuple]:
        """Flight-recorder entries of the calls waiting for their replies (their sends)."""
        return [entry for entry, _, _ in self._waiting()]

    def calls_waiting(self) -> List[Tuple[str, Any, int, float, Optional[float]]]:
        """The calls waiting for their replies, each ``(address, what it calls, thread
        ident, monotonic seconds at its send, timeout)`` (none when introspection is
        off)."""
        return [(self.address, entry[7], thread, entry[0] / 1e9, timeout)
                for entry, thread, timeout in self._waiting()]

    def _waiting(self) -> List[Tuple[tuple, int, Optional[float]]]:
        waiting = []
        for conn in list(self._connections):
            calling = conn.calling  # read once: its thread may end it
            if calling is not None:
                waiting.append((calling[0], conn.thread, calling[1]))
        return waiting

    def close(self) -> None:
        """Close every idle connection; a thread inside a call fails it with
        ActorStoppedError and closes its own. Calls after this raise ActorStoppedError."""
        with self._lock:
            self._closed = True
        self._finalizer()

    def _using(self, connect_timeout: float, unsent: Optional[list] = None) -> _Connection:
        """This thread's connection, up and marked busy until `_release`; `unsent`, the
        frames of a request, are discarded if there is no connection to send them on.

        A pair of calls, not a context manager: it wraps every call on the hot path."""
        conn = None
        try:
            conn = self._claim()
            self._up(conn, connect_timeout)
        except BaseException:
            if unsent is not None:
                envelope.discard(unsent)
            if conn is not None:
                self._release(conn)
            raise
        return conn

    def _claim(self) -> _Connection:
        """This thread's connection, marked busy; made here on this thread's first call."""
        conn = getattr(self._local, "conn", None)
        with self._lock:
            if self._closed:
                raise ActorStoppedError(f"channel to {self.address} is closed")
            if conn is None:
                self._close_dead_threads_connections()
                conn = _Connection(process_context(), self.address, self._heartbeat_ms,
                                   self._heartbeat_timeout_ms)
                self._connections.append(conn)
                self._local.conn = conn
            conn.busy = True
        return conn

    def _release(self, conn: _Connection) -> None:
        """`conn`'s thread is out of its call; if the channel was closed meanwhile, the
        thread closes its own socket here."""
        with self._lock:
            conn.busy = False
            orphaned = self._closed and conn in self._connections
            if orphaned:
                self._connections.remove(conn)
        if orphaned:
            conn.close()

    def _close_dead_threads_connections(self) -> None:
        """Close the connections of threads that ended (call under `_lock`): nothing
        uses them any more, so closing them from this thread is safe. A thread not
        started by `threading` (a C library's) always looks alive: its connection
        stays until `close()`."""
        dead = [conn for conn in self._connections if not conn.owner.is_alive()]
        for conn in dead:
            self._connections.remove(conn)
            conn.close()

    def _up(self, conn: _Connection, connect_timeout: float) -> None:
        """Make sure `conn` is up: a dropped one fails fast, a new one gets a grace time."""
        if conn.connected:
            # The monitor is read between receive slices: a drop shows there.
            return
        conn.read_monitor()
        if conn.connected:
            return
        if conn.refused:
            self._refused(conn)
        if conn.ever_connected:
            raise PeerLostError(self.address, "connection lost")
        deadline = time.monotonic() + connect_timeout
        with SlowWait(lambda: f"connecting to {self.address}: nothing answers there yet"
                      ) as report:
            while not conn.connected:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not conn.monitor.poll(
                        int(min(remaining, report.next_in(), _SLICE_MS / 1000) * 1000) + 1):
                    if conn.connected:
                        break
                    if self._closed:  # in slices, as a call's wait: see the module doc
                        raise ActorStoppedError(f"channel to {self.address} is closed")
                    if time.monotonic() < deadline:
                        report.tick()  # woken to say what it waits for
                        continue
                    raise PeerLostError(self.address,
                                        f"could not connect within {connect_timeout:g}s")
                conn.read_monitor()
                if conn.refused:
                    self._refused(conn)

    def _refused(self, conn: _Connection) -> None:
        """Close a connection whose handshake the peer refused (libzmq would retry it
        forever) and say why; the thread's next call connects anew."""
        with self._lock:
            if conn in self._connections:
                self._connections.remove(conn)
        conn.close()
        self._local.conn = None
        raise PeerLostError(self.address, refusal())


def _close_all(connections: List[_Connection], lock: threading.Lock) -> None:
    """Close the idle connections; a busy one is left to its thread (see the module)."""
    with lock:
        for conn in [conn for conn in connections if not conn.busy]:
            connections.remove(conn)
            conn.close()
