"""The mailbox: one I/O thread that owns every ZeroMQ socket of an actor and moves bytes.

It owns the ROUTER socket bound at the actor's address, one DEALER per peer it
sends requests to (with a monitor socket that reports a lost connection), a wake-up
pipe that lets other threads hand it work, and a timer heap. It knows nothing of
message contents: the actor decodes them.

Replies are the one exception to "every socket call on the I/O thread": a worker
thread sends its reply on the ROUTER itself, under a lock, instead of waking the
I/O thread to do it (a thread wake-up is a large share of a round trip). The I/O
thread therefore never sleeps inside ZeroMQ on the ROUTER: it polls the socket's
notification descriptor and reads ``EVENTS`` under the lock, and a thread that
used the socket wakes it if messages are waiting, because its call may have
consumed the notification.
"""
from __future__ import annotations

import collections
import heapq
import itertools
import select
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import zmq
from zmq.utils.monitor import recv_monitor_message

from .errors import ActorStoppedError, AddressInUseError
from .log import get_logger
from .sockets import open_dealer, recv_frames, send_frames
from .wakeup import WakePipe

log = get_logger(__name__)

# Batch bound per socket and poll round, so one busy socket cannot starve the others.
_RECV_BATCH = 64
_POLLIN = int(zmq.POLLIN)
_LONGEST_POLL_MS = 60_000


class TimerHandle:
    __slots__ = ("deadline", "fn", "args", "cancelled")

    def __init__(self, deadline: float, fn: Callable[..., Any], args: tuple):
        self.deadline, self.fn, self.args, self.cancelled = deadline, fn, args, False

    def cancel(self) -> None:
        self.cancelled = True


