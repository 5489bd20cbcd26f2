"""A process-group message is accepted only from the connection of the rank it names."""
import concurrent.futures
import time

import numpy as np
import pytest
import zmq

from actors.distributed.errors import (CollectiveTimeoutError, RankLostError,
                                      WrongConnectionError)
from actors.distributed.transport import Transport
from actors.runtime import Actor, Kind, ProtocolError
from actors.runtime.protocol import envelope
from actors.runtime.concurrency.futures import FutureTimeoutError
from actors.runtime.protocol import ONEWAY
from store import TCPStore
from tests.distributed import scenarios
from tests.distributed.ranks import ctx, spawn_ranks
from tests.net import free_port

pytestmark = pytest.mark.timeout(120)

SILENCE = 0.5  # seconds a test listens for an answer that must not come
# What rank 0 sends rank 1 at step 1 of all_reduces_around_a_forgery, but 1000 instead of 1.
FORGED_STEP = (("0", 1, 0), (("all_reduce", "SUM", "<f8", (2,)), "all"), np.full(2, 1000.0))


def _dealer(context, address, routing_id=None):
    """A plain DEALER connected to `address`, presenting `routing_id` if given."""
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if routing_id is not None:
        sock.setsockopt(zmq.ROUTING_ID, routing_id)
    sock.connect(address)
    return sock


def _forge_then_ping(sock, payload, seconds):
    """Send `payload` as a PG_DATA, then a PING; True once the PING is answered within
    `seconds` (one connection is served in order: the forged message was handled)."""
    sock.send_multipart(envelope.encode(Kind.PG_DATA, 0, payload, ONEWAY))
    sock.send_multipart(envelope.encode(Kind.PING, 1, None))
    return bool(sock.poll(int(seconds * 1000)))


def _transport_address(port, rank):
    """Rank `rank`'s process-group address, where the ranks publish it in their store."""
    store = TCPStore("127.0.0.1", port, timeout=60)
    try:
        return store.get(f"pg/0/addresses/{rank}").decode()
    finally:
        store.close()


@pytest.mark.slow
def test_a_forged_step_from_a_stranger_is_dropped_and_every_rank_sums_right(capfd):
    port, forged = free_port(), ctx.Event()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(spawn_ranks, 3, scenarios.all_reduces_around_a_forgery, forged,
                              timeout=90, port=port)
        context = zmq.Context()
        try:
            sock = _dealer(context, _transport_address(port, 1))
            try:
                assert _forge_then_ping(sock, FORGED_STEP, 30), "rank 1 never answered the PING"
            finally:
                sock.close(0)
        finally:
            context.term()
            forged.set()
        outcomes = running.result(timeout=110)
    for rank, (status, value) in enumerate(outcomes):
        assert status == "ok", f"rank {rank}: {value}"
        assert value == [[6.0, 6.0]] * 3
    err = capfd.readouterr().err
    assert "pg_message_from_wrong_connection" in err
    assert "claimed=0" in err and "connection_of=None" in err


@pytest.fixture
def transports():
    """Ranks 0, 1 and 2 of a group, as three transports of this process."""
    made = []
    try:
        made.extend(Transport(rank, "127.0.0.1") for rank in range(3))
        addresses, identities = [t.address for t in made], [t.identity for t in made]
        with concurrent.futures.ThreadPoolExecutor(3) as pool:  # each waits for the others
            for connecting in [pool.submit(t.connect, addresses, identities, 30) for t in made]:
                connecting.result(60)
        yield made
    finally:
        for transport in made:
            transport.close()


def _take(transport, key, sender, seconds):
    return transport.inbox.take(key, sender, range(3), time.monotonic() + seconds,
                                lambda: f"a message under {key}")


