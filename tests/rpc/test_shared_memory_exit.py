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


def test_a_worker_that_ends_right_after_sending_a_large_array_delivers_it():
    port = free_port()
    big = np.arange(MIB, dtype=np.float64)
    workers.kept.clear()
    workers.kept_one.clear()
    proc = ctx.Process(target=workers.send_and_leave, args=(port, big), daemon=True)
    proc.start()
    try:
        actors.init_rpc("worker0", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=30)
        try:
            assert workers.kept_one.wait(60), "the array never arrived"
            proc.join(60)
            assert proc.exitcode == 0
            assert np.array_equal(workers.kept[0], big)
        finally:
            actors.shutdown(graceful=False)
    finally:
        reap([proc], 30)