class Mailbox:
    """Sockets plus the loop that serves them; every socket call happens on its thread.

    Callbacks (run on the I/O thread): ``on_request(identity, frames)`` for a message
    on the ROUTER, ``on_reply(peer, frames)`` for a message on a peer's DEALER,
    ``on_peer_lost(peer, reason)`` when an established connection to a peer drops.
    """

    def __init__(self, bind: Optional[str], name: str,
                 on_request: Callable[[bytes, List[zmq.Frame]], None],
                 on_reply: Callable[[str, List[zmq.Frame]], None],
                 on_peer_lost: Callable[[str, str], None],
                 heartbeat: float = 1.0, heartbeat_timeout: float = 3.0,
                 workers_receive: bool = False):
        self.name = name
        self._on_request, self._on_reply, self._on_peer_lost = on_request, on_reply, on_peer_lost
        self._heartbeat_ms = int(heartbeat * 1000)
        self._heartbeat_timeout_ms = int(heartbeat_timeout * 1000)
        self._ctx = zmq.Context()
        self._router: Optional[zmq.Socket] = None
        self._router_lock = threading.Lock()
        # Sender tracking (off until asked for): which connection each sender spoke on.
        self._on_sender_lost: Optional[Callable[[bytes], None]] = None
        self._router_monitor: Optional[zmq.Socket] = None
        self._sender_fds: Dict[bytes, int] = {}
        self.address: Optional[str] = None
        if bind is not None:
            self._router = self._bind(bind)
        self._dealers: Dict[str, zmq.Socket] = {}
        self._dealer_peers: Dict[zmq.Socket, str] = {}
        self._monitors: Dict[zmq.Socket, str] = {}
        self._connected: Dict[str, bool] = {}
        self._commands: "collections.deque[tuple]" = collections.deque()
        self._io_wake = WakePipe()
        self._wake_pending = False
        # With `workers_receive`, requests are read by `receive_request`, not the loop.
        self._receiver_wake = WakePipe() if workers_receive else None
        self._receiver_poller: Optional[Any] = None  # a select.poll object
        self._timers: List[tuple] = []
        self._timer_seq = itertools.count()
        self._poller = zmq.Poller()
        self._running = False
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name=f"{name}-io", daemon=True)

    def _bind(self, address: str) -> zmq.Socket:
        router = self._ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.LINGER, 0)
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        router.setsockopt(zmq.RCVHWM, 0)
        router.setsockopt(zmq.SNDHWM, 0)
        # Before bind: a listener takes the socket's options when it is bound, so
        # heartbeats set later would never reach the connections it accepts.
        router.setsockopt(zmq.HEARTBEAT_IVL, self._heartbeat_ms)
        router.setsockopt(zmq.HEARTBEAT_TIMEOUT, self._heartbeat_timeout_ms)
        if address.startswith("tcp://") and address.endswith(":0"):
            address = address[:-2] + ":*"
        try:
            router.bind(address)
        except zmq.ZMQError as exc:
            router.close(0)
            self._ctx.term()
            if exc.errno == zmq.EADDRINUSE:
                raise AddressInUseError(address) from None
            raise OSError(exc.errno, f"cannot bind {address}: {exc}") from None
        self.address = router.getsockopt(zmq.LAST_ENDPOINT).decode()
        return router

    # ---- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        self._running = True
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop, close every socket and the context; bounded by `timeout`."""
        if not self._running:
            self._close_all()
            return
        self._stopping = True
        self._io_wake.wake()
        self.wake_receiver()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("mailbox_thread_still_running", actor=self.name)

    def in_io_thread(self) -> bool:
        return threading.current_thread() is self._thread

    # ---- thread-safe entry points -------------------------------------------------

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the I/O thread, soon; callable from any thread."""
        if self._stopping:
            raise ActorStoppedError(f"actor {self.name} is stopped")
        self._commands.append((fn, args))
        # Append before reading the flag; the loop clears the flag before draining.
        if not self._wake_pending:
            self._wake_pending = True
            self._io_wake.wake()

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run `fn(*args)` on the I/O thread after `delay` seconds; I/O thread only."""
        handle = TimerHandle(time.monotonic() + delay, fn, args)
        heapq.heappush(self._timers, (handle.deadline, next(self._timer_seq), handle))
        return handle

    def track_senders(self, on_sender_lost: Callable[[bytes], None]) -> None:
        """Call `on_sender_lost(identity)` when the connection a sender spoke on closes.

        ZeroMQ hides connections behind the ROUTER, so each received message's source
        descriptor is noted per sender and matched against the monitor's
        disconnect events. ZMTP heartbeats close the connection of a peer that stops
        answering, so a hung sender is reported too. Call before `start()`.
        """
        if self._router is None or self._running:
            raise RuntimeError("track_senders needs a bound mailbox that has not started")
        self._on_sender_lost = on_sender_lost
        self._router_monitor = self._router.get_monitor_socket(zmq.EVENT_DISCONNECTED)

    def send_to_sender(self, identity: bytes, frames: List[Any]) -> None:
        """Send `frames` back to the ROUTER peer `identity`, from the calling thread."""
        with self._router_lock:
            router = self._router
            if router is None:
                return
            try:
                send_frames(router, [identity, *frames])
            except zmq.ZMQError as exc:
                # ROUTER_MANDATORY: the requester disconnected before its reply was ready.
                log.info("reply_undeliverable", actor=self.name, reason=str(exc))
            waiting = router.getsockopt(zmq.EVENTS) & _POLLIN
        if waiting:
            self._wake_router_reader()

    def send_to_peer(self, address: str, frames: List[Any]) -> None:
        """Send `frames` to the actor at `address` over its DEALER; callable from any thread."""
        if self.in_io_thread():
            self._send_to_peer(address, frames)
        else:
            self.call_soon(self._send_to_peer, address, frames)

    # ---- I/O thread ---------------------------------------------------------------

    def _send_to_peer(self, address: str, frames: List[Any]) -> None:
        send_frames(self._dealer(address), frames)

    def _dealer(self, address: str) -> zmq.Socket:
        dealer = self._dealers.get(address)
        if dealer is None:
            dealer, monitor = open_dealer(self._ctx, address, self._heartbeat_ms,
                                          self._heartbeat_timeout_ms)
            self._dealers[address] = dealer
            self._dealer_peers[dealer] = address
            self._monitors[monitor] = address
            self._connected[address] = False
            self._poller.register(dealer, zmq.POLLIN)
            self._poller.register(monitor, zmq.POLLIN)
        return dealer

    def _wake_router_reader(self) -> None:
        """Wake whoever reads the ROUTER: messages wait, and its notification may be spent."""
        if self._receiver_wake is not None:
            self._receiver_wake.wake()
        elif not self.in_io_thread():  # the loop reads EVENTS before it sleeps
            self._io_wake.wake()

    def _loop(self) -> None:
        poller = self._poller
        router_fd = None
        if self._router is not None and self._receiver_wake is None:
            router_fd = self._router.getsockopt(zmq.FD)
            poller.register(router_fd, zmq.POLLIN)
        if self._router_monitor is not None:
            poller.register(self._router_monitor, zmq.POLLIN)
        poller.register(self._io_wake.fd, zmq.POLLIN)
        try:
            while not self._stopping:
                # Messages may wait with the descriptor quiet: read EVENTS first.
                more = router_fd is not None and self._drain_router()
                events = poller.poll(0 if more else self._poll_timeout_ms())
                for sock, _ in events:
                    if sock == router_fd:
                        continue  # drained at the top of the loop
                    elif sock == self._io_wake.fd:
                        self._drain_commands()
                    elif sock is self._router_monitor:
                        self._on_router_disconnect()
                    elif sock in self._monitors:
                        self._on_monitor_event(sock)
                    else:
                        self._drain_dealer(sock)
                self._run_timers()
        except Exception:  # noqa: BLE001 - logged; teardown below fails what is pending
            log.exception("mailbox_loop_crashed", actor=self.name)
        finally:
            self._close_all()

    def _poll_timeout_ms(self) -> Optional[int]:
        if self._commands:
            return 0
        if not self._timers:
            return None
        due_ms = int((self._timers[0][0] - time.monotonic()) * 1000) + 1
        # ZeroMQ takes a C int: a far timer (a wait "forever") is re-checked now and then.
        return min(max(0, due_ms), _LONGEST_POLL_MS)

    def _drain_router(self) -> bool:
        """Dispatch waiting requests, a batch at most; True if more are waiting."""
        for _ in range(_RECV_BATCH):
            request = self._take_request()
            if request is None:
                return False
            self._dispatch(self._on_request, *request)
        return True

    def _take_request(self) -> Optional[Tuple[bytes, List[zmq.Frame]]]:
        """One waiting request as ``(identity, frames)``, or None; any thread."""
        with self._router_lock:
            router = self._router
            # Asking EVENTS is cheaper than a receive that ends in zmq.Again.
            if router is None or not router.getsockopt(zmq.EVENTS) & _POLLIN:
                return None
            frames = recv_frames(router)
            identity = frames[0].bytes
            if self._on_sender_lost is not None:  # under the lock: see _on_router_disconnect
                self._sender_fds[identity] = frames[0].get(zmq.SRCFD)
        return identity, frames[1:]

    def receive_request(self, timeout: float) -> Optional[Tuple[bytes, List[zmq.Frame]]]:
        """The next request, waiting up to `timeout` seconds; for mailboxes built with
        `workers_receive`, by one thread at a time.

        None if none came, or `wake_receiver` was called.
        """
        request = self._take_request()
        if request is not None:
            return request
        with self._router_lock:
            poller = self._receiver_poller if self._router is not None else None
            if poller is None:  # built once; once the ROUTER is closed, only a wake-up
                poller = select.poll()
                poller.register(self._receiver_wake.fd, select.POLLIN)
                if self._router is not None:
                    poller.register(self._router.getsockopt(zmq.FD), select.POLLIN)
                    self._receiver_poller = poller
        for fd, _ in poller.poll(int(timeout * 1000)):
            if fd == self._receiver_wake.fd:
                self._receiver_wake.drain()
        return self._take_request()

    def wake_receiver(self) -> None:
        """Make a pending `receive_request` return."""
        if self._receiver_wake is not None:
            self._receiver_wake.wake()

    def close_receiver(self) -> None:
        """Release what `receive_request` waits on, once no thread calls it any more."""
        if self._receiver_wake is not None:
            self._receiver_wake.close()

    def _drain_dealer(self, dealer: zmq.Socket) -> None:
        address = self._dealer_peers[dealer]
        for _ in range(_RECV_BATCH):
            self._dispatch(self._on_reply, address, recv_frames(dealer))
            if not dealer.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                return

    def _dispatch(self, callback: Callable[..., None], origin: Any, frames: list) -> None:
        try:
            callback(origin, frames)
        except Exception:  # noqa: BLE001 - one bad message must not stop the mailbox
            log.exception("message_handling_failed", actor=self.name)

    def _on_router_disconnect(self) -> None:
        fd = recv_monitor_message(self._router_monitor)["value"]
        # Under the lock that receiving threads hold while they note a sender, so that
        # no message read from the closed connection is noted after this.
        with self._router_lock:
            lost = [identity for identity, known in self._sender_fds.items() if known == fd]
            for identity in lost:
                del self._sender_fds[identity]
        for identity in lost:
            log.info("sender_lost", actor=self.name, sender=identity.hex())
            self._dispatch(lambda _origin, who: self._on_sender_lost(who), None, identity)

    def _drain_commands(self) -> None:
        self._io_wake.drain()
        self._wake_pending = False
        commands = self._commands
        while commands:
            fn, args = commands.popleft()
            try:
                fn(*args)
            except Exception:  # noqa: BLE001
                log.exception("mailbox_command_failed", actor=self.name,
                              command=getattr(fn, "__qualname__", repr(fn)))

    def _on_monitor_event(self, monitor: zmq.Socket) -> None:
        address = self._monitors[monitor]
        event = recv_monitor_message(monitor)["event"]
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self._connected[address] = True
            log.debug("peer_connected", actor=self.name, peer=address)
        elif event == zmq.EVENT_DISCONNECTED and self._connected.get(address):
            self._connected[address] = False
            log.info("peer_lost", actor=self.name, peer=address)
            self._dispatch(self._on_peer_lost, address, "connection lost")

    def _run_timers(self) -> None:
        now = time.monotonic()
        timers = self._timers
        while timers and timers[0][0] <= now:
            handle = heapq.heappop(timers)[2]
            if not handle.cancelled:
                self._dispatch(lambda _origin, h: h.fn(*h.args), None, handle)

    def _close_all(self) -> None:
        for monitor in list(self._monitors):
            monitor.close(0)
        self._monitors.clear()
        for dealer in self._dealers.values():
            dealer.close(0)
        self._dealers.clear()
        self._dealer_peers.clear()
        if self._router_monitor is not None:
            self._router_monitor.close(0)
        with self._router_lock:
            if self._router is not None:
                self._router.close(0)
                self._router = None
                self._receiver_poller = None
        self._io_wake.close()
        self._ctx.term()
        self._stopping = True
