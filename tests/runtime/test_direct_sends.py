"""One-way messages that other threads send on a peer's DEALER themselves: their order,
their safety beside the I/O thread's own use of the socket, and stopping."""
import threading

import pytest

from actors.runtime import Actor, ActorStoppedError
from actors.runtime.protocol import ONEWAY, envelope
from tests.runtime import peers
from tests.waiting import run_in_threads

pytestmark = pytest.mark.timeout(60)


def test_a_threads_one_way_messages_and_requests_arrive_in_the_order_it_sent_them():
    # The first message opens the connection on the I/O thread and each request goes
    # through it; the one-way messages between them leave from this thread.
    seen = peers.Handled()
    with Actor(name="server") as server, Actor(None, name="client") as client:
        server.register(peers.ECHO, seen.take, inline=True)
        requests = []
        for i in range(300):
            if i % 7 == 3:
                requests.append(client.request(server.address, peers.ECHO, i, timeout=10))
            else:
                client.notify(server.address, peers.ECHO, i)
        assert [future.wait(10) for future in requests] == [i for i in range(300) if i % 7 == 3]
        assert seen.wait_for(300, 10) == list(range(300))


def test_threads_sending_on_a_connection_whose_replies_arrive_meanwhile_lose_nothing():
    # Sender threads use the DEALER that the I/O thread reads the replies from; a send
    # may take in a reply without its descriptor saying so, and a lost reply shows as
    # a request waiting out its timeout here.
    seen = peers.Handled()
    with Actor(name="server") as server, Actor(None, name="client") as client:
        server.register(peers.ECHO, seen.take, inline=True)
        server.register(peers.SUM, lambda msg: msg.payload, inline=True)
        failures = []

        def work(thread: int) -> None:
            try:
                for i in range(400):
                    if thread < 4:
                        client.notify(server.address, peers.ECHO, (thread, i))
                    elif client.request(server.address, peers.SUM, i,
                                        timeout=10).wait(10) != i:
                        failures.append((thread, i))
            except Exception as exc:  # noqa: BLE001 - a lost reply times out here
                failures.append((thread, exc))

        assert run_in_threads(work, 6, 50)
        assert failures == []
        payloads = seen.wait_for(4 * 400, 10)
    for thread in range(4):
        assert [i for t, i in payloads if t == thread] == list(range(400))


def test_a_thread_sending_while_its_actor_stops_is_told_and_nothing_hangs():
    server = Actor(name="direct-server").start()
    server.register(peers.ECHO, lambda msg: None, inline=True)
    client = Actor(None, name="direct-client").start()
    client.notify(server.address, peers.ECHO, 0)  # opens the connection
    sending, outcome = threading.Event(), []

    def send_until_stopped() -> None:
        try:
            while True:
                client.notify(server.address, peers.ECHO, 1)
                sending.set()
        except ActorStoppedError as exc:
            outcome.append(exc)

    sender = threading.Thread(target=send_until_stopped)
    sender.start()
    try:
        assert sending.wait(10)
        client.stop(deliver=False)  # a flood's delivery would use up the stop's time
        sender.join(10)
        assert not sender.is_alive() and len(outcome) == 1
    finally:
        client.stop()
        server.stop()
    assert [t.name for t in threading.enumerate() if t.name.startswith("direct-")] == []


def test_a_send_made_while_the_thread_holds_the_connection_waits_its_turn_instead_of_deadlocking():
    # What a finalizer does when the garbage collector runs it in the middle of a
    # send: here a frame whose length, read while the DEALER is held, sends too.
    seen = peers.Handled()
    with Actor(name="server") as server, Actor(None, name="client") as client:
        server.register(peers.ECHO, seen.take, inline=True)
        client.notify(server.address, peers.ECHO, "first")  # opens the connection

        class Reentrant(bytes):
            def __len__(self) -> int:
                client.notify(server.address, peers.ECHO, "from inside")
                return super().__len__()

        head, body = envelope.encode(peers.ECHO, 0, "outer", ONEWAY)
        client.core._mailbox.send_to_peer(server.address, [head, Reentrant(body)])
        assert sorted(seen.wait_for(3, 10)) == ["first", "from inside", "outer"]
