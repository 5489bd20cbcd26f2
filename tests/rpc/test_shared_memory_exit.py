"""A worker that ends right after sending a large array through shared memory delivers it:
its exit waits until the receiver has copied the buffer out of its block."""
from __future__ import annotations

import numpy as np
import pytest

import actors
from actors.runtime.protocol import shared_buffers
from tests.net import free_port
from tests.rpc import workers
from tests.rpc.conftest import ctx
from tests.subprocesses import reap

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not shared_buffers.AVAILABLE, reason="no memfd or /proc")]

MIB = 1 << 20


@pytest.mark.parametrize("reader_busy", [False, True])
def test_a_worker_that_ends_right_after_sending_a_large_array_delivers_it(reader_busy):
    """With `reader_busy`, this process's one worker thread is held while the sender
    ends, so nobody reads the request until after the sender's exit has confirmed
    what it could: the sender must stay until its block is read."""
    port = free_port()
    big = np.arange(MIB, dtype=np.float64)
    for event in (workers.kept_one, workers.holding, workers.let_go):
        event.clear()
    workers.kept.clear()
    sent = ctx.Queue()
    proc = ctx.Process(target=workers.send_and_leave, args=(port, big, sent), daemon=True)
    proc.start()
    try:
        actors.init_rpc("worker0", 0, 2, init_method=f"tcp://127.0.0.1:{port}",
                        num_worker_threads=1, timeout=30)
        try:
            if reader_busy:
                held = actors.rpc_async("worker0", workers.hold)
                assert workers.holding.wait(30)
            assert sent.get(timeout=60) == "sent"
            if reader_busy:
                # Give the sender's exit time to pass its delivery check, which gives
                # up after 2 s; a sender that left without waiting for its block would
                # be gone by now, and the request below unreadable.
                proc.join(3)
                workers.let_go.set()
                held.wait(30)
            assert workers.kept_one.wait(60), "the array never arrived"
            proc.join(60)
            assert proc.exitcode == 0
            assert np.array_equal(workers.kept[0], big)
        finally:
            workers.let_go.set()
            actors.shutdown(graceful=False)
    finally:
        reap([proc], 30)
