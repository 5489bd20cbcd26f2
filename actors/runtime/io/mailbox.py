"""The mailbox: an actor's I/O thread, which owns its outgoing sockets and moves bytes.

It owns one DEALER per peer it sends requests to (with a monitor socket that reports
a lost connection), the monitor of the actor's ROUTER, a wake-up pipe through which
other threads hand it work, and a timer heap. When the actor's requests are read by
this thread (`read_router`), it also waits on the `Router` and takes requests from
it. It knows nothing of message contents: the actor decodes them.

The loop ends when `stop` or `close_soon` asks; on its way out it closes every socket
it owns and calls `on_closed` (the actor's teardown), on its own thread.
"""
from __future__ import annotations

import collections
import heapq
import itertools
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import zmq

from .context import process_context
from ..errors import ActorStoppedError
from ..process.log import get_logger
from .peers import PeerTable
from .router import Router
from .sockets import (EVENTS, MONITOR_EVENTS, POLLIN, close_monitored, open_dealer, recv_frames,
                      recv_monitor_event, send_frames)
from ..concurrency.threads import new_thread
from .wakeup import WakePipe

log = get_logger(__name__)

# Batch bound per socket and poll round, so one busy socket cannot starve the others.
_RECV_BATCH = 64
_LONGEST_POLL_MS = 60_000


class TimerHandle:
    __slots__ = ("deadline", "fn", "args", "cancelled")

    def __init__(self, deadline: float, fn: Callable[..., Any], args: tuple):
        self.deadline, self.fn, self.args, self.cancelled = deadline, fn, args, False

    def cancel(self) -> None:
        self.cancelled = True


