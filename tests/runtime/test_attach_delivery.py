"""Attached sockets deliver what was sent when detached, stopped, or at exit; a message
that cannot be sent fails at `send` and never jams the socket; a refused handshake is
logged; a handler may detach its own socket.

The processes that stop or exit are spawned (`tests.runtime.attach_children`). Log
lines are read from stderr: a logger already used caches its pipeline, which a
structlog capture would then miss.
"""
import multiprocessing as mp
import re
import threading
import time

import pytest
import zmq

from actors.keys import generate
from actors.runtime import Actor
from actors.runtime.io.context import process_context
from actors.runtime.io.security import Security, set_security
from actors.runtime.io.sockets import REFUSED
from tests.leftovers import open_fds, os_threads
from tests.runtime import attach_children
from tests.subprocesses import reap
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)
ctx = mp.get_context("spawn")


@pytest.fixture
def actor():
    started = Actor(None, name="attaching").start()
    yield started
    started.stop()


@pytest.fixture
def sink():
    pull = process_context().socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    yield pull, f"tcp://127.0.0.1:{port}"
    pull.close(0)


def receive(pull, count, timeout=30.0):
    """The messages `pull` receives until `count` came or `timeout` passed."""
    got, deadline = [], time.monotonic() + timeout
    while len(got) < count and pull.poll(max(0, int((deadline - time.monotonic()) * 1000))):
        got.append(pull.recv_multipart())
    return got


def test_a_frame_that_is_not_bytes_fails_at_send_and_the_socket_sends_on(actor, sink):
    pull, endpoint = sink
    push = actor.attach(endpoint, socket_type=zmq.PUSH)
    push.send([b"first"])
    with pytest.raises(TypeError, match="frame 1 is a str"):
        push.send([b"ok", "a str"])
    with pytest.raises(TypeError, match="list of frames"):
        push.send(b"bare bytes")
    with pytest.raises(ValueError, match="at least one frame"):
        push.send([])
    for i in range(3):
        push.send([b"ok-%d" % i])
    assert receive(pull, 4) == [[b"first"], [b"ok-0"], [b"ok-1"], [b"ok-2"]]
    assert not pull.poll(200)  # nothing else: no empty frames ending a broken message


def lines(capsys, event):
    """The log lines of `event` written to stderr so far."""
    return [line for line in capsys.readouterr().err.splitlines() if f"event='{event}'" in line]


def test_a_handler_reply_that_is_not_frames_is_logged_once_and_dropped(actor, capsys):
    def handler(frames):
        identity, body = frames[0], frames[-1].bytes
        return [identity, b"re:" + body] if body != b"bad" else b"oops"

    attached = actor.attach("tcp://127.0.0.1:0", handler, socket_type=zmq.ROUTER, bind=True)
    dealer = process_context().socket(zmq.DEALER)
    dealer.connect(attached.endpoint)
    try:
        dealer.send(b"bad")
        dealer.send(b"good")
        assert dealer.poll(10_000) and dealer.recv_multipart() == [b"re:good"]
        assert not dealer.poll(200)
        assert len(lines(capsys, "attached_message_failed")) == 1
    finally:
        dealer.close(0)


@pytest.mark.parametrize("ending", ["stop", "exit"])
def test_a_process_delivers_everything_it_pushed_before_it_stops_or_exits(sink, ending):
    pull, endpoint = sink
    count = 2000
    report = ctx.Queue()
    child = ctx.Process(target=attach_children.push_then_end,
                        args=(endpoint, count, 10_000, ending, report), daemon=True)
    child.start()
    try:
        got = receive(pull, count, 60)
        assert report.get(timeout=30) == "sent"
        assert sorted(int(frames[0]) for frames in got) == list(range(count))
        child.join(30)
        assert child.exitcode == 0
    finally:
        reap([child], 10)


