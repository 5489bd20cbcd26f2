"""`ActorCore`: the running part of an actor, its threads and sockets from start to
teardown (see `actors.runtime.actor`)."""
from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Union

import zmq

from ..concurrency.leaders import LeaderPool
from ..concurrency.scheduler import WorkerPool
from ..errors import ActorStoppedError
from ..introspection import status
from ..introspection.recorder import FOLD_INTERVAL, RECEIVED, RECORDING, TRAFFIC
from ..introspection.server import IntrospectionServer
from ..io.attached_sockets import MessageHandler, check_type, open_socket
from ..io.attachments import Attachment
from ..io.mailbox import Mailbox
from ..io.timers import TimerHandle
from ..io.peers import Liveness, PeerTable
from ..io.router import Router
from ..io.security import secure
from ..process import at_exit
from ..process.log import get_logger
from ..protocol import Kind, envelope
from ..protocol.envelope import Message
from .calling import Calling
from .serving import Handler, Registration, Serving

log = get_logger(__name__)


class ActorCore(Calling, Serving):
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
        self._handlers: Dict[int, Registration] = {}
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
                                self._teardown, routing_id, envelope.discard)
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
        self._refusing = False  # set by finish_serving: new calls get an error reply
        self._answered = threading.Condition()  # notified of replies while refusing
        TRAFFIC.watch(self)
        self.register(Kind.PING, lambda msg: msg.payload, inline=True)

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
        confirmed its messages its own way (a leave protocol) passes False. Attached
        sockets deliver what was sent either way (no leave protocol covers them).
        """
        if deliver:
            self.deliver_sent(timeout, "stop")
        if self._can_wait():
            at_exit.confirm_deliveries(list(self._attachments),
                                       self._delivery_deadline(timeout), "stop")
        self.close_soon()
        self._mailbox.stop(timeout)
        self._pool.stop(timeout)

    def deliver_sent(self, timeout: Optional[float], moment: str) -> None:
        """Wait (at most `timeout`, and never over `at_exit.EXIT_FLUSH_TIMEOUT`) until
        every peer has confirmed the messages sent to it; log at warning what stays
        unconfirmed (`messages_maybe_undelivered_at_{moment}`). On the I/O thread, or
        once stopped, it does nothing."""
        if self._can_wait():
            at_exit.confirm_deliveries([self], self._delivery_deadline(timeout), moment)

    def _can_wait(self) -> bool:
        """Whether this thread can wait for deliveries: the actor runs, and this is not
        its I/O thread, which delivers."""
        return self._started and not self._stopped and not self.in_io_thread()

    @staticmethod
    def _delivery_deadline(timeout: Optional[float]) -> float:
        bound = at_exit.EXIT_FLUSH_TIMEOUT if timeout is None else min(
            timeout, at_exit.EXIT_FLUSH_TIMEOUT)
        return time.monotonic() + bound

    def _teardown(self) -> None:
        """The mailbox's sockets are closed: close the router, fail what is pending."""
        self._stopped = True
        for attachment in self._attachments:
            attachment.detach_without_delivery()
        if self._router is not None:
            status.forget_mailbox(self._router.address)
            self._router.close()
        for server in self._introspection:
            server.close()
        self._introspection.clear()
        self._fail_requests(lambda p: True, ActorStoppedError(f"actor {self.name} stopped"))
        log.info("actor_stopped", actor=self.name, address=self.address)

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
            sock, owned, monitor = socket_or_endpoint, False, None
            check_type(sock.type, on_message)
        elif isinstance(socket_or_endpoint, str) and socket_type is not None:
            check_type(socket_type, on_message)
            sock, monitor = open_socket(socket_or_endpoint, socket_type, bind, subscribe, secure)
            owned = True
        else:
            raise TypeError("attach takes a zmq.Socket, or an endpoint with socket_type")
        attachment = Attachment(self, sock, on_message, owned, max_pending, monitor,
                                bound=owned and bind)
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

    def read_mailbox_here(self, timeout: Optional[float]) -> bool:
        """Let the calling thread, which waits for a message this actor will receive,
        read the mailbox itself for a while: it dispatches the requests waiting, or
        sleeps until one comes (at most `timeout` seconds, None: no limit, or until
        `interrupt_mailbox_reading`) and dispatches it; inline handlers run on it. This
        saves the thread wake-up between the I/O thread and the waiting thread.

        False, at once, when it cannot (the I/O thread does not read this mailbox, or
        another thread does now, or the actor stopped): wait another way.
        """
        return self._mailbox.read_here(timeout)

    def interrupt_mailbox_reading(self) -> None:
        """End the sleep of the thread in `read_mailbox_here` (or the next one's); any
        thread."""
        self._mailbox.interrupt_reading()

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
