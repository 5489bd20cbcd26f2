"""A process that ends normally, or an actor that is stopped, first delivers the messages
its code already sent."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
import zmq

from actors.runtime import Actor
from tests.net import free_port
from tests.subprocesses import ROOT

pytestmark = pytest.mark.timeout(120)

COUNTED = 0xF010

SENDER = """
import os, sys
from actors.runtime import Actor
actor = Actor(None, name="sender").start()
for i in range(int(sys.argv[2])):
    actor.notify(sys.argv[1], 0xF010, i)
if sys.argv[3] == "stop":
    actor.stop()
    os._exit(0)  # no exit flush: what arrived, stop() delivered
"""

class Received(list):
    """The payloads of COUNTED messages, as a handler; `all_in` is set once `count` came."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count, self.all_in = count, threading.Event()

    def __call__(self, msg) -> None:
        self.append(msg.payload)
        if len(self) == self.count:
            self.all_in.set()

    def clear(self) -> None:
        super().clear()
        self.all_in.clear()


# How the sender ends: a normal exit, or stop() and then an exit that flushes nothing.
ENDINGS = ["exit", "stop"]


def _sender(address: str, count: int, ending: str = "exit") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SENDER, address, str(count), ending],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("ending", ENDINGS)
def test_one_way_messages_sent_just_before_a_normal_exit_or_a_stop_all_arrive(ending):
    count = 2000
    received = Received(count)
    with Actor(name="receiver") as receiver:
        receiver.register(COUNTED, received, inline=True)
        for _ in range(3):
            received.clear()
            done = _sender(receiver.address, count, ending)
            assert done.returncode == 0, done.stderr
            # The sender has exited: everything it sent was confirmed before it did.
            assert received.all_in.is_set(), f"{len(received)} of {count} arrived"
            assert received == list(range(count))


@pytest.mark.slow
@pytest.mark.parametrize("ending", ENDINGS)
def test_a_peer_that_never_answers_bounds_the_exit_or_stop_and_is_named_in_a_warning(ending):
    ctx = zmq.Context.instance()
    silent = ctx.socket(zmq.ROUTER)  # reads nothing, answers nothing
    silent.setsockopt(zmq.LINGER, 0)
    port = silent.bind_to_random_port("tcp://127.0.0.1")
    try:
        started = time.monotonic()
        done = _sender(f"tcp://127.0.0.1:{port}", 10, ending)
        took = time.monotonic() - started
    finally:
        silent.close(0)
    assert done.returncode == 0, done.stderr
    assert f"messages_maybe_undelivered_at_{ending}" in done.stderr
    assert f"tcp://127.0.0.1:{port}" in done.stderr and "messages=10" in done.stderr
    assert took < 20


LARGE_SENDER = """
import sys
from actors.runtime import Actor
actor = Actor(None, name="sender").start()
for i in range(int(sys.argv[2])):
    actor.notify(sys.argv[1], 0xF010, (i, bytes([i]) * int(sys.argv[3])))
"""


@pytest.mark.slow
def test_large_messages_sent_just_before_a_normal_exit_arrive_whole():
    """Frames of 1 MiB and more leave zero-copy, their memory held by pyzmq's garbage
    collector, whose own exit handler must run after the deliveries are confirmed;
    before, it ran first: the messages arrived as a header and two empty frames, or
    libzmq aborted the sender ("Bad address")."""
    count, size = 3, 8 << 20
    received = Received(count)
    with Actor(name="receiver") as receiver:
        receiver.register(COUNTED, received, inline=True)
        for _ in range(3):
            received.clear()
            done = subprocess.run([sys.executable, "-c", LARGE_SENDER, receiver.address,
                                   str(count), str(size)],
                                  cwd=ROOT, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            assert received.all_in.is_set(), \
                f"{len(received)} of {count} arrived: {done.stderr[-2000:]}"
            assert [i for i, _ in received] == list(range(count))
            assert all(data == bytes([i]) * size for i, data in received)


def test_a_stop_does_not_ask_a_peer_already_found_lost_to_confirm_its_messages(capsys):
    # Its loss was told when it was found; a warning at the stop would only repeat it.
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens: the connection is refused
    with Actor(name="sender") as sender:
        lost = threading.Event()
        sender.on_peer_lost(lambda peer: lost.set())
        sender.notify(address, COUNTED, 1)
        assert lost.wait(10)
    assert "messages_maybe_undelivered" not in capsys.readouterr().err
