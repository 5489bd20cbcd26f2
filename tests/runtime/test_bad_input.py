"""Garbage on an actor's ROUTER socket: each kind is answered with an error, the actor serves on."""
import json
import struct

import pytest
import zmq

from actors.runtime.protocol import envelope
from actors.runtime.protocol import PROTOCOL_VERSION, Flag, Kind, unpack_header
from tests.runtime import peers

pytestmark = pytest.mark.timeout(60)


def _header(kind=Kind.PING, req_id=1, flags=0, nbufs=0, version=PROTOCOL_VERSION, magic=b"AG"):
    return struct.pack("<2sBBHHQ", magic, version, flags, kind, nbufs, req_id)


GARBAGE = {
    "garbage bytes": [b"\xde\xad\xbe\xef" * 9],
    "truncated header": [b"AG\x01\x00"],
    "oversized header": [_header() + b"\x00\x00", b"."],
    "wrong magic": [_header(magic=b"ZZ"), b"."],
    "wrong protocol version": [_header(version=99), b"."],
    "unknown kind": [_header(kind=0xBEEF), envelope.encode(Kind.PING, 1, None)[1]],
    "missing body frame": [_header()],
    "more frames than announced": [_header(), b"\x80\x05N.", b"extra"],
    "fewer buffer frames than announced": [_header(nbufs=2), b"\x80\x05N.", b"one"],
    "undecodable pickle body": [_header(), b"\x80\x05 definitely not a pickle"],
    "undecodable json body": [_header(flags=Flag.JSON), b"{oops"],
    "empty frames": [b"", b""],
}


@pytest.fixture
def raw_socket(peer_process):
    address, process = peer_process
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10_000)
    sock.connect(address)
    try:
        yield sock, process
    finally:
        sock.close(0)
        ctx.term()


def _error_reply(sock) -> tuple:
    frames = sock.recv_multipart()
    header = unpack_header(frames[0])
    assert header.flags & Flag.RESPONSE and header.flags & Flag.ERROR
    payload = envelope.read_payload(header, frames)
    return header, payload


def _valid_request_succeeds(sock) -> None:
    sock.send_multipart(envelope.encode(peers.ECHO, 777, "still serving"))
    frames = sock.recv_multipart()
    header = unpack_header(frames[0])
    assert header.req_id == 777 and not header.flags & Flag.ERROR
    assert envelope.read_payload(header, frames) == "still serving"


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_each_kind_of_garbage_gets_an_error_reply_and_the_actor_keeps_serving(raw_socket, name):
    sock, process = raw_socket
    sock.send_multipart(GARBAGE[name])
    header, payload = _error_reply(sock)
    assert "ProtocolError" in payload["type"] or "UnknownKindError" in payload["type"]
    assert payload["message"]
    _valid_request_succeeds(sock)
    assert process.is_alive()


def test_all_garbage_in_a_row_then_a_valid_request_succeeds(raw_socket):
    sock, process = raw_socket
    for frames in GARBAGE.values():
        sock.send_multipart(frames)
    for _ in GARBAGE:
        _error_reply(sock)
    _valid_request_succeeds(sock)


def test_an_unreadable_header_is_answered_in_json_for_any_client(raw_socket):
    sock, _ = raw_socket
    sock.send_multipart([b"hello?"])
    frames = sock.recv_multipart()
    header = unpack_header(frames[0])
    assert header.kind == Kind.PROTOCOL_ERROR and header.req_id == 0
    assert header.flags & Flag.JSON
    body = json.loads(frames[1])
    assert body["type"] == "actors.runtime.errors.ProtocolError"
    assert "truncated header: 6 bytes" in body["message"]


def test_the_request_id_is_echoed_when_the_header_could_be_read(raw_socket):
    sock, _ = raw_socket
    sock.send_multipart([_header(version=42, req_id=31337), b"."])
    header, payload = _error_reply(sock)
    assert header.req_id == 31337 and "version 42 not supported" in payload["message"]


def test_a_stray_response_or_oneway_garbage_is_dropped_without_reply(raw_socket):
    sock, _ = raw_socket
    sock.send_multipart([_header(flags=Flag.RESPONSE), b"\x80\x05N."])
    sock.send_multipart([_header(kind=0xBEEF, flags=Flag.ONEWAY), b"\x80\x05N."])
    _valid_request_succeeds(sock)  # the first reply to arrive is the valid one
