"""A worker that leaves its world forgets that world's contexts: a later world, whose
fresh workers number their contexts from 1 again, trains as the first did."""
import numpy as np
import pytest

import actors
import engine
from engine import dist_autograd
from tests.dist_autograd import workers
from tests.rpc.conftest import rpc_world

pytestmark = pytest.mark.timeout(180)


def test_a_later_world_whose_workers_reuse_context_ids_trains_right_and_shutdown_leaves_none():
    for _world in range(2):
        with rpc_world(2):
            for seed in range(3):  # contexts of worker1 that pass through this worker
                a, grad = actors.rpc_sync("worker1", workers.train_step_on_own_context,
                                          args=("worker0", seed), timeout=60)
                np.testing.assert_allclose(grad, 2 * a)
            with dist_autograd.context():  # one left just before shutdown
                actors.rpc_sync("worker1", engine.add, args=(engine.ones(2), engine.ones(2)),
                                timeout=60)
        assert len(dist_autograd.container) == 0