class Mailbox:
    """The I/O thread and the sockets it owns; every call on those sockets is on it.

    Callbacks (run on the I/O thread): ``on_reply(peer, frames)`` for a message on a
    peer's DEALER, ``on_peer_lost(peer, reason)`` once per loss, as `peers` decides it
    from what the monitors see (an established connection drops, the first attempt
    to connect fails, the peer refuses the handshake); ``on_closed()`` once the loop
    has closed its sockets. Every DEALER presents `routing_id` to its peer (None:
    one ZeroMQ makes up per connection). ``on_unsent(frames)`` for each message a
    command would have sent when the loop stops before running it (the actor gives
    back what the message holds), before ``on_closed``.
    """

    def __init__(self, name: str, peers: PeerTable,
                 on_reply: Callable[[str, List[zmq.Frame]], None],
                 on_peer_lost: Callable[[str, str], None], on_closed: Callable[[], None],
                 routing_id: Optional[bytes] = None,
                 on_unsent: Callable[[List[Any]], None] = lambda message: None):
        self.name = name
        self._peers = peers
        self._routing_id = routing_id
        self._on_reply, self._on_peer_lost, self._on_closed = on_reply, on_peer_lost, on_closed
        self._on_unsent = on_unsent
        self._dealers: Dict[str, zmq.Socket] = {}
        self._dealer_peers: Dict[zmq.Socket, str] = {}
        self._dealer_monitors: Dict[str, zmq.Socket] = {}
        self._monitors: Dict[zmq.Socket, str] = {}
        self._router: Optional[Router] = None
        self._on_request: Optional[Callable[[bytes, list], None]] = None
        self._sender_monitor: Optional[zmq.Socket] = None
        self._watched: Dict[zmq.Socket, Callable[[int], None]] = {}  # attached sockets
        self._on_senders_lost: Optional[Callable[[int], None]] = None
        self._commands: "collections.deque[tuple]" = collections.deque()
        self._wake = WakePipe()
        self._wake_pending = False
        self._timers: List[tuple] = []
        self._timer_seq = itertools.count()
        self._poller = zmq.Poller()
        self._started = False
        self._stopping = False
        self._thread = new_thread(self._loop, name=f"{name}-io",
                                  owner="actors.runtime.io.mailbox.Mailbox",
                                  purpose="owns the actor's sockets, runs its timers")

    # ---- set-up (before start) ----------------------------------------------------

    def read_router(self, router: Router, on_request: Callable[[bytes, list], None]) -> None:
        """Make this thread the reader of `router`: ``on_request(identity, frames)`` each."""
        self._router, self._on_request = router, on_request
        router.set_reader(self.in_io_thread, self._wake.wake)

    def watch_senders(self, monitor: zmq.Socket, on_disconnect: Callable[[int], None]) -> None:
        """Read the ROUTER's disconnect `monitor`: ``on_disconnect(fd)`` for each event."""
        self._sender_monitor, self._on_senders_lost = monitor, on_disconnect

    # ---- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        self._started = True
        self._thread.start()

    def close_soon(self) -> None:
        """Ask the loop to end and close its sockets; returns at once (safe in a finalizer)."""
        self._stopping = True
        if self._started:
            self._wake.wake()
        else:
            self._close_all()

    def stop(self, timeout: float) -> None:
        """`close_soon`, then wait (at most `timeout`) for the loop to finish."""
        self.close_soon()
        if self._started and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("mailbox_thread_still_running", actor=self.name)

    def in_io_thread(self) -> bool:
        return threading.current_thread() is self._thread

    # ---- thread-safe entry points -------------------------------------------------

    def call_soon(self, fn: Callable[..., Any], *args: Any,
                  message: Optional[List[Any]] = None) -> None:
        """Run `fn(*args)` on the I/O thread, soon; callable from any thread.

        `message`: the frames the command sends, handed to `on_unsent` if the loop
        stops before running it.
        """
        if self._stopping:
            raise ActorStoppedError(f"actor {self.name} is stopped")
        self._commands.append((fn, args, message))
        # Append before reading the flag; the loop clears the flag before draining.
        if not self._wake_pending:
            self._wake_pending = True
            self._wake.wake()

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run `fn(*args)` on the I/O thread after `delay` seconds; I/O thread only."""
        handle = TimerHandle(time.monotonic() + delay, fn, args)
        heapq.heappush(self._timers, (handle.deadline, next(self._timer_seq), handle))
        return handle

    def watch(self, sock: zmq.Socket, events: int, on_ready: Callable[[int], None]) -> None:
        """Call ``on_ready(events)`` when `sock` has any of `events`; 0 stops watching.

        I/O thread only (or before `start`).
        """
        if events:
            self._poller.register(sock, events)
            self._watched[sock] = on_ready
        elif self._watched.pop(sock, None) is not None:
            self._poller.unregister(sock)

    def send_to_peer(self, address: str, frames: List[Any]) -> None:
        """Send `frames` to the actor at `address` over its DEALER; callable from any thread."""
        if self.in_io_thread():
            self.send_now(address, frames)
        else:
            self.call_soon(self.send_now, address, frames, message=frames)

    def send_now(self, address: str, frames: List[Any]) -> int:
        """Send on the DEALER to `address`, opening it on first use; I/O thread only.
        Returns the message's number among those sent to `address`."""
        send_frames(self._dealer(address), frames)
        return self._peers.count_sent(address)

    # ---- I/O thread ---------------------------------------------------------------

    def _dealer(self, address: str) -> zmq.Socket:
        dealer = self._dealers.get(address)
        if dealer is None:
            # Failed connection attempts too: this loop reads every event at once, and
            # a peer nothing listens for must not leave requests waiting out their timeout.
            liveness = self._peers.liveness
            dealer, monitor = open_dealer(process_context(), address, liveness.heartbeat_ms,
                                          liveness.timeout_ms,
                                          MONITOR_EVENTS | zmq.EVENT_CONNECT_RETRIED,
                                          self._routing_id)
            self._dealers[address] = dealer
            self._dealer_peers[dealer] = address
            self._dealer_monitors[address] = monitor
            self._monitors[monitor] = address
            self._peers.opened(address)
            self._poller.register(dealer, zmq.POLLIN)
            self._poller.register(monitor, zmq.POLLIN)
        return dealer

    def _loop(self) -> None:
        poller = self._poller
        router_fd = None
        if self._router is not None:
            router_fd = self._router.fd
            poller.register(router_fd, zmq.POLLIN)
        if self._sender_monitor is not None:
            poller.register(self._sender_monitor, zmq.POLLIN)
        poller.register(self._wake.fd, zmq.POLLIN)
        router_woke = False
        try:
            while not self._stopping:
                # Requests may wait with the descriptor quiet: take them first.
                more = router_fd is not None and self._drain_router(router_woke)
                router_woke = False
                events = poller.poll(0 if more else self._poll_timeout_ms())
                for sock, ready in events:
                    if sock == router_fd:
                        router_woke = True  # drained at the top of the loop
                    elif sock == self._wake.fd:
                        self._drain_commands()
                    elif sock is self._sender_monitor:
                        fd = recv_monitor_event(sock)[1]
                        self._dispatch(self._on_senders_lost, fd)
                    elif sock in self._monitors:
                        self._on_monitor_event(sock)
                    elif sock in self._watched:
                        self._dispatch(self._watched[sock], ready)
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

    def _drain_router(self, woken: bool) -> bool:
        """Dispatch waiting requests, a batch at most; True if more are waiting."""
        router = self._router
        take = router.take_woken if woken else router.take
        for _ in range(_RECV_BATCH):
            request = take()
            if request is None:
                return False
            self._dispatch(self._on_request, *request)
            take = router.take
        return True

    def _drain_dealer(self, dealer: zmq.Socket) -> None:
        address = self._dealer_peers[dealer]
        for _ in range(_RECV_BATCH):
            self._dispatch(self._on_reply, address, recv_frames(dealer))
            if not dealer.getsockopt(EVENTS) & POLLIN:
                return

    def _dispatch(self, callback: Callable[..., None], *args: Any) -> None:
        try:
            callback(*args)
        except Exception:  # noqa: BLE001 - one bad message must not stop the mailbox
            log.exception("message_handling_failed", actor=self.name)

    def _drain_commands(self) -> None:
        self._wake.drain()
        self._wake_pending = False
        commands = self._commands
        while commands:
            fn, args, _ = commands.popleft()
            try:
                fn(*args)
            except Exception:  # noqa: BLE001
                log.exception("mailbox_command_failed", actor=self.name,
                              command=getattr(fn, "__qualname__", repr(fn)))

    def _on_monitor_event(self, monitor: zmq.Socket) -> None:
        address = self._monitors[monitor]
        event = recv_monitor_event(monitor)[0]
        reason = self._peers.observe(address, event)
        if reason is not None:
            self.announce_lost(address, reason)
        elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            log.debug("peer_connected", actor=self.name, peer=address)

    def announce_lost(self, address: str, reason: str) -> None:
        """Tell the actor that the peer table found `address` lost; I/O thread only."""
        # What the peer delivered before it went is handed up before its loss.
        while self._router is not None and self._drain_router(False):
            pass
        log.info("peer_lost", actor=self.name, peer=address, reason=reason)
        self._dispatch(self._on_peer_lost, address, reason)

    def _run_timers(self) -> None:
        now = time.monotonic()
        timers = self._timers
        while timers and timers[0][0] <= now:
            handle = heapq.heappop(timers)[2]
            if not handle.cancelled:
                self._dispatch(handle.fn, *handle.args)

    def _close_all(self) -> None:
        self._stopping = True
        for address, dealer in self._dealers.items():
            close_monitored(dealer, self._dealer_monitors[address])
        self._monitors.clear()
        self._dealers.clear()
        self._dealer_peers.clear()
        self._dealer_monitors.clear()
        self._timers.clear()
        while self._commands:
            _, _, message = self._commands.popleft()
            if message is not None:
                self._dispatch(self._on_unsent, message)
        # The teardown closes the router, which switches off its monitor first.
        self._dispatch(self._on_closed)
        if self._sender_monitor is not None:
            self._sender_monitor.close(0)
            self._sender_monitor = None
        self._wake.close()