def test_a_message_naming_rank_0_on_the_connection_of_rank_2_is_dropped(transports, capsys):
    _, receiver, other = transports
    other._actor.notify(receiver.address, Kind.PG_DATA, (("g", 0, 0), "call", "forged"))
    other.send(1, ("g", 0), "call", "genuine")
    # One connection is served in order: once rank 2's own message is in, so was the forgery.
    assert _take(receiver, ("g", 0, 2), 2, 30) == ("call", "genuine")
    with pytest.raises(CollectiveTimeoutError):
        _take(receiver, ("g", 0, 0), 0, 0)
    err = capsys.readouterr().err
    assert "pg_message_from_wrong_connection" in err
    assert "claimed=0" in err and "connection_of=2" in err


def test_a_leave_naming_another_rank_is_refused_with_an_error_and_changes_nothing(transports):
    _, receiver, other = transports
    with pytest.raises(WrongConnectionError, match="naming rank 0: it came on the connection "
                                                   "of rank 2"):
        other._actor.request(receiver.address, Kind.PG_LEAVE, (0, {2: "forged"}, None),
                             30).wait(30)
    with pytest.raises(CollectiveTimeoutError):  # not "left the group", nor "rank 2 lost"
        _take(receiver, ("g", 0, 0), 0, 0)


def test_a_leave_naming_the_ranks_it_found_lost_makes_a_wait_for_the_leaver_name_them(
        transports):
    _, receiver, other = transports
    other._actor.request(receiver.address, Kind.PG_LEAVE,
                         (2, {0: "its connection dropped"}, None), 30).wait(30)
    with pytest.raises(RankLostError, match=r"^rank 0 lost: its connection dropped "
                                            r"\(seen by rank 2\)$"):
        _take(receiver, ("g", 0, 2), 2, 30)


def test_a_wait_for_a_rank_that_left_names_the_error_it_had_raised(transports):
    _, receiver, other = transports
    other._actor.request(receiver.address, Kind.PG_LEAVE,
                         (2, {}, "CollectiveMismatchError: rank 2 called barrier()"), 30).wait(30)
    with pytest.raises(RankLostError, match=r"^rank 2 lost: left the group before .* was served, "
                                            r"stopped by CollectiveMismatchError: rank 2 "
                                            r"called barrier\(\)$"):
        _take(receiver, ("g", 0, 2), 2, 30)


def test_a_malformed_leave_gets_a_protocol_error_and_the_transport_serves_on(transports):
    first, receiver, _ = transports
    with pytest.raises(ProtocolError, match=r"PG_LEAVE takes \(rank, \{rank: reason\}, "
                                             r"failure or null\), got 7"):
        first._actor.request(receiver.address, Kind.PG_LEAVE, 7, 30).wait(30)
    with pytest.raises(ProtocolError, match="PG_LEAVE takes"):  # a failure that is no text
        first._actor.request(receiver.address, Kind.PG_LEAVE, (0, {}, 5), 30).wait(30)
    first.send(1, ("g", 0), "call", "after")
    assert _take(receiver, ("g", 0, 0), 0, 30) == ("call", "after")


def test_a_second_connection_presenting_a_ranks_identity_is_never_heard(transports):
    first, receiver, _ = transports
    context = zmq.Context()
    try:
        sock = _dealer(context, receiver.address, routing_id=first.identity)
        try:
            assert not _forge_then_ping(sock, (("g", 0, 0), "call", "forged"), SILENCE)
        finally:
            sock.close(0)
    finally:
        context.term()
    first.send(1, ("g", 0), "call", "genuine")
    assert _take(receiver, ("g", 0, 0), 0, 30) == ("call", "genuine")


def test_a_transport_answers_pings_only_once_it_knows_its_peers():
    transport = Transport(0, "127.0.0.1")
    client = Actor(None, name="pinger").start()
    try:
        ping = client.request(transport.address, Kind.PING, None, 30)
        with pytest.raises(FutureTimeoutError):
            ping.wait(SILENCE)
        transport.connect([transport.address], [transport.identity], 30)
        assert ping.wait(30) is None
    finally:
        client.stop()
        transport.close()
