"""Every request gets an answer: malformed input to a real actor is met with an error reply.

A plain pyzmq DEALER sends malformed named calls to a safe-mode worker
(``python -m actors.worker --no-pickle``) and deeply nested PINGs to a process
group's transport; each gets an error reply naming what was wrong, bounded in size,
and the actor serves the next good request.
"""
import json
import multiprocessing as mp
import pickle
import random
import struct
import time

import numpy as np
import pytest
import zmq

from actors.runtime.protocol import PROTOCOL_VERSION, Flag, Kind, unpack_header
from tests.net import free_port
from tests.rpc.named_worker import serving
from tests.runtime import peers

pytestmark = pytest.mark.timeout(120)

REPLY_WITHIN = 2.0  # seconds, for a request of ordinary size
PROTOCOL_ERROR = "actors.runtime.errors.ProtocolError"
VALUES = np.arange(5, dtype=np.float32)
GOOD_CALL = {"fn": "scale", "args": [{"$array": 0, "dtype": "<f4", "shape": [5]}, 2.5],
             "kwargs": {}}


def _frames(kind, req_id, body, buffers=(), flags=Flag.JSON, nbufs=None):
    nbufs = len(buffers) if nbufs is None else nbufs
    header = struct.pack("<2sBBHHQ", b"AG", PROTOCOL_VERSION, flags, kind, nbufs, req_id)
    return [header, body, *buffers]


def _named_call(req_id, body, buffers=(), nbufs=None):
    body = body if isinstance(body, bytes) else json.dumps(body).encode()
    return _frames(Kind.RPC_CALL_NAMED, req_id, body, buffers, nbufs=nbufs)


def _array_call(dtype, shape, frame):
    return {"fn": "scale", "args": [{"$array": 0, "dtype": dtype, "shape": shape}, 2.5]}, [frame]


def _nested_args(depth):
    return b'{"fn":"scale","args":' + b"[" * depth + b"]" * depth + b"}", []


class Dealer:
    """A raw DEALER connected to `address`; every wait for a reply is bounded."""

    def __init__(self, address):
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVHWM, 0)  # a burst of replies is never dropped
        self.socket.setsockopt(zmq.SNDHWM, 0)
        self.socket.connect(address)

    def send(self, frames):
        self.socket.send_multipart(frames)

    def reply(self, within=REPLY_WITHIN):
        """``(header, frames)`` of the next reply; fails the test if none comes in time."""
        assert self.socket.poll(int(within * 1000)), f"no reply within {within} s"
        frames = self.socket.recv_multipart()
        return unpack_header(frames[0]), frames

    def error(self, req_id, within=REPLY_WITHIN):
        """The JSON error body of the reply to `req_id`."""
        header, frames = self.reply(within)
        assert header.req_id == req_id
        assert header.flags == Flag.RESPONSE | Flag.ERROR | Flag.JSON
        return json.loads(frames[1])

    def close(self):
        self.socket.close(0)
        self.context.term()


def _serves_a_good_call(dealer, req_id=1_000_000):
    dealer.send(_named_call(req_id, GOOD_CALL, [VALUES.tobytes()]))
    header, frames = dealer.reply()
    assert header.req_id == req_id and not header.flags & Flag.ERROR
    assert json.loads(frames[1]) == {"$array": 0, "dtype": "<f4", "shape": [5]}
    assert np.frombuffer(frames[2], np.float32).tolist() == (VALUES * 2.5).tolist()


@pytest.fixture(scope="module")
def safe_worker(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("answered"), "--no-pickle") as (address, _):
        yield address


@pytest.fixture
def dealer(safe_worker):
    dealer = Dealer(safe_worker)
    try:
        _serves_a_good_call(dealer)  # connected, and the worker is up
        yield dealer
    finally:
        dealer.close()


