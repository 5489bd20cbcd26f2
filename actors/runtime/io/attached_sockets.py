"""The sockets and messages an actor attaches: which socket types it takes, making one
for an endpoint, and what a message must be (a list of bytes-like frames)."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

import zmq

from .context import process_context
from .sockets import HANDSHAKE_FAILED, close_monitored, open_monitor

MessageHandler = Callable[[List[zmq.Frame]], Optional[Sequence[Any]]]

RECEIVING = {zmq.PULL: "PULL", zmq.SUB: "SUB", zmq.DEALER: "DEALER", zmq.PAIR: "PAIR",
             zmq.ROUTER: "ROUTER"}
SEND_ONLY = {zmq.PUSH: "PUSH", zmq.PUB: "PUB"}
_FRAME_TYPES = (bytes, bytearray, memoryview, zmq.Frame)


def check_frames(frames: Sequence[Any]) -> List[Any]:
    """`frames` as a message ZeroMQ can send: a list of bytes-like frames.

    TypeError for a bare bytes or str (a message is a list of frames) and for a
    frame that is not bytes-like; ValueError for a message without frames.
    """
    if isinstance(frames, (str, *_FRAME_TYPES)):
        raise TypeError(f"a message is a list of frames, got a {type(frames).__name__}: "
                        f"wrap it in a list")
    message = list(frames)
    if not message:
        raise ValueError("a message needs at least one frame")
    for index, frame in enumerate(message):
        if not isinstance(frame, _FRAME_TYPES) and not _has_buffer(frame):
            raise TypeError(f"frame {index} is a {type(frame).__name__}, not bytes-like "
                            f"(bytes, bytearray, memoryview, zmq.Frame or a buffer)")
    return message


def _has_buffer(frame: Any) -> bool:
    """Whether `frame` exposes the buffer protocol (a NumPy array), which pyzmq sends."""
    if isinstance(frame, str):
        return False
    try:
        memoryview(frame)
    except TypeError:
        return False
    return True


def open_socket(endpoint: str, socket_type: int, bind: bool, subscribe: Sequence[bytes],
                secure: Callable[..., None]) -> Tuple[zmq.Socket, zmq.Socket]:
    """A new socket of `socket_type` bound or connected to `endpoint`, secured first,
    and its monitor of handshake failures.

    """
    sock = process_context().socket(socket_type)
    monitor = None
    try:
        sock.setsockopt(zmq.LINGER, 0)
        secure(sock, server=bind)
        if socket_type == zmq.SUB:
            for topic in subscribe:
                sock.setsockopt(zmq.SUBSCRIBE, topic)
        monitor = open_monitor(sock, HANDSHAKE_FAILED)
        if bind:
            sock.bind(endpoint[:-2] + ":*" if endpoint.startswith("tcp://")
                      and endpoint.endswith(":0") else endpoint)
        else:
            sock.connect(endpoint)
    except BaseException:
        if monitor is not None:
            close_monitored(sock, monitor)
        else:
            sock.close(0)
        raise
    return sock, monitor


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

