import multiprocessing as mp

import pytest

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