MALFORMED = {
    "a dtype numpy's parser cannot read": (*_array_call("i4,,f8", [1], b"\0" * 12),
                                           "dtype 'i4,,f8'"),
    "a subarray dtype of zero size": (*_array_call("(3,)V0", [1], b""), "dtype '(3,)V0'"),
    "a zero-size dtype with no dimensions": (*_array_call("V0", [], b""),
                                             "its item size is zero"),
    "65 dimensions": (*_array_call("<f4", [1] * 65, b"\0" * 4), "65 dimensions"),
    "dimensions whose product overflows": (*_array_call("<f4", [2 ** 40] * 3, b""),
                                           "larger than numpy can address"),
    "an empty array too large to address": (*_array_call("<f4", [0, 2 ** 70], b""),
                                            "larger than numpy can address"),
    "JSON nested 600 levels deep": (*_nested_args(600), "more than 100 levels deep"),
    "JSON nested 100000 levels deep": (*_nested_args(100_000), "more than 100 levels deep"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_named_call_gets_a_protocol_error_naming_the_problem(dealer, case):
    body, buffers, problem = MALFORMED[case]
    dealer.send(_named_call(7, body, buffers))
    error = dealer.error(7)
    assert error["type"] == PROTOCOL_ERROR
    assert problem in error["message"]
    _serves_a_good_call(dealer)


def test_a_50_mb_function_name_is_answered_in_less_than_64_kib(dealer):
    name = "f" * (50 * 1024 * 1024)
    dealer.send(_named_call(9, {"fn": name, "args": []}))
    header, frames = dealer.reply(within=60)
    assert header.req_id == 9 and header.flags & Flag.ERROR
    assert sum(len(frame) for frame in frames) < 64 * 1024
    error = json.loads(frames[1])
    assert error["type"] == "actors.rpc.named.UnknownFunctionError"
    assert f"… ({len(name)} characters)" in error["message"]
    _serves_a_good_call(dealer)


# Mutations of a good call: each returns (body, buffer frames, nbufs announced or None).
NASTY_DTYPES = ["i4,,f8", "(3,)V0", "V0", "|O", "object", "S0", "U", "(2,3)f4", "i4,f8",
                "[('a','<f4')]", "<M8[ns]", "V4", "|b1", "c8", "<f4", "x" * 5000, 7, None, [],
                {"names": ["a"]}]
NASTY_SHAPES = [[], [5], [-1], [2 ** 63], [0, 2 ** 70], [1] * 33, [1] * 65, [2.5], ["5"],
                [[5]], None, 5, [True] * 5, [5, 0, 2 ** 62, 2 ** 62], list(range(10_000))]
NASTY_VALUES = [None, 5, -1, 2 ** 70, 0.5, "0", "", "count", "fails", "scale", [], {}, [[[]]],
                {"$buf": 9}, {"$array": 0}, "x" * 5000]


def _fuzzed(rng):
    body, buffers = json.dumps(GOOD_CALL).encode(), [VALUES.tobytes()]
    kind = rng.randrange(10)
    if kind == 0:  # a few bytes changed
        mutated = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        return bytes(mutated), buffers, None
    if kind == 1:  # cut short
        return body[:rng.randrange(len(body))], buffers, None
    if kind == 2:  # random bytes spliced in
        at = rng.randrange(len(body))
        return body[:at] + rng.randbytes(rng.randint(1, 16)) + body[at:], buffers, None
    if kind == 3:
        return _array_call(rng.choice(NASTY_DTYPES), [5], buffers[0]) + (None,)
    if kind == 4:
        return _array_call("<f4", rng.choice(NASTY_SHAPES), buffers[0]) + (None,)
    if kind == 5:
        return (*_nested_args(rng.choice([1, 99, 100, 101, 150, 600, 5000])), None)
    if kind == 6:  # a frame more or less than announced
        return body, buffers, rng.choice([0, 2, 3])
    if kind == 7:
        call = dict(GOOD_CALL, args=[{"$array": rng.choice(NASTY_VALUES), "dtype": "<f4",
                                      "shape": [5]}, {"$buf": rng.choice(NASTY_VALUES)}])
        return call, buffers, None
    if kind == 8:
        field = rng.choice(["fn", "args", "kwargs"])
        return dict(GOOD_CALL, **{field: rng.choice(NASTY_VALUES)}), buffers, None
    return body + b"\xff\xfe", buffers, None


def test_every_one_of_1500_mutated_named_calls_is_answered(dealer):
    rng = random.Random(24)
    pending = set()
    for req_id in range(1, 1501):
        body, buffers, nbufs = _fuzzed(rng)
        dealer.send(_named_call(req_id, body, buffers, nbufs))
        pending.add(req_id)
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        if not dealer.socket.poll(1000):
            continue
        frames = dealer.socket.recv_multipart()
        header = unpack_header(frames[0])
        assert header.flags & Flag.RESPONSE and header.kind == Kind.RPC_CALL_NAMED
        pending.discard(header.req_id)
    assert not pending, f"{len(pending)} of 1500 calls got no reply, e.g. {sorted(pending)[:5]}"
    _serves_a_good_call(dealer)


@pytest.fixture
def group_transport():
    """The transport address of a one-rank process group in a spawned process."""
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    process = ctx.Process(target=peers.serve_process_group, args=(free_port(), ready),
                          daemon=True)
    process.start()
    dealer = None
    try:
        dealer = Dealer(ready.get(timeout=60))
        yield dealer
    finally:
        if dealer is not None:
            dealer.close()
        process.kill()
        process.join(10)


def _deep_pickle(depth):
    """A pickle of lists nested `depth` deep, written op by op (pickling one would recurse)."""
    return (b"\x80\x02" + pickle.EMPTY_LIST * depth + pickle.APPEND * (depth - 1)
            + pickle.STOP)


def test_a_deeply_nested_json_ping_to_a_process_group_transport_gets_an_error_reply(
        group_transport):
    group_transport.send(_frames(Kind.PING, 3, b"[" * 600 + b"]" * 600))
    error = group_transport.error(3)
    assert error["type"] == PROTOCOL_ERROR and "more than 100 levels deep" in error["message"]
    group_transport.send(_frames(Kind.PING, 4, b'{"still": "serving"}'))
    header, frames = group_transport.reply()
    assert header.req_id == 4 and json.loads(frames[1]) == {"still": "serving"}


def test_a_deeply_nested_pickled_ping_to_a_process_group_transport_gets_an_answer(
        group_transport):
    group_transport.send(_frames(Kind.PING, 5, _deep_pickle(100_000), flags=0))
    header, frames = group_transport.reply()
    assert header.req_id == 5 and header.flags & Flag.RESPONSE
    assert sum(len(frame) for frame in frames) < 64 * 1024
    group_transport.send(_frames(Kind.PING, 6, pickle.dumps("still serving", protocol=5),
                                 flags=0))
    header, frames = group_transport.reply()
    assert header.req_id == 6 and pickle.loads(frames[1]) == "still serving"
