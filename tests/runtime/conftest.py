import multiprocessing as mp

import pytest

from tests.runtime import peers


@pytest.fixture
def peer_process():
    """A peer actor in its own spawned process: yields (address, process); killed afterwards."""
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    process = ctx.Process(target=peers.serve, args=(ready,), daemon=True)
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
