"""SMART mode and dead workers: one that the pass needs fails it, naming the worker; one
whose send functions the roots do not reach is never asked."""
import time

import numpy as np
import pytest

import actors
import engine
from engine import dist_autograd
from engine.dist_autograd import DistBackwardError
from tests.rpc.conftest import rpc_world

pytestmark = pytest.mark.timeout(60)

HEARTBEAT_TIMEOUT = 3.0  # the RPC world's default


@pytest.mark.slow
def test_a_dead_worker_fails_the_pass_only_if_it_holds_a_live_send():
    """Context 1: ∂(a + b)/∂(a, b) = (1, 1), with b·c computed on worker2 and unused.
    Context 2: Σ(2x) computed on worker2, which the pass then needs."""
    with rpc_world(3) as procs:
        a, b, c, x = (engine.tensor([v], requires_grad=True) for v in (2.0, 3.0, 4.0, 5.0))
        with dist_autograd.context() as needed_id:
            y = actors.rpc_sync("worker2", engine.mul, args=(x, 2.0))
            # a second context while this one stays open: contexts do not nest in a thread
            with dist_autograd.container.using(None), dist_autograd.context() as unused_id:
                d = actors.rpc_sync("worker1", engine.add, args=(a, b))
                actors.rpc_sync("worker2", engine.mul, args=(b, c))
                procs[1].kill()
                procs[1].join(10)
                dist_autograd.backward(unused_id, [d.sum()], mode="smart")
                grads = dist_autograd.get_gradients(unused_id)
                assert set(grads) == {a, b}
                np.testing.assert_allclose([grads[a], grads[b]], [[1.0], [1.0]])
            started = time.monotonic()
            with pytest.raises(DistBackwardError, match="worker 'worker2'.*lost") as info:
                dist_autograd.backward(needed_id, [y.sum()], mode="smart")
            assert time.monotonic() - started < HEARTBEAT_TIMEOUT + 1.0
            assert info.value.worker == "worker2"
            assert dist_autograd.get_gradients(needed_id) == {}
