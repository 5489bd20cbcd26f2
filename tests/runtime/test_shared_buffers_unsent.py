"""Messages that lent shared memory but never left give their blocks back at once,
rather than holding them until they go stale (and holding up the process's exit)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from actors.runtime import Actor, ActorStoppedError, PeerLostError, RequestTimeoutError
from actors.runtime.io.channel import Channel
from actors.runtime.protocol import shared_buffers
from actors.runtime.protocol.shared_buffers import SHARED_MIN
from tests.net import free_port
from tests.waiting import wait_until

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not shared_buffers.AVAILABLE, reason="no memfd or /proc")]

BIG = np.ones(SHARED_MIN // 4, np.float32)
HOLD = 0xF010


def _nobody() -> str:
    return f"tcp://127.0.0.1:{free_port()}"


@pytest.fixture
def client():
    actor = Actor(None, name="client", heartbeat=0.2, heartbeat_timeout=0.6).start()
    try:
        yield actor
    finally:
        actor.stop()


def test_a_request_to_a_peer_known_lost_gives_its_blocks_back(client):
    address = _nobody()
    with pytest.raises(PeerLostError):
        client.request(address, HOLD, None, timeout=20).wait(30)
    with pytest.raises(PeerLostError):
        client.request(address, HOLD, BIG, timeout=20, same_host=True).wait(30)
    assert shared_buffers.BLOCKS.unread() == 0


def test_a_request_queued_when_its_actor_stops_gives_its_blocks_back():
    actor = Actor(None, name="never-started")
    pending = actor.request(_nobody(), HOLD, BIG, timeout=20, same_host=True)
    assert shared_buffers.BLOCKS.unread() == 1
    actor.stop()
    with pytest.raises(ActorStoppedError):
        pending.wait(10)
    assert shared_buffers.BLOCKS.unread() == 0


def test_a_channel_call_that_cannot_connect_gives_its_blocks_back():
    channel = Channel(_nobody(), connect_timeout=0.3)
    try:
        with pytest.raises((PeerLostError, TimeoutError)):
            channel.call(HOLD, BIG, timeout=5, same_host=True)
    finally:
        channel.close()
    assert shared_buffers.BLOCKS.unread() == 0


def test_a_reply_its_actor_can_no_longer_send_gives_its_blocks_back(client):
    entered, release = threading.Event(), threading.Event()

    def hold(msg):
        entered.set()
        release.wait(30)
        return BIG

    server = Actor("tcp://127.0.0.1:0", name="server", num_worker_threads=2)
    server.register(HOLD, hold)
    server.start()
    try:
        pending = client.request(server.address, HOLD, None, timeout=30, same_host=True)
        assert entered.wait(30)
        server.stop(timeout=0.2, deliver=False)  # its router closes; the handler still runs
        release.set()
        assert wait_until(lambda: shared_buffers.BLOCKS.unread() == 0, timeout=20)
        with pytest.raises((PeerLostError, RequestTimeoutError)):
            pending.wait(30)
    finally:
        release.set()
        server.stop()
