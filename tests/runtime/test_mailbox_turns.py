"""A thread that waits for a message reads its actor's mailbox itself (`read_mailbox_here`):
what it dispatches, in which order beside the I/O thread, and how its turn ends."""
import threading
import time

import pytest

from actors.runtime import Actor
from tests.runtime import peers
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


class Reader:
    """A thread that takes turns reading `actor`'s mailbox until told to stop, resting
    `pause()` seconds between turns."""

    def __init__(self, actor: Actor, pause=lambda: 0.0) -> None:
        self.turns = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(actor, pause), name="reader")
        self._thread.start()

    def _run(self, actor: Actor, pause) -> None:
        while not self._stop.is_set():
            if actor.read_mailbox_here(0.05):
                self.turns += 1
            rest = pause()
            if rest:
                self._stop.wait(rest)  # a gap for the I/O thread to take the reading back

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert not self._thread.is_alive()


def test_a_reading_thread_dispatches_requests_itself_and_the_io_thread_takes_over_after():
    dispatched = peers.Handled()
    with Actor(name="turns") as server, Actor(None, name="client") as client:
        server.register(peers.ECHO, dispatched.take, inline=True)
        reader = Reader(server)
        try:
            assert wait_until(lambda: reader.turns > 0)
            for i in range(200):
                client.notify(server.address, peers.ECHO, i)
            assert wait_until(lambda: len(dispatched.payloads()) == 200)
        finally:
            reader.stop()
        assert dispatched.payloads() == list(range(200))
        assert "reader" in dispatched.threads()
        # With no turn on, the I/O thread reads again: a request is answered, by it.
        assert client.request(server.address, peers.ECHO, "after", timeout=10).wait(10) \
            == "after"
        assert dispatched.seen[-1] == ("after", "turns-io")


def test_requests_keep_their_order_while_the_reading_changes_hands():
    dispatched = peers.Handled()
    with Actor(name="turns") as server, Actor(None, name="client") as client:
        server.register(peers.ECHO, dispatched.take, inline=True)
        sent, stop_sending = [], threading.Event()

        def send() -> None:
            while not stop_sending.is_set():
                client.notify(server.address, peers.ECHO, len(sent))
                sent.append(None)
                if len(sent) % 500 == 0:  # a request too, whose reply comes from either
                    client.request(server.address, peers.ECHO, "r", timeout=10).wait(10)

        sender = threading.Thread(target=send)
        sender.start()
        try:
            # Turns taken back to back keep the reading; a pause longer than the grace
            # and the I/O thread's longest look (router_turns.GRACE, LAST_RECHECK_MS)
            # hands it back to the I/O thread, while messages keep coming.
            for _ in range(4):
                reader = Reader(server)
                threading.Event().wait(0.1)
                reader.stop()
                threading.Event().wait(0.3)
        finally:
            stop_sending.set()
            sender.join(10)
        assert not sender.is_alive()
        count = len(sent)
        assert wait_until(lambda: len(dispatched.payloads()) == count + count // 500, 30)
    assert [p for p in dispatched.payloads() if p != "r"] == list(range(count))
    assert dispatched.threads() == {"reader", "turns-io"}


def test_only_one_thread_reads_at_a_time_and_an_interrupt_ends_its_sleep_at_once():
    with Actor(name="turns") as server:
        outcome = []
        first = threading.Thread(target=lambda: outcome.append(server.read_mailbox_here(30)))
        start = time.monotonic()
        first.start()
        # While the first thread sleeps in its turn, another is told to wait its usual way.
        assert wait_until(lambda: peers.turn_on(server))
        assert server.read_mailbox_here(0) is False
        server.interrupt_mailbox_reading()
        first.join(10)
        assert outcome == [True] and time.monotonic() - start < 10


def test_stopping_the_actor_ends_a_reading_thread_and_later_turns_are_refused():
    server = Actor(name="turns-stop").start()
    outcome = []
    reading = threading.Thread(target=lambda: outcome.append(server.read_mailbox_here(30)))
    reading.start()
    try:
        assert wait_until(lambda: peers.turn_on(server))
        server.stop()
        reading.join(10)
        assert not reading.is_alive() and outcome == [True]
        assert server.read_mailbox_here(1) is False
    finally:
        server.stop()
    assert [t.name for t in threading.enumerate() if t.name.startswith("turns-stop")] == []


def test_a_thread_cannot_read_a_mailbox_that_the_workers_read():
    with Actor(name="leaders", workers_receive=True) as server:
        assert server.read_mailbox_here(1) is False
