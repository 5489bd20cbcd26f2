"""Socket plumbing the mailbox and the channel share: opening a DEALER to a peer, and
moving multipart messages.

`send_frames` and `recv_frames` do what pyzmq's ``send_multipart`` and
``recv_multipart`` do with ``copy=False``, with plain int flags: pyzmq's flag enums
cost an enum operation per frame, a measurable share of a small message's time. Frames
go out through pyzmq's compiled ``send``, under the Python wrapper that only adds
routing ids and groups (draft sockets, which we do not use): half a frame's cost.
"""
from __future__ import annotations

import functools
import itertools
import struct
from collections import deque as _consume
from itertools import repeat as _repeat
from itertools import starmap as _starmap
from typing import Any, List, Optional, Sequence, Tuple

import zmq

from ..process.log import get_logger
from .security import current_security, secure

log = get_logger(__name__)

_SNDMORE = int(zmq.SNDMORE)
_send = zmq.backend.Socket.send
# Plain ints: pyzmq looks an option's enum member up by value on every call.
EVENTS = int(zmq.EVENTS)
POLLIN = int(zmq.POLLIN)
NOBLOCK = int(zmq.NOBLOCK)  # and as a flag: or-ing pyzmq's enum costs a Python call

# Messages a loop takes from one socket per round, so one busy socket cannot starve
# the others.
RECV_BATCH = 64

# `send_frames` copies frames smaller than this and sends larger ones zero-copy. A
# zero-copy frame is released through pyzmq's garbage-collector thread, one more
# thread wake-up per frame, which costs more than copying a few hundred KiB (W4b:
# 5-7 % faster).
COPY_THRESHOLD = 1 << 20

# A handshake the peer refused: a CURVE key it does not authorise, a server key that
# is not the peer's (it cannot read the client's hello), or a peer that speaks another
# security mechanism.
HANDSHAKE_FAILED = (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                    | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
# The monitor reports when the handshake with the peer is done, refused, and when the
# connection drops.
RECONNECT_MS, RECONNECT_MAX_MS = 5, 200  # first retry of a refused connection, and the cap
MONITOR_EVENTS = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED | HANDSHAKE_FAILED
REFUSED = "the peer refused the handshake: it does not authorise this process's CURVE key, " \
          "the server key (server.key) this process expects is not the peer's, or one " \
          "side uses CURVE and the other does not"
REFUSED_PLAIN = "the peer refused the handshake: it uses CURVE, which this process does " \
                "not, or it does not speak ZeroMQ (a port of another service)"


def refusal() -> str:
    """Why a peer refused the handshake, as far as this process can tell: the causes
    that the process's security setting leaves (`REFUSED` under CURVE, else
    `REFUSED_PLAIN`: a process without keys has no key to be refused)."""
    return REFUSED if current_security() is not None else REFUSED_PLAIN


_monitor_ids = itertools.count()


def open_monitor(sock: zmq.Socket, events: int) -> zmq.Socket:
    """A PAIR socket that receives `sock`'s monitor `events`.

    Each monitor gets its own inproc endpoint: pyzmq's default names it after the
    socket's descriptor number, which a new socket may reuse while the endpoint of
    a closed one is still bound in the process's shared context.
    """
    return sock.get_monitor_socket(events, f"inproc://actorgrad-monitor-{next(_monitor_ids)}")


def close_monitored(sock: zmq.Socket, monitor: zmq.Socket, linger_ms: int = 0) -> None:
    """Close `sock` and its monitor, in the only safe order; `sock`'s queued messages
    may still leave for `linger_ms`.

    libzmq's I/O thread sends monitor events with a blocking send: once the monitor's
    PAIR is closed, the next event of a still-monitored socket blocks that thread,
    and with it every socket of the process's context. So the monitor is switched
    off first.
    """
    sock.disable_monitor()
    monitor.close(0)
    sock.close(linger_ms)


def close_releasing(sock: zmq.Socket, bound: Optional[str], timeout: float = 2.0) -> None:
    """Close `sock`, and return once its listener at `bound` (if any) has let go of
    its address (a TCP port, an IPC path).

    ZeroMQ closes a listener on its I/O thread some time after the socket's close
    returns, so an owner that binds the same address again at once (a store hosted
    anew on its job's port) could find it still taken. Unbinding first, with a
    monitor of the listener's close, turns the release into something to wait for,
    at most `timeout` seconds (then a warning). A monitor the socket had is switched
    off first (see `close_monitored`); its PAIR stays its owner's to close.
    """
    sock.disable_monitor()
    if bound is None or not bound.startswith(("tcp://", "ipc://")):
        sock.close(0)
        return
    try:
        monitor = open_monitor(sock, zmq.EVENT_CLOSED)
    except zmq.ZMQError:
        sock.close(0)
        return
    try:
        sock.unbind(bound)
    except zmq.ZMQError:
        pass  # not bound there (any more): nothing to wait for
    else:
        # A bound socket makes no connections, so its one close is the listener's.
        if not monitor.poll(int(timeout * 1000)):
            log.warning("listener_not_closed_in_time", address=bound, timeout_s=timeout)
    finally:
        close_monitored(sock, monitor)


def new_socket(ctx: zmq.Context, socket_type: int, heartbeat_ms: int,
               heartbeat_timeout_ms: int, *, server: bool,
               routing_id: Optional[bytes] = None) -> zmq.Socket:
    """A socket with the runtime's options: no linger on close, unbounded queues (the
    caller bounds what it sends), ZMTP heartbeats, `routing_id` if given, and the
    process's security on the `server` side or not. Closed again if one is refused."""
    sock = ctx.socket(socket_type)
    try:
        for option, value in ((zmq.LINGER, 0), (zmq.SNDHWM, 0), (zmq.RCVHWM, 0),
                              (zmq.HEARTBEAT_IVL, heartbeat_ms),
                              (zmq.HEARTBEAT_TIMEOUT, heartbeat_timeout_ms)):
            sock.setsockopt(option, value)
        if routing_id is not None:
            sock.setsockopt(zmq.ROUTING_ID, routing_id)
        secure(sock, server=server)
    except BaseException:
        sock.close(0)
        raise
    return sock


def open_dealer(ctx: zmq.Context, address: str, heartbeat_ms: int, heartbeat_timeout_ms: int,
                events: int = MONITOR_EVENTS, routing_id: Optional[bytes] = None
                ) -> Tuple[zmq.Socket, zmq.Socket]:
    """A DEALER connected to `address` with ZMTP heartbeats, and its monitor of `events`.

    `routing_id` is the identity the peer's ROUTER knows this connection by (None:
    one ZeroMQ makes up).

    libzmq blocks its I/O thread once a monitor's queue is full: monitor only the
    events the owner reads while they come, not only when it next uses the socket.

    The socket's options are `new_socket`'s. If `connect` refuses the address, both
    sockets are closed and the error raised.
    """
    dealer = new_socket(ctx, zmq.DEALER, heartbeat_ms, heartbeat_timeout_ms, server=False,
                        routing_id=routing_id)
    # Peers of a job start together, and a client often tries before its server listens:
    # retry soon, then back off (libzmq waits 100 ms between attempts by default).
    dealer.setsockopt(zmq.RECONNECT_IVL, RECONNECT_MS)
    dealer.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_MAX_MS)
    monitor = open_monitor(dealer, events)
    try:
        dealer.connect(address)
    except zmq.ZMQError:
        close_monitored(dealer, monitor)
        raise
    return dealer, monitor


