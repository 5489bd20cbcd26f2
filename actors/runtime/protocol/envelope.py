"""Messages as frames and back: the one encoder and decoder every socket owner uses."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import ProtocolError
from . import (ERROR, JSON, MAX_BUFFERS, ONEWAY, PROTOCOL_VERSION, RESPONSE, SAME_HOST, SHARED,
               Flag, Header, json_codec, pack_header, serialization, unpack_header)
from . import shared_buffers
from .bounded import text_of
from .remote_errors import error_payload


class Message:
    """A decoded message: its kind, request id, flags and payload, and where it came from.

    `sender` is the ROUTER identity of a request (the reply address); `peer` is the
    address of the actor a reply or push came from. A request's `received` (monotonic
    seconds, None when not recorded) and `size` (bytes) go to the flight recorder with
    its reply; a handler may note in `thread` the ident of the thread that serves it.
    """

    __slots__ = ("kind", "req_id", "flags", "payload", "sender", "peer", "received", "size",
                 "thread")

    def __init__(self, kind: int, req_id: int, flags: int, payload: Any,
                 sender: Optional[bytes] = None, peer: Optional[str] = None):
        self.kind = kind
        self.req_id = req_id
        self.flags = flags
        self.payload = payload
        self.sender = sender
        self.peer = peer
        self.received: Optional[float] = None
        self.size = 0
        self.thread: Optional[int] = None

    @property
    def json(self) -> bool:
        """Whether the body travelled in the JSON codec (a reply goes back in the same codec)."""
        return bool(self.flags & JSON)

    @property
    def oneway(self) -> bool:
        """Whether the sender expects no reply."""
        return bool(self.flags & ONEWAY)

    def __repr__(self) -> str:
        from . import kind_name

        return f"<Message {kind_name(self.kind)} req={self.req_id} flags={Flag(self.flags)!r}>"


class Encoded:
    """A payload encoded once and sent to many: replying `Encoded(value)` to several
    requests encodes `value` once per codec, and only each reply's header differs (a
    quorum round's release answers every parked member with the same result)."""

    __slots__ = ("value", "_codecs")

    def __init__(self, value: Any):
        self.value = value
        self._codecs: Dict[bool, Tuple[bytes, list]] = {}

    def encoded(self, json: bool) -> Tuple[bytes, list]:
        """(body, buffers) of the value in JSON or pickle; any thread (a race encodes
        twice, both the same)."""
        done = self._codecs.get(json)
        if done is None:
            done = self._codecs[json] = _dumps(self.value, json)
        return done


def encode(kind: int, req_id: int, payload: Any, flags: int = 0) -> List[Any]:
    """Frames ``[header, body, *buffers]`` for `payload`, in the codec `flags` names.

    With ``SAME_HOST`` (the receiver shares this host), large buffers of a pickle go
    through shared memory: the message is flagged ``SHARED`` and its buffer frames are
    descriptors (`shared_buffers`).
    """
    json = bool(flags & JSON)
    if isinstance(payload, Encoded):
        body, buffers = payload.encoded(json)
    else:
        body, buffers = _dumps(payload, json)
    lent = None
    if flags & SAME_HOST and buffers and not json:
        lent = shared_buffers.shared_frames(buffers)
        if lent is not None:
            buffers, flags = lent, flags | SHARED
    try:
        header = pack_header(kind, req_id, flags, len(buffers))
    except Exception as exc:  # e.g. a kind out of range: the lent blocks come back
        if lent is not None:
            shared_buffers.discard(lent)
        if len(buffers) > MAX_BUFFERS:  # the header counts them in a u16
            raise ValueError(
                f"a message carries at most {MAX_BUFFERS} buffer frames (its arrays and "
                f"bytes values), this one {len(buffers)}: send fewer, larger ones") from exc
        raise
    return [header, body, *buffers]


def _dumps(payload: Any, json: bool) -> Tuple[bytes, list]:
    return json_codec.dumps(payload) if json else serialization.dumps(payload)


def encode_error(kind: int, req_id: int, exc: BaseException, json: bool) -> List[Any]:
    """An error reply for request `req_id`; pickled replies carry the exception object."""
    flags = RESPONSE | ERROR | (JSON if json else 0)
    return encode(kind, req_id, error_payload(exc, include_object=not json), flags)


def message_bytes(frames: Sequence[Any]) -> int:
    """The bytes of a message's frames, as the flight recorder counts them."""
    return len(frames[0]) + len(frames[1]) if len(frames) == 2 else sum(map(len, frames))


def read_header(frames: Sequence[Any]) -> Header:
    """The checked header of a message: version, and frame count against `nbufs`."""
    if not frames:
        raise ProtocolError("empty message")
    header = unpack_header(_bytes(frames[0]))
    if header.version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"protocol version {header.version} not supported"
            f" (this actor speaks {PROTOCOL_VERSION})"
        )
    if len(frames) != 2 + header.nbufs:
        raise ProtocolError(
            f"malformed message: header announces {header.nbufs} buffer frame(s), "
            f"got {len(frames) - 1} frame(s) after the header (expected {header.nbufs + 1})"
        )
    return header


def discard(frames: Sequence[Any]) -> None:
    """Give back the shared-memory blocks of a message dropped without being decoded
    (in safe mode only this process's own: it touches no other process's memory)."""
    header = peek_header(frames)
    if header is not None and header.flags & SHARED:
        shared_buffers.discard([_buffer(f) for f in frames[2:]],
                               others=serialization.pickle_allowed())


def peek_header(frames: Sequence[Any]) -> Optional[Header]:
    """The header of a message whose other checks failed, if its first frame is one."""
    try:
        return unpack_header(_bytes(frames[0]))
    except (ProtocolError, IndexError):
        return None


def read_payload(header: Header, frames: Sequence[Any]) -> Any:
    """Decode the body of a message whose header was read by `read_header`.

    Raises only ProtocolError (SafeModeError included): whatever else goes wrong
    while decoding becomes one that names it, so that every reader can answer it.
    """
    codec = "JSON" if header.flags & JSON else "pickle"
    try:
        body = _buffer(frames[1])
        buffers = [_buffer(f) for f in frames[2:]]
        if header.flags & SHARED:
            if header.flags & JSON or not serialization.pickle_allowed():
                raise ProtocolError("shared-memory buffers come only with a pickle, "
                                    "which this process does not load")
            buffers = shared_buffers.taken_buffers(buffers)
        if header.flags & JSON:
            return json_codec.loads(body, buffers)
        return serialization.loads(body, buffers)
    except ProtocolError:
        raise
    except Exception as exc:  # noqa: BLE001 - bad input must never surface as another type
        raise ProtocolError(f"undecodable {codec} body: {type(exc).__name__}: "
                            f"{text_of(exc)}") from exc


def _bytes(frame: Any) -> bytes:
    return frame.bytes if hasattr(frame, "bytes") else bytes(frame)


def _buffer(frame: Any) -> Any:
    return frame.buffer if hasattr(frame, "buffer") else frame

