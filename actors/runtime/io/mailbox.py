"""The mailbox: an actor's I/O thread, which owns its outgoing sockets and moves bytes.

It owns one DEALER per peer it sends requests to (with a monitor socket that reports
a lost connection), the monitor of the actor's ROUTER, a wake-up pipe through which
other threads hand it work, and a timer heap. When the actor's requests are read by
this thread (`read_router`), it also waits on the `Router` and takes requests from
it, but while a thread that waits for a message reads them itself (`read_here`,
`router_turns`). It knows nothing of message contents: the actor decodes them.

A one-way message from another thread leaves on the peer's DEALER at once, sent by
that thread under the DEALER's lock, unless commands wait for this thread (they may
hold that thread's earlier messages, which leave first); the first message to a peer,
requests and everything the I/O thread sends go through the I/O thread. Handing a
message over costs a thread wake-up on its way (docs/PERFORMANCE.md).

It sleeps on its own sockets' notification descriptors, not on the sockets: ZeroMQ's
own poll reads every socket's state, which would race with those sends, and costs
more than the wait itself once an actor has many peers. A descriptor is
edge-triggered: a socket it woke is read until it has nothing left, and one that a
send or a batch bound may have left with messages unannounced is kept in `_unread`
and looked at again before the next sleep. Attached sockets are polled as sockets.

The loop ends when `stop` or `close_soon` asks; on its way out it closes every socket
it owns and calls `on_closed` (the actor's teardown), on its own thread.
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Dict, List, Optional, Set

import zmq

from .context import process_context
from ..errors import ActorStoppedError, PeerLostError
from ..process.log import get_logger
from .peers import PeerTable
from .router import Router
from .router_turns import RouterTurns
from .sockets import (EVENTS, MONITOR_EVENTS, NOBLOCK, POLLIN, RECV_BATCH,
                      close_monitored, open_dealer, recv_frames, recv_monitor_event,
                      refusal, send_frames)
from ..concurrency.blocking import running_io_loop
from ..concurrency.threads import new_thread
from .timers import TimerHandle, Timers
from .wakeup import WakePipe

log = get_logger(__name__)



class _Dealer:
    """The DEALER to one peer, its monitor, and the lock under which any thread uses it.

    The lock is re-entrant only so that `held_here` can tell that this thread is inside
    (a finalizer that the garbage collector runs in the middle of a send): a send from
    there must not start a message inside another, nor wait for its own thread.
    """

    __slots__ = ("address", "socket", "monitor", "lock")

    def __init__(self, address: str, sock: zmq.Socket, monitor: zmq.Socket):
        self.address, self.socket, self.monitor = address, sock, monitor
        self.lock = threading.RLock()

    def held_here(self) -> bool:
        return self.lock._is_owned()  # what threading.Condition asks an RLock


class Mailbox:
    """The I/O thread and the sockets it owns; every call on those sockets is on it, but
    for other threads' one-way sends (`send_to_peer`, under the DEALER's lock) and a
    waiting thread's turn at the ROUTER (`read_here`).

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
        self._dealers: Dict[str, _Dealer] = {}
        self._dealer_peers: Dict[zmq.Socket, _Dealer] = {}
        self._monitors: Dict[zmq.Socket, str] = {}
        self._by_fd: Dict[int, zmq.Socket] = {}  # notification descriptor -> own socket
        self._unread: Set[zmq.Socket] = set()  # own sockets to read before sleeping
        self._turns: Optional[RouterTurns] = None  # the ROUTER's reading, if this thread reads it
        self._sender_monitor: Optional[zmq.Socket] = None
        self._watched: Dict[zmq.Socket, Callable[[int], None]] = {}  # attached sockets
        self._on_senders_lost: Optional[Callable[[int], None]] = None
        self._commands: "collections.deque[tuple]" = collections.deque()
        self._draining = False  # commands taken off `_commands` may still be running
        self._wake = WakePipe()
        self._wake_pending = False
        self._timers = Timers()
        self._poller = zmq.Poller()
        self._started = False
        self._stopping = False
        self._thread = new_thread(self._loop, name=f"{name}-io",
                                  owner="actors.runtime.io.mailbox.Mailbox",
                                  purpose="owns the actor's sockets, runs its timers")

    # ---- set-up (before start) ----------------------------------------------------

    def read_router(self, router: Router, on_request: Callable[[bytes, list], None]) -> None:
        """Make this thread the reader of `router`, but during a waiting thread's turn
        (`read_here`): ``on_request(identity, frames)`` for each request, on the thread
        that took it."""
        self._turns = RouterTurns(router, lambda *request: self._dispatch(on_request, *request),
                                  self._wake.wake)
        router.set_reader(lambda: self._turns.reads_here(self.in_io_thread()),
                          self._wake_readers)

    def _wake_readers(self) -> None:
        self._wake.wake()
        if self._turns.lent:
            self._turns.interrupt()

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

    def read_here(self, timeout: Optional[float]) -> bool:
        """Read the ROUTER on the calling thread, which waits for a message: dispatch the
        requests waiting, or sleep until one comes (at most `timeout` seconds, None: no
        limit, or until `interrupt_reading`) and dispatch it. False, at once, when this
        thread does not read the ROUTER, or another thread does: wait another way."""
        turns = self._turns
        return turns is not None and not self.in_io_thread() and turns.read_here(timeout)

    def interrupt_reading(self) -> None:
        """End the sleep of a thread in `read_here` (or of the next one); any thread."""
        if self._turns is not None:
            self._turns.interrupt()

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
        return self._timers.add(delay, fn, args)

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
        """Send `frames` to the actor at `address` over its DEALER; callable from any thread.

        From another thread: ActorStoppedError once the mailbox is stopping, or when
        ZeroMQ refuses the message; PeerLostError if the peer refused the connection.
        """
        dealer = self._dealers.get(address)
        if self.in_io_thread():
            if dealer is not None and dealer.held_here():  # a finalizer, mid-read
                self.call_soon(self.send_now, address, frames, message=frames)
            else:
                self.send_now(address, frames)
            return
        # Read in this order: a command is appended before the loop takes it, and the
        # loop raises `_draining` before it takes one.
        if dealer is None or self._commands or self._draining or dealer.held_here():
            self.call_soon(self.send_now, address, frames, message=frames)
            return
        try:
            self._send_here(dealer, frames)
        except zmq.Again:  # no connection to queue on: the peer refused it
            raise PeerLostError(address, refusal()) from None
        except zmq.ZMQError as exc:
            raise ActorStoppedError(f"actor {self.name} cannot send to {address}: "
                                    f"{exc}") from None

    def _send_here(self, dealer: _Dealer, frames: List[Any]) -> None:
        """Send on `dealer` from this thread, another than the I/O thread."""
        sock = dealer.socket
        # A send, even one that fails, may take in a reply that the descriptor will
        # then not announce: the I/O thread looks at the socket unless it is known empty.
        unannounced = True
        try:
            with dealer.lock:
                if self._stopping or sock.closed:
                    unannounced = False
                    raise ActorStoppedError(f"actor {self.name} is stopped")
                send_frames(sock, frames, NOBLOCK)
                self._peers.count_sent(dealer.address)
                unannounced = sock.getsockopt(EVENTS) & POLLIN
        finally:
            if unannounced:
                self._unread.add(sock)
                self._wake.wake()

    def send_now(self, address: str, frames: List[Any]) -> int:
        """Send on the DEALER to `address`, opening it on first use; I/O thread only.
        Returns the message's number among those sent to `address`."""
        dealer = self._dealer(address)
        try:
            with dealer.lock:
                send_frames(dealer.socket, frames)
                return self._peers.count_sent(address)
        finally:
            # The send, even one that failed, may have taken in a reply that the
            # descriptor will not announce.
            self._unread.add(dealer.socket)

    # ---- I/O thread ---------------------------------------------------------------

    def _dealer(self, address: str) -> _Dealer:
        dealer = self._dealers.get(address)
        if dealer is None:
            # Failed connection attempts too: this loop reads every event at once, and
            # a peer nothing listens for must not leave requests waiting out their timeout.
            liveness = self._peers.liveness
            sock, monitor = open_dealer(process_context(), address, liveness.heartbeat_ms,
                                        liveness.timeout_ms,
                                        MONITOR_EVENTS | zmq.EVENT_CONNECT_RETRIED,
                                        self._routing_id)
            dealer = _Dealer(address, sock, monitor)
            self._dealer_peers[sock] = dealer
            self._monitors[monitor] = address
            self._peers.opened(address)
            self._listen(sock)
            self._listen(monitor)
            self._dealers[address] = dealer  # from now on other threads send on it
        return dealer

    def _listen(self, sock: zmq.Socket) -> None:
        """Wake the loop when `sock`, a socket of this mailbox, may have messages."""
        fd = sock.getsockopt(zmq.FD)
        self._by_fd[fd] = sock
        self._poller.register(fd, zmq.POLLIN)
        self._unread.add(sock)

    def _loop(self) -> None:
        running_io_loop(self.name)
        poller, turns = self._poller, self._turns
        reading_fd = None  # the epoll set of the ROUTER's descriptor
        if turns is not None:
            reading_fd = turns.fd
            poller.register(reading_fd, zmq.POLLIN)
        if self._sender_monitor is not None:
            self._listen(self._sender_monitor)
        poller.register(self._wake.fd, zmq.POLLIN)
        router_woke = False
        try:
            while not self._stopping:
                # Requests may wait with the descriptor quiet: take them first.
                more = turns is not None and turns.io_reads() and \
                    turns.drain(router_woke) == RECV_BATCH
                router_woke = False
                if self._unread:
                    self._read_unread()
                events = poller.poll(0 if more or self._unread else self._poll_timeout_ms())
                for sock, ready in events:
                    if sock == reading_fd:
                        router_woke = True  # drained at the top of the loop
                    elif sock == self._wake.fd:
                        self._drain_commands()
                    elif sock in self._by_fd:
                        self._read(self._by_fd[sock])
                    elif sock in self._watched:  # not unwatched by an earlier handler
                        self._dispatch(self._watched[sock], ready)
                self._run_timers()
        except Exception:  # noqa: BLE001 - logged; teardown below fails what is pending
            log.exception("mailbox_loop_crashed", actor=self.name)
        finally:
            self._close_all()

    def _poll_timeout_ms(self) -> Optional[int]:
        if self._commands:
            return 0
        timer = self._timers.sleep_ms()
        recheck = None if self._turns is None else self._turns.recheck_ms()
        return timer if recheck is None else recheck if timer is None else min(timer, recheck)

    def _read_unread(self) -> None:
        for sock in list(self._unread):
            self._read(sock)

    def _read(self, sock: zmq.Socket) -> None:
        """Take what `sock`, one of this mailbox's sockets, holds: a batch at most, after
        which it stays in `_unread`."""
        self._unread.discard(sock)
        dealer = self._dealer_peers.get(sock)
        for _ in range(RECV_BATCH):
            if dealer is None:  # a monitor, read by this thread alone
                if not sock.getsockopt(EVENTS) & POLLIN:
                    return
                self._on_monitor_event(sock)
            else:
                with dealer.lock:
                    if not sock.getsockopt(EVENTS) & POLLIN:
                        return
                    frames = recv_frames(sock)
                self._dispatch(self._on_reply, dealer.address, frames)
        self._unread.add(sock)

    def _dispatch(self, callback: Callable[..., None], *args: Any) -> None:
        try:
            callback(*args)
        except Exception:  # noqa: BLE001 - one bad message must not stop the mailbox
            log.exception("message_handling_failed", actor=self.name)

    def _drain_commands(self) -> None:
        self._wake.drain()
        self._wake_pending = False
        commands = self._commands
        self._draining = True
        try:
            while commands:
                fn, args, _ = commands.popleft()
                try:
                    fn(*args)
                except Exception:  # noqa: BLE001
                    log.exception("mailbox_command_failed", actor=self.name,
                                  command=getattr(fn, "__qualname__", repr(fn)))
        finally:
            self._draining = False

    def _on_monitor_event(self, monitor: zmq.Socket) -> None:
        event, value = recv_monitor_event(monitor)
        if monitor is self._sender_monitor:  # the ROUTER's: a sender's connection closed
            self._dispatch(self._on_senders_lost, value)
            return
        address = self._monitors[monitor]
        reason = self._peers.observe(address, event)
        if reason is not None:
            self.announce_lost(address, reason)
        elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            log.debug("peer_connected", actor=self.name, peer=address)

    def announce_lost(self, address: str, reason: str) -> None:
        """Tell the actor that the peer table found `address` lost; I/O thread only."""
        # What the peer delivered before it went is handed up before its loss.
        if self._turns is not None:
            self._turns.drain_all()
        log.info("peer_lost", actor=self.name, peer=address, reason=reason)
        self._dispatch(self._on_peer_lost, address, reason)

    def _run_timers(self) -> None:
        for handle in self._timers.due():
            self._dispatch(handle.fn, *handle.args)

    def _close_all(self) -> None:
        self._stopping = True
        for dealer in self._dealers.values():
            with dealer.lock:  # not while another thread sends on it
                close_monitored(dealer.socket, dealer.monitor)
        self._monitors.clear()
        self._by_fd.clear()
        self._unread.clear()
        self._dealers.clear()
        self._dealer_peers.clear()
        self._timers.clear()
        while self._commands:
            _, _, message = self._commands.popleft()
            if message is not None:
                self._dispatch(self._on_unsent, message)
        if self._turns is not None:  # no thread reads the router from here on
            self._turns.close()
        # The teardown closes the router, which switches off its monitor first.
        self._dispatch(self._on_closed)
        if self._sender_monitor is not None:
            self._sender_monitor.close(0)
            self._sender_monitor = None
        self._wake.close()
