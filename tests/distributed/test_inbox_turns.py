"""The inbox's waiting threads and the turn at reading the transport's mailbox: the turn
passes from one waiting thread to the next, and news reaches a thread in its turn."""
import threading
import time

import pytest

from actors.distributed.errors import RankLostError
from actors.distributed.inbox import Inbox
from actors.runtime import Actor
from tests.runtime import peers
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


class Waiter:
    """A thread that takes one message under `key` from `inbox` (sender 0)."""

    def __init__(self, inbox: Inbox, key: str) -> None:
        self.outcome: list = []

        def take() -> None:
            try:
                self.outcome.append(inbox.take(key, 0, (0,), time.monotonic() + 30,
                                               lambda: f"waiting for {key}"))
            except Exception as exc:  # noqa: BLE001 - handed to the test
                self.outcome.append(exc)

        self.thread = threading.Thread(target=take, name=f"waiter-{key}")
        self.thread.start()

    def result(self) -> object:
        self.thread.join(10)
        assert not self.thread.is_alive()
        return self.outcome[0]


@pytest.fixture
def reading_inbox():
    """An inbox whose waiters read an actor's mailbox, which puts each ECHO payload
    ``(key, message)`` into it; the names of the threads that put them."""
    inbox, putters = Inbox(), []
    with Actor(name="inbox-actor") as actor, Actor(None, name="sender") as sender:
        def put(msg) -> None:
            putters.append(threading.current_thread().name)
            inbox.put(*msg.payload)

        actor.register(peers.ECHO, put, inline=True)
        inbox.read_with(actor.read_mailbox_here, actor.interrupt_mailbox_reading)
        yield inbox, lambda *payload: sender.notify(actor.address, peers.ECHO, payload), \
            actor, putters


def test_the_turn_passes_to_the_next_waiting_thread_when_the_reader_has_its_message(
        reading_inbox):
    inbox, send, actor, putters = reading_inbox
    first = Waiter(inbox, "a")
    assert wait_until(lambda: peers.turn_on(actor))
    second = Waiter(inbox, "b")
    assert wait_until(lambda: inbox._sleepers == 1)  # it waits while the first reads
    send("a", 1)
    assert first.result() == 1
    # The second thread reads now: its message wakes nobody but itself.
    assert wait_until(lambda: peers.turn_on(actor))
    send("b", 2)
    assert second.result() == 2
    assert putters == ["waiter-a", "waiter-b"]


def test_a_lost_rank_reaches_a_thread_in_its_turn_at_once(reading_inbox):
    inbox, _, actor, _ = reading_inbox
    waiter = Waiter(inbox, "a")
    assert wait_until(lambda: peers.turn_on(actor))
    start = time.monotonic()
    inbox.lose(0, "its connection dropped")
    assert isinstance(waiter.result(), RankLostError)
    assert time.monotonic() - start < 5  # not the wait's 30 s
