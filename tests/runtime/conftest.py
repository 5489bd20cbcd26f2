import multiprocessing as mp

import pytest

from actors.runtime.protocol import shared_buffers
from tests.runtime import peers


@pytest.fixture(params=["io-thread-reads", "workers-read"])
def peer_process(request):
    """A peer actor in its own spawned process: yields (address, process); killed afterwards.

    Once with the I/O thread reading requests, once with its workers reading them.
    """
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    process = ctx.Process(target=peers.serve,
                          args=(ready, "tcp://127.0.0.1:0", request.param == "workers-read"),
                          daemon=True)
    process.start()
    try:
        yield ready.get(timeout=30), process
    finally:
        process.kill()
        process.join(10)


@pytest.fixture
def client():
    from actors.runtime import Actor

    actor = Actor(None, name="client").start()
    try:
        yield actor
    finally:
        actor.stop()


@pytest.fixture
def own_blocks(monkeypatch):
    """The process's blocks, fresh for each test, counting the messages that lend."""
    fresh = shared_buffers.SharedBlocks()
    lend, fresh.lent = fresh.lend, []
    fresh.lend = lambda buffers: fresh.lent.append(len(buffers)) or lend(buffers)
    monkeypatch.setattr(shared_buffers, "BLOCKS", fresh)
    yield fresh
    fresh.close()