def test_detach_delivers_and_what_cannot_arrive_is_logged_with_its_count(actor, sink, capsys):
    pull, endpoint = sink
    push = actor.attach(endpoint, socket_type=zmq.PUSH)
    for i in range(100):
        push.send([b"%d" % i])
    assert push.detach() is None
    assert len(receive(pull, 100)) == 100

    # Nothing listens: ZeroMQ takes its high-water mark's worth (1,000), the rest stays
    # queued in the actor, and is dropped at the deadline with a warning that counts it.
    nowhere = actor.attach("tcp://127.0.0.1:1", socket_type=zmq.PUSH, max_pending=2000)
    for _ in range(1500):
        nowhere.send([b"lost"])
    started = time.monotonic()
    nowhere.detach(timeout=0.5)
    assert time.monotonic() - started < 5
    [warning] = lines(capsys, "messages_maybe_undelivered_at_detach")
    assert "level='warning'" in warning and "peer='tcp://127.0.0.1:1'" in warning
    dropped = int(re.search(r"messages=(\d+)", warning).group(1))
    assert 0 < dropped <= 500


def test_a_detached_socket_has_nothing_left_to_deliver_and_a_bound_one_frees_its_port(actor):
    push = actor.attach("tcp://127.0.0.1:0", socket_type=zmq.PUSH, bind=True)
    port = int(push.endpoint.rsplit(":", 1)[1])
    push.send([b"nobody takes it"])
    push.detach(timeout=0.5)
    again = process_context().socket(zmq.PULL)
    try:
        again.bind(f"tcp://127.0.0.1:{port}")  # free again when detach returned
    finally:
        again.close(0)
    started = time.monotonic()
    assert push.confirm_delivery(time.monotonic() + 60) == {}  # not waited for again
    push.detach()
    assert time.monotonic() - started < 30


def test_an_attached_socket_leaves_no_threads_or_descriptors_behind(actor, sink):
    _, endpoint = sink
    fds, threads = open_fds(), os_threads()
    for _ in range(5):
        attached = actor.attach(endpoint, socket_type=zmq.PUSH)
        attached.send([b"x"])
        attached.detach()
    assert wait_until(lambda: open_fds() <= fds and os_threads() <= threads, 10), \
        (open_fds() - fds, os_threads() - threads)


def test_a_handler_that_detaches_its_own_socket_is_not_waited_for(actor):
    push = process_context().socket(zmq.PUSH)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    took = []
    done = threading.Event()
    box = {}

    def handler(frames):
        started = time.monotonic()
        box["attached"].detach(timeout=30)
        took.append(time.monotonic() - started)
        done.set()

    try:
        box["attached"] = actor.attach(f"tcp://127.0.0.1:{port}", handler, socket_type=zmq.PULL)
        push.send(b"END")
        assert done.wait(30)
        assert took[0] < 10.0  # its 30 s timeout, had it waited for itself
    finally:
        push.close(0)


def test_a_curve_process_attached_to_a_plain_pipeline_says_the_handshake_is_refused(tmp_path,
                                                                                   capsys):
    generate(tmp_path / "keys")
    plain = process_context().socket(zmq.PUSH)  # the legacy ventilator, without CURVE
    port = plain.bind_to_random_port("tcp://127.0.0.1")
    set_security(Security.from_dir(tmp_path / "keys"))
    actor = Actor(None, name="trainer").start()
    seen = []
    try:
        actor.attach(f"tcp://127.0.0.1:{port}", lambda frames: None, socket_type=zmq.PULL)
        assert wait_until(lambda: seen.extend(lines(capsys, "attached_peer_refused")) or seen,
                          10)
        # libzmq retries the handshake meanwhile: the warning stays one.
        assert not wait_until(
            lambda: seen.extend(lines(capsys, "attached_peer_refused")) or len(seen) > 1, 1.0)
        assert "level='warning'" in seen[0] and REFUSED in seen[0]
    finally:
        actor.stop()
        set_security(None)
        plain.close(0)
