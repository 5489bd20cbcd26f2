"""Named calls (`actors.expose`, `RPC_CALL_NAMED`): JSON bodies, arrays as raw frames, bad input.

The worker is the `python -m actors.worker` command in its own process; the
clients are `ExposedClient` and a plain pyzmq DEALER speaking the frames of
docs/PROTOCOL.md.
"""
import json

import numpy as np
import pytest
import zmq

import actors
from actors.runtime.protocol import (ERROR, JSON, MAX_BUFFERS, ONEWAY, RESPONSE, Kind,
                                     pack_header)
from tests.rpc.named_worker import client, serving
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("named")) as (address, _):
        yield address


def raw_request(address, frames, timeout_ms=10_000):
    """Send `frames` from a fresh DEALER; the reply's frames (AssertionError if none comes)."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(address)
        sock.send_multipart(frames)
        assert sock.poll(timeout_ms), "no reply"
        return sock.recv_multipart()
    finally:
        sock.close()


def named(document, *buffers, req_id=7, nbufs=None):
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    count = len(buffers) if nbufs is None else nbufs
    return [pack_header(Kind.RPC_CALL_NAMED, req_id, JSON, count), body, *buffers]


def test_a_named_call_takes_and_returns_a_one_mib_float32_array(worker):
    values = np.random.default_rng(0).standard_normal(1 << 18).astype(np.float32)
    with client(worker) as calls:
        scaled = calls.call("scale", values, 2.5)
    assert scaled.dtype == np.float32 and scaled.shape == values.shape
    np.testing.assert_array_equal(scaled, values * np.float32(2.5))


def test_keyword_arguments_and_nested_replies_travel(worker):
    values = np.arange(6, dtype=np.int16).reshape(2, 3)
    with client(worker) as calls:
        reply = calls.call("describe", values, label="m")
    assert reply["label"] == "m" and reply["shape"] == [2, 3]
    np.testing.assert_array_equal(reply["parts"][0], values[:1])
    np.testing.assert_array_equal(reply["parts"][1], values[-1:])
    assert reply["raw"] == values[:2].tobytes()


def test_the_reply_frames_are_exactly_as_documented(worker):
    values = np.array([1, 2, 3], dtype="<f4")
    header, body, frame = raw_request(worker, named(
        {"fn": "scale", "args": [{"$array": 0, "dtype": "<f4", "shape": [3]}, 2]},
        values.tobytes()))
    assert header == pack_header(Kind.RPC_CALL_NAMED, 7, RESPONSE | JSON, 1)
    assert json.loads(body) == {"$array": 0, "dtype": "<f4", "shape": [3]}
    assert np.frombuffer(frame, "<f4").tolist() == [2.0, 4.0, 6.0]


def test_an_exception_in_the_function_comes_back_with_its_type(worker):
    with client(worker) as calls, pytest.raises(ValueError, match="no good") as raised:
        calls.call("fails", "no good")
    assert "raise ValueError(message)" in raised.value.remote_traceback


BAD_REQUESTS = {
    "malformed-json": (named(b'{"fn": "scale", "args": ['), "undecodable JSON body"),
    "body-not-a-map": (named([1, 2]), "body is a map"),
    "fn-not-a-string": (named({"fn": 12, "args": []}), '"fn" is the function\'s name'),
    "args-not-a-list": (named({"fn": "scale", "args": {"a": 1}}), '"args" is a list'),
    "kwargs-not-a-map": (named({"fn": "count", "kwargs": [1]}), '"kwargs" is a map'),
    "unknown-name": (named({"fn": "rm -rf", "args": []}), "no function is exposed as 'rm -rf'"),
    "array-size-disagrees": (named({"fn": "scale", "args": [
        {"$array": 0, "dtype": "<f4", "shape": [4]}]}, b"\x00" * 12), "has 12 bytes"),
    "missing-frame": (named({"fn": "scale", "args": [
        {"$array": 0, "dtype": "<f4", "shape": [1]}]}, nbufs=1), "announces 1 buffer frame"),
    "marker-without-frame": (named({"fn": "scale", "args": [
        {"$array": 3, "dtype": "<f4", "shape": [1]}]}), "missing buffer frame 3"),
    "wrong-arguments": (named({"fn": "scale", "args": [1, 2, 3]}), "positional argument"),
    "wrong-argument-type": (named({"fn": "scale", "args": ["text"]}), ""),
    "unencodable-result": (named({"fn": "unencodable", "args": []}), "cannot encode as JSON"),
}


@pytest.mark.parametrize("frames, message", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
def test_bad_named_calls_get_an_error_reply_and_the_worker_keeps_serving(worker, frames,
                                                                          message):
    with client(worker) as calls:
        before = calls.call("count")
        reply = raw_request(worker, frames)
        header, body = reply[0], json.loads(reply[1])
        assert header[3] == RESPONSE | ERROR | JSON
        assert int.from_bytes(header[8:16], "little") == 7  # answers that request
        assert message in body["message"] and body["type"] and body["traceback"]
        assert calls.call("count") == before + 1


def test_a_message_of_more_buffer_frames_than_its_header_can_count_is_refused_clearly(worker):
    too_many = MAX_BUFFERS + 1  # nbufs is a u16
    with client(worker) as calls:
        with pytest.raises(ValueError, match=f"at most {MAX_BUFFERS} buffer frames"):
            calls.call("count", *[b"x"] * too_many)  # a request: refused before it is sent
        with pytest.raises(ValueError, match=f"at most {MAX_BUFFERS} buffer frames"):
            calls.call("pieces", too_many)  # a reply: an error reply in its place
        assert len(calls.call("pieces", MAX_BUFFERS)) == MAX_BUFFERS

def test_a_one_way_named_call_that_fails_is_logged_and_the_worker_serves_on(tmp_path):
    with serving(tmp_path) as (address, port):
        log = tmp_path / f"worker-{port}.log"
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        try:
            sock.connect(address)
            for fn in ("fails", "no such name"):
                sock.send_multipart([pack_header(Kind.RPC_CALL_NAMED, 7, JSON | ONEWAY),
                                     json.dumps({"fn": fn, "args": ["lost unless logged"]})
                                     .encode()])
            assert wait_until(lambda: "no function is exposed as 'no such name'"
                              in log.read_text(), 10), log.read_text()
            assert "lost unless logged" in log.read_text()
            with client(address) as calls:
                assert calls.call("count") >= 1
            assert not sock.poll(200)  # one-way: no reply, not even an error
        finally:
            sock.close()

def test_an_unknown_name_is_an_error_that_lists_what_is_exposed(worker):
    with client(worker) as calls, pytest.raises(actors.UnknownFunctionError,
                                                match="exposed: .*'scale'"):
        calls.call("nope")


def test_expose_refuses_a_taken_name_and_a_bad_name():
    actors.expose("tests.same")(len)
    actors.expose("tests.same")(len)  # the same function again is fine
    with pytest.raises(ValueError, match="already exposed"):
        actors.expose("tests.same")(abs)
    with pytest.raises(TypeError, match="non-empty str"):
        actors.expose("")
    with pytest.raises(TypeError, match="needs a callable"):
        actors.expose("tests.number")(3)
