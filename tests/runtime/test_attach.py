"""Attached sockets: an actor takes part in plain ZeroMQ flows (PUSH/PULL, PUB/SUB, ROUTER/DEALER,
PAIR), with bounded queues and nothing left behind.

The other side of each flow is a plain pyzmq program in a spawned process
(`tests.runtime.zmq_peers`).
"""
import collections
import multiprocessing as mp
import threading

import pytest
import zmq

from actors.runtime import Actor, ActorStoppedError
from actors.runtime.io.context import process_context
from tests.net import bindable, free_port
from tests.runtime import zmq_peers
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(90)
ctx = mp.get_context("spawn")


@pytest.fixture
def actor():
    started = Actor(name="attaching", num_worker_threads=4).start()
    yield started
    started.stop()


@pytest.fixture
def peers():
    started = []
    yield started
    for process in started:
        if process.is_alive():
            process.kill()
        process.join(10)


def spawn(peers, target, *args):
    process = ctx.Process(target=target, args=args, daemon=True)
    process.start()
    peers.append(process)
    return process


class Received:
    """A handler that records each message's last frame, thread-safely."""

    def __init__(self, reply=None):
        self.lock = threading.Lock()
        self.items = []
        self.reply = reply

    def __call__(self, frames):
        with self.lock:
            self.items.append(frames[-1].bytes)
        return None if self.reply is None else self.reply(frames)

    def count(self):
        with self.lock:
            return len(self.items)


def test_a_pull_socket_takes_every_message_of_a_plain_pusher_exactly_once(actor, peers):
    received = Received()
    attached = actor.attach("tcp://127.0.0.1:0", received, socket_type=zmq.PULL, bind=True)
    report = ctx.Queue()
    spawn(peers, zmq_peers.pusher, attached.endpoint, 500, report)
    assert report.get(timeout=30) == "done"
    assert wait_until(lambda: received.count() == 500, 30)
    assert sorted(received.items) == sorted(b"%d" % i for i in range(500))


def test_a_sub_socket_gets_only_its_topic(actor, peers):
    received = Received()
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    stop = ctx.Event()
    spawn(peers, zmq_peers.publisher, endpoint, stop)
    topics = collections.Counter()
    actor.attach(endpoint, lambda frames: topics.update([frames[0].bytes]) or received(frames),
                 socket_type=zmq.SUB, subscribe=(b"a",))
    try:
        assert wait_until(lambda: received.count() >= 50, 30)
    finally:
        stop.set()
    assert set(topics) == {b"a"}


def test_a_router_answers_a_plain_dealer_with_what_its_handler_returns(actor, peers):
    attached = actor.attach("tcp://127.0.0.1:0",
                            lambda frames: [frames[0], b"re:" + frames[1].bytes],
                            socket_type=zmq.ROUTER, bind=True)
    report = ctx.Queue()
    spawn(peers, zmq_peers.requester, attached.endpoint, 50, report)
    assert report.get(timeout=30) == sorted(b"re:%d" % i for i in range(50))


@pytest.mark.parametrize("peer_kind, kind", [(zmq.ROUTER, zmq.DEALER), (zmq.PAIR, zmq.PAIR)],
                         ids=["dealer", "pair"])
def test_dealer_and_pair_sockets_receive_and_reply(actor, peers, peer_kind, kind):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    report = ctx.Queue()
    spawn(peers, zmq_peers.server, endpoint, peer_kind, 40, report)
    assert report.get(timeout=30) == "bound"
    attached = actor.attach(endpoint, lambda frames: [b"ok:" + frames[-1].bytes],
                            socket_type=kind)
    attached.send([b"hello"])
    assert report.get(timeout=30) == sorted(b"ok:%d" % i for i in range(40))


