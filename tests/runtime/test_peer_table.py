"""The peer table alone: connection states, one decision per loss, requests and deadlines,
and which messages an answer has proven delivered."""
from __future__ import annotations

import zmq

from actors.runtime import Future
from actors.runtime.io.peers import (CONNECTION_LOST, NOTHING_LISTENS, Liveness, Pending,
                                     PeerTable)
from actors.runtime.io.sockets import REFUSED_PLAIN

PEER = "tcp://127.0.0.1:5555"


def table() -> PeerTable:
    return PeerTable(Liveness(1000, 3000))


def test_an_established_connection_that_drops_makes_the_peer_lost_once():
    peers = table()
    peers.opened(PEER)
    assert peers.observe(PEER, zmq.EVENT_HANDSHAKE_SUCCEEDED) is None
    assert peers.lost(PEER) is None
    assert peers.observe(PEER, zmq.EVENT_DISCONNECTED) == CONNECTION_LOST
    assert peers.observe(PEER, zmq.EVENT_DISCONNECTED) is None  # decided already
    assert not peers.report_lost(PEER, "its connection to this worker closed")
    assert peers.lost(PEER) == CONNECTION_LOST


def test_a_first_connection_that_nothing_accepts_makes_the_peer_lost():
    peers = table()
    peers.opened(PEER)
    assert peers.observe(PEER, zmq.EVENT_CONNECT_RETRIED) == NOTHING_LISTENS


def test_a_refused_handshake_makes_the_peer_lost_with_the_reason():
    peers = table()
    peers.opened(PEER)
    assert peers.observe(PEER, zmq.EVENT_HANDSHAKE_FAILED_AUTH) == REFUSED_PLAIN


def test_a_retry_after_a_drop_is_not_a_second_loss_and_a_new_handshake_revives_the_peer():
    peers = table()
    peers.opened(PEER)
    peers.observe(PEER, zmq.EVENT_HANDSHAKE_SUCCEEDED)
    peers.observe(PEER, zmq.EVENT_DISCONNECTED)
    assert peers.observe(PEER, zmq.EVENT_CONNECT_RETRIED) is None
    peers.observe(PEER, zmq.EVENT_HANDSHAKE_SUCCEEDED)
    assert peers.lost(PEER) is None


def test_a_loss_reported_from_elsewhere_is_decided_once_and_survives_opening_a_connection():
    peers = table()
    assert peers.report_lost(PEER, "its connection to this worker closed")
    assert not peers.report_lost(PEER, "connection lost")
    peers.opened(PEER)
    assert peers.lost(PEER) == "its connection to this worker closed"
    assert peers.observe(PEER, zmq.EVENT_CONNECT_RETRIED) is None


def test_requests_expire_by_deadline_and_a_lost_peers_requests_are_taken_out():
    peers = table()
    for req_id, (peer, deadline) in enumerate([(PEER, 5.0), ("tcp://b:1", 2.0),
                                               (PEER, None)], start=1):
        peers.register(req_id, Pending(Future(), peer, 1, deadline))
        peers.sent(req_id, deadline)
    assert peers.earliest_deadline() == 2.0
    assert [p.peer for p in peers.expired(3.0)] == ["tcp://b:1"]
    taken = peers.take_requests(lambda p: p.peer == PEER)
    assert len(taken) == 2 and peers.expired(10.0) == []
    assert peers.forget(1) is None


def test_an_answer_proves_delivered_what_was_sent_before_its_request_and_no_more():
    peers, other = table(), "tcp://b:1"
    for _ in range(3):
        peers.count_sent(PEER)  # three one-way messages
    peers.register(7, Pending(Future(), PEER, 1, None))
    peers.left_as(7, peers.count_sent(PEER))  # the request is the fourth
    peers.count_sent(PEER)  # and a fifth message after it
    peers.count_sent(other)
    peers.answered(peers.forget(7))
    assert peers.take_unproven() == {PEER: 1, other: 1}
    assert peers.take_unproven() == {}  # those are being confirmed now
    peers.register(8, Pending(Future(), other, 1, None))
    peers.left_as(8, peers.count_sent(other))
    peers.answered(peers.forget(8))
    assert peers.take_unproven() == {}  # the answer proved it


def test_a_late_answer_to_an_earlier_request_proves_no_less_than_a_later_one_did():
    peers = table()
    for req_id in (1, 2):
        peers.register(req_id, Pending(Future(), PEER, 1, None))
        peers.left_as(req_id, peers.count_sent(PEER))
    peers.answered(peers.forget(2))
    peers.answered(peers.forget(1))
    assert peers.take_unproven() == {}
