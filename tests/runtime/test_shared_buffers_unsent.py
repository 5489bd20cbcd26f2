"""Messages that lent shared memory but never left give their blocks back at once,
rather than holding them until they go stale (and holding up the process's exit)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from actors.runtime import (Actor, ActorStoppedError, Future, PeerLostError,
                            RequestTimeoutError)
from actors.runtime.io.channel import Channel
from actors.runtime.protocol import shared_buffers
from actors.runtime.protocol.shared_buffers import SHARED_MIN
from tests.net import free_port

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("own_blocks"),
              pytest.mark.skipif(not shared_buffers.enabled(), reason="no memfd or /proc, or off")]

BIG = np.ones(SHARED_MIN // 4, np.float32)
HOLD = 0xF010


def _nobody() -> str:
    return f"tcp://127.0.0.1:{free_port()}"


@pytest.fixture
def quick_client():
    """A client that finds a peer lost within a second."""
    actor = Actor(None, name="client", heartbeat=0.2, heartbeat_timeout=0.6).start()
    try:
        yield actor
    finally:
        actor.stop()


def test_a_request_to_a_peer_known_lost_gives_its_blocks_back(quick_client, own_blocks):
    address = _nobody()
    with pytest.raises(PeerLostError):
        quick_client.request(address, HOLD, None, timeout=20).wait(30)
    with pytest.raises(PeerLostError):
        quick_client.request(address, HOLD, BIG, timeout=20, same_host=True).wait(30)
    assert own_blocks.lent == [1] and own_blocks.unread() == 0


def test_a_request_queued_when_its_actor_stops_gives_its_blocks_back(own_blocks):
    actor = Actor(None, name="never-started")
    pending = actor.request(_nobody(), HOLD, BIG, timeout=20, same_host=True)
    assert own_blocks.unread() == 1
    actor.stop()
    with pytest.raises(ActorStoppedError):
        pending.wait(10)
    assert own_blocks.unread() == 0


def test_a_channel_call_that_cannot_connect_gives_its_blocks_back(own_blocks):
    channel = Channel(_nobody(), connect_timeout=0.3)
    try:
        with pytest.raises((PeerLostError, TimeoutError)):
            channel.call(HOLD, BIG, timeout=5, same_host=True)
    finally:
        channel.close()
    assert own_blocks.lent == [1] and own_blocks.unread() == 0


def test_a_reply_its_actor_can_no_longer_send_gives_its_blocks_back(quick_client, own_blocks):
    entered, answer = threading.Event(), Future()

    def hold(msg):
        entered.set()
        return answer  # replied to when the test completes it

    server = Actor("tcp://127.0.0.1:0", name="server", num_worker_threads=2)
    server.register(HOLD, hold)
    server.start()
    try:
        pending = quick_client.request(server.address, HOLD, None, timeout=30, same_host=True)
        assert entered.wait(30)
        server.stop(deliver=False)  # its router closes with the reply still to come
        answer.set_result(BIG)  # the reply is lent and dropped on this thread
        assert own_blocks.lent == [1] and own_blocks.unread() == 0
        with pytest.raises((PeerLostError, RequestTimeoutError)):
            pending.wait(30)
    finally:
        server.stop()