def test_a_slow_handler_pushes_back_on_the_sender_and_nothing_is_lost(actor, peers):
    release = threading.Event()
    running, most = [0], [0]
    lock = threading.Lock()
    received = Received()

    def slow(frames):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(60)
        with lock:
            running[0] -= 1
        received(frames)

    pull = process_context().socket(zmq.PULL)
    pull.setsockopt(zmq.RCVHWM, 10)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    actor.attach(pull, slow, max_pending=4)
    report = ctx.Queue()
    total = 5000
    spawn(peers, zmq_peers.flooder, f"tcp://127.0.0.1:{port}", total, report)
    label, sent = report.get(timeout=30)
    assert label == "pushed back after" and sent < total  # ZeroMQ's queues filled up
    assert wait_until(lambda: running[0] == 4, 10)
    assert received.count() == 0 and most[0] == 4
    release.set()
    assert report.get(timeout=60) == "done"
    assert wait_until(lambda: received.count() == total, 60)
    assert sorted(received.items) == sorted(b"%d" % i for i in range(total))
    assert most[0] <= 4


def test_a_raising_handler_is_logged_and_the_actor_keeps_serving(actor, peers):
    received = Received()

    def picky(frames):
        if frames[0].bytes == b"13":
            raise ValueError("unlucky")
        received(frames)

    attached = actor.attach("tcp://127.0.0.1:0", picky, socket_type=zmq.PULL, bind=True)
    report = ctx.Queue()
    spawn(peers, zmq_peers.pusher, attached.endpoint, 30, report)
    assert wait_until(lambda: received.count() == 29, 30)
    assert b"13" not in received.items


def test_a_send_only_push_takes_results_from_handler_threads(actor, peers):
    sink = process_context().socket(zmq.PULL)
    sink_port = sink.bind_to_random_port("tcp://127.0.0.1")
    try:
        out = actor.attach(f"tcp://127.0.0.1:{sink_port}", socket_type=zmq.PUSH)
        inbound = actor.attach("tcp://127.0.0.1:0",
                               lambda frames: out.send([b"done:" + frames[0].bytes]),
                               socket_type=zmq.PULL, bind=True)
        report = ctx.Queue()
        spawn(peers, zmq_peers.pusher, inbound.endpoint, 100, report)
        results = []
        while len(results) < 100 and sink.poll(30_000):
            results.append(sink.recv())
        assert sorted(results) == sorted(b"done:%d" % i for i in range(100))
    finally:
        sink.close(0)


def test_detach_hands_back_an_open_socket_and_stops_delivery(actor):
    received = Received()
    pull = process_context().socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    push = process_context().socket(zmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{port}")
    try:
        attached = actor.attach(pull, received)
        push.send(b"before")
        assert wait_until(lambda: received.count() == 1, 10)
        assert attached.detach() is pull
        push.send(b"after")
        assert pull.poll(10_000) and pull.recv() == b"after"  # the caller's again
        assert received.items == [b"before"]
        with pytest.raises(ActorStoppedError):
            attached.send([b"x"])
    finally:
        push.close(0)
        pull.close(0)


def test_stopping_the_actor_closes_the_sockets_it_made():
    actor = Actor(name="short").start()
    port = free_port()  # not from the range an outgoing connection could take it from
    actor.attach(f"tcp://127.0.0.1:{port}", Received(), socket_type=zmq.PULL, bind=True)
    assert not bindable(port)
    actor.stop()
    assert bindable(port)  # on return, not some time after


def test_sockets_that_cannot_be_attached_are_refused_clearly(actor):
    with pytest.raises(ValueError, match="cannot attach a socket of type"):
        actor.attach("tcp://127.0.0.1:0", Received(), socket_type=zmq.REQ, bind=True)
    with pytest.raises(TypeError, match="needs an on_message callable"):
        actor.attach("tcp://127.0.0.1:0", socket_type=zmq.PULL, bind=True)
    with pytest.raises(ValueError, match="only sends"):
        actor.attach("tcp://127.0.0.1:0", Received(), socket_type=zmq.PUSH, bind=True)
    with pytest.raises(TypeError, match="endpoint with socket_type"):
        actor.attach("tcp://127.0.0.1:0", Received())
    with pytest.raises(ValueError, match="max_pending"):
        actor.attach("tcp://127.0.0.1:0", Received(), socket_type=zmq.PULL, max_pending=0)
    stopped = Actor(name="stopped").start()
    stopped.stop()
    with pytest.raises(ActorStoppedError):
        stopped.attach("tcp://127.0.0.1:0", Received(), socket_type=zmq.PULL, bind=True)
