"""Large arrays between workers of one host go through shared memory, both ways.

A request to a worker on this host, and the reply to it, carry buffers of 2 MiB or
more as descriptors of shared blocks (actors/runtime/protocol/shared_buffers.py);
what arrives is equal to what was sent, and a forged descriptor is answered with an
error (tests/rpc/test_shared_memory_exit.py: a worker that ends right after sending).
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import zmq

import actors
from actors.runtime.errors import ProtocolError
from actors.runtime.protocol import ERROR, RESPONSE, SAME_HOST, SHARED, Kind, envelope, pack_header
from actors.runtime.protocol import shared_buffers
from actors.runtime.protocol.remote_errors import exception_from_payload
from tests.rpc import workers
from tests.rpc.conftest import rpc_world

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not shared_buffers.AVAILABLE, reason="no memfd or /proc")]

MIB = 1 << 20


@pytest.fixture(scope="module")
def pair():
    with rpc_world(2) as procs:
        yield procs


def test_large_arrays_cross_through_shared_memory_both_ways(pair):
    unread = shared_buffers.BLOCKS.unread()  # other tests' in this process
    big = np.random.default_rng(0).standard_normal(MIB)  # 8 MiB
    back = actors.rpc_sync("worker1", workers.echo, args=(big,))
    assert np.array_equal(back, big)
    assert actors.rpc_sync("worker1", workers.shared_blocks_mapped) >= 1  # it read ours
    assert shared_buffers.BLOCKS.mapped() >= 1  # we read its reply's
    pair_back = actors.rpc_async("worker1", workers.echo, args=((big, big[::2].copy()),)).wait()
    assert np.array_equal(pair_back[0], big) and np.array_equal(pair_back[1], big[::2])
    assert shared_buffers.BLOCKS.unread() == unread


def test_a_forged_shared_descriptor_gets_an_error_reply_and_the_worker_serves_on(pair):
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.linger = 0
    try:
        dealer.connect(actors.get_worker_info("worker1").address)
        dealer.send_multipart([pack_header(Kind.RPC_CALL, 5, SHARED | SAME_HOST, 1),
                               pickle.dumps(None), bytes(shared_buffers.DESCRIPTOR.size)])
        assert dealer.poll(30_000), "no reply to a forged shared descriptor"
        reply = dealer.recv_multipart()
    finally:
        dealer.close()
    header = envelope.read_header(reply)
    assert header.req_id == 5 and header.flags & (RESPONSE | ERROR) == RESPONSE | ERROR
    error = exception_from_payload(envelope.read_payload(header, reply))
    assert isinstance(error, ProtocolError) and "cannot map" in str(error)
    assert actors.rpc_sync("worker1", workers.add, args=(2, 3)) == 5
