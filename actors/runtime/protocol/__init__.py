"""The wire protocol: frame layout, header, message kinds and flags (docs/PROTOCOL.md).

A message from a DEALER to an actor's ROUTER mailbox is the multipart
``[header, body, buffer_0, ..., buffer_{n-1}]`` (the ROUTER prepends the sender's
identity frame). The header is 16 bytes, little-endian::

    magic   2s  b"AG"
    version u8  PROTOCOL_VERSION
    flags   u8  Flag bits
    kind    u16 Kind
    nbufs   u16 number of out-of-band buffer frames after the body
    req_id  u64 request id, echoed by the reply (0 = none)

The body is a cloudpickle protocol 5 pickle whose out-of-band buffers are the
trailing frames, or, with ``Flag.JSON``, UTF-8 JSON in which ``{"$buf": i}`` stands
for buffer frame ``i`` (for peers not written in Python).
"""
from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from ..errors import ProtocolError

MAGIC = b"AG"
PROTOCOL_VERSION = 1
"""The version byte every message header carries (the layout: above, and docs/PROTOCOL.md)."""
HEADER = struct.Struct("<2sBBHHQ")
HEADER_SIZE = HEADER.size
MAX_BUFFERS = 0xFFFF


class Flag(enum.IntFlag):
    """The header's flag bits: what a message is besides its kind (reply, error, JSON, ...)."""

    NONE = 0
    RESPONSE = 0x01  # answers the request with the same req_id
    ERROR = 0x02  # with RESPONSE: the body describes an error
    ONEWAY = 0x04  # the sender expects no reply
    JSON = 0x08  # the body is JSON, not a pickle
    PUSH = 0x10  # unsolicited event for an earlier request (e.g. a watched key changed)
    SHARED = 0x20  # the buffer frames are descriptors of same-host shared memory
    SAME_HOST = 0x40  # a request from the receiver's host: its reply may be SHARED


# Plain-int copies of the flags for hot paths: IntFlag arithmetic builds enum objects.
RESPONSE, ERROR, ONEWAY, JSON, PUSH, SHARED, SAME_HOST = (int(f) for f in (
    Flag.RESPONSE, Flag.ERROR, Flag.ONEWAY, Flag.JSON, Flag.PUSH, Flag.SHARED, Flag.SAME_HOST))


def request_flags(json: bool, same_host: bool) -> int:
    """The flags of a request in JSON or pickle, to a peer on this host or not."""
    return (JSON if json else 0) | (SAME_HOST if same_host else 0)


class Kind(enum.IntEnum):
    """Every message kind. Ranges: 0x00xx runtime, 0x01xx store, 0x02xx rpc, 0x03xx autograd,
    0x04xx process groups."""

    PROTOCOL_ERROR = 0x0000  # reply to a message whose header could not be read
    PING = 0x0001
    HEARTBEAT = 0x0002
    STATUS = 0x0003  # JSON: what this process is doing (answered by an I/O thread)
    STACKS = 0x0004  # JSON: the Python stack of every thread
    RECORDER = 0x0005  # JSON: the flight recorder's entries
    CLOCK = 0x0006  # JSON: the process's monotonic clock now, to align recorders

    STORE_SET = 0x0100
    STORE_GET = 0x0101
    STORE_ADD = 0x0102
    STORE_COMPARE_SET = 0x0103
    STORE_DELETE_KEY = 0x0104
    STORE_CHECK = 0x0105
    STORE_NUM_KEYS = 0x0106
    STORE_WAIT = 0x0107
    STORE_MULTI_GET = 0x0108
    STORE_MULTI_SET = 0x0109
    STORE_APPEND = 0x010A
    STORE_QUEUE_PUSH = 0x010B
    STORE_QUEUE_POP = 0x010C
    STORE_QUEUE_LEN = 0x010D
    STORE_WATCH_KEY = 0x010E
    STORE_WATCH_EVENT = 0x010F

    RPC_CALL = 0x0200
    RPC_REMOTE = 0x0201
    RREF_FORK = 0x0202
    RREF_DELETE = 0x0203
    RPC_CALL_NAMED = 0x0204  # JSON: {"fn": name, "args": [...], "kwargs": {...}}
    RREF_REJECTED = 0x0205  # one-way: the owner refused this RRef's creation unrun
    STORE_SET_EPHEMERAL = 0x0110  # a key deleted when the connection that set it closes
    STORE_LIST_KEYS = 0x0111  # the user keys, sorted
    STORE_QUORUM = 0x0112  # a named member arrives at a round; one release answers all

    AUTOGRAD_BACKWARD_STEP = 0x0300  # gradients for send functions of a backward pass
    AUTOGRAD_CONTEXT_RELEASE = 0x0301  # one-way: forget these contexts

    PG_DATA = 0x0400  # one-way: (key, call, data) for a process group's collective or send
    PG_LEAVE = 0x0401  # (rank, lost ranks, failure): it destroys its groups; answered with null
    PG_SHARE = 0x0402  # map the sender's shared region for same-host arrays; answered with null


# Answered by an I/O thread from JSON alone (docs/PROTOCOL.md, "Introspection").
INTROSPECTION_KINDS = frozenset({Kind.STATUS, Kind.STACKS, Kind.RECORDER, Kind.CLOCK})


class Header(NamedTuple):
    version: int
    flags: int
    kind: int
    nbufs: int
    req_id: int


def pack_header(kind: int, req_id: int, flags: int = 0, nbufs: int = 0) -> bytes:
    return HEADER.pack(MAGIC, PROTOCOL_VERSION, flags, kind, nbufs, req_id)


def unpack_header(frame: bytes) -> Header:
    """Parse and check a header frame; ProtocolError says what is wrong with it."""
    size = len(frame)
    if size != HEADER_SIZE:
        what = "truncated" if size < HEADER_SIZE else "oversized"
        raise ProtocolError(f"{what} header: {size} bytes, expected {HEADER_SIZE}")
    magic, version, flags, kind, nbufs, req_id = HEADER.unpack(frame)
    if magic != MAGIC:
        raise ProtocolError(f"bad magic {magic!r}, expected {MAGIC!r}")
    return Header(version, flags, kind, nbufs, req_id)


def kind_name(kind: int) -> str:
    try:
        return Kind(kind).name
    except ValueError:
        return f"0x{kind:04x}"