def send_frames(sock: zmq.Socket, frames: Sequence[Any], flags: int = 0) -> None:
    """Send `frames` as one multipart message, without copying large frames.

    A message is never left half sent, which would merge the next message on the
    socket into it. The frames go out from C code (a `starmap` that a `deque`
    consumes), so a Python signal handler runs only inside pyzmq's send of a frame,
    just before or just after the frame leaves: when it raises (a KeyboardInterrupt),
    that frame may or may not have left, and the message is ended anyway before the
    exception goes on, with the frames after it, or with two empty frames when it was
    the last (an extra message, or a frame count that no header announces). A frame
    that ZeroMQ refuses did not leave: the rest is sent from it, if any left before.
    The receiver rejects a malformed message, as any bad input.
    """
    last = len(frames) - 1
    sends = list(zip(_repeat(sock), frames, _flag_run(last, flags),
                     map(COPY_THRESHOLD.__gt__, map(len, frames))))
    waiting = iter(sends)
    try:
        _consume(_starmap(_send, waiting), 0)
    except zmq.ZMQError:
        failed = last - waiting.__length_hint__()
        if failed:
            _end_message(sends[failed:])
        raise
    except BaseException:
        _end_message(list(waiting) or _closing(sock, flags))
        raise


@functools.lru_cache(maxsize=64)
def _flag_run(last: int, flags: int) -> Tuple[int, ...]:
    """The flags of frames 0 to `last`: `flags` with SNDMORE, and `flags` alone on the
    last."""
    return (flags | _SNDMORE,) * last + (flags,)


def _closing(sock: zmq.Socket, flags: int) -> List[tuple]:
    """Two empty frames, which end a message whether or not its last frame left."""
    return [(sock, b"", flags | _SNDMORE, True), (sock, b"", flags, True)]


def _end_message(sends: List[tuple], attempts: int = 3) -> None:
    """Send the rest of a begun message, through further interruptions; a socket that
    refuses a frame (closed, its context ended) takes nothing more anyway."""
    for _ in range(attempts):
        for index, send in enumerate(sends):
            try:
                _send(*send)
            except zmq.ZMQError:
                return
            except BaseException:  # noqa: BLE001 - the caller raises the first one
                if index == len(sends) - 1:
                    break  # the last frame may not have left: end the message again
        else:
            return
        sends = _closing(sends[-1][0], sends[-1][2])


def recv_frames(sock: zmq.Socket, flags: int = 0) -> List[zmq.Frame]:
    """Receive one multipart message as frames (zmq.Again if none is waiting with NOBLOCK)."""
    frame = sock.recv(flags, copy=False)
    frames = [frame]
    while frame.more:
        frame = sock.recv(flags, copy=False)
        frames.append(frame)
    return frames


def recv_monitor_event(monitor: zmq.Socket) -> Tuple[int, int]:
    """The next event of a socket monitor, as ``(event, value)``."""
    return recv_monitor_message(monitor)[:2]


def recv_monitor_message(monitor: zmq.Socket) -> Tuple[int, int, str]:
    """The next event of a socket monitor, as ``(event, value, endpoint)``.

    libzmq's format: a first frame of a 16-bit event id and a 32-bit value, then the
    endpoint. Decoded here rather than by ``zmq.utils.monitor``, whose import pulls
    in asyncio for every process.
    """
    frames = monitor.recv_multipart()
    event, value = struct.unpack("=hi", frames[0][:6])
    return event, value, frames[1].decode(errors="replace") if len(frames) > 1 else ""
