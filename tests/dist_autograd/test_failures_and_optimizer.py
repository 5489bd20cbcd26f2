"""Dead workers during backward, contexts of dead creators, and the DistributedOptimizer."""
import contextvars
import threading
import time

import numpy as np
import pytest

import actors
import engine
from actors.rpc import WorkerLostError
from engine import dist_autograd, optim
from engine.optim import DistributedOptimizer
from tests import limits
from tests.limits import within
from tests.dist_autograd import workers
from tests.rpc.conftest import rpc_world
from tests.waiting import wait_until, raised_by

pytestmark = pytest.mark.timeout(120)



@pytest.mark.slow
def test_a_worker_that_dies_during_backward_makes_backward_raise_promptly():
    import engine.dist_autograd  # noqa: F401

    with rpc_world(3) as procs:
        with dist_autograd.context() as context_id:
            a = engine.ones(3, requires_grad=True)
            loss = actors.rpc_sync("worker2", workers.stall, args=(a,)).sum()
            errors = []
            runner = threading.Thread(target=lambda: errors.append(
                raised_by(dist_autograd.backward, context_id, [loss])))
            runner.start()
            assert wait_until(lambda: actors.rpc_sync("worker2", workers.is_stalled))
            procs[1].kill()
            started = time.monotonic()
            runner.join(10)
            assert not runner.is_alive()
            within(started, limits.CONNECTION_CLOSED, "connection closed")
        assert isinstance(errors[0], WorkerLostError) and "worker2" in str(errors[0])
        assert isinstance(errors[0], ConnectionError)
        assert actors.rpc_sync("worker1", engine.add, args=(1, 2)) == 3



@pytest.mark.slow
def test_survivors_drop_the_contexts_of_a_creator_that_died():
    with rpc_world(3) as procs:
        actors.rpc_sync("worker1", workers.start_context_towards, args=("worker2",))
        assert actors.rpc_sync("worker2", workers.contexts_created_by, args=(1,)) == 1
        procs[0].kill()
        assert wait_until(
            lambda: actors.rpc_sync("worker2", workers.contexts_created_by, args=(1,)) == 0)


@pytest.mark.slow
def test_the_far_worker_of_a_chain_drops_the_context_once_the_middle_worker_died():
    def contexts_on_worker2() -> int:
        # asked from an empty context: the question must not take the context to
        # worker2, whose only part in it is the call from worker1
        return contextvars.Context().run(actors.rpc_sync, "worker2", workers.contexts_alive)

    with rpc_world(3) as procs:
        with dist_autograd.context() as context_id:
            a = engine.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
            b = actors.rpc_sync("worker1", workers.tanh_then_next, args=(a, "worker2"))
            assert contexts_on_worker2() == 1
            procs[0].kill()
            started = time.monotonic()
            with pytest.raises(WorkerLostError, match="worker1"):
                dist_autograd.backward(context_id, [b.sum()])
            within(started, limits.CONNECTION_CLOSED, "connection closed")
            # the release from here would go through worker1: worker2 drops the context
            # itself once every worker it exchanged messages with in it is lost
            assert wait_until(lambda: contexts_on_worker2() == 0,
                              timeout=limits.CONNECTION_CLOSED + 5)
            # and takes it again from a call made here later, whose gradient counts
            c = actors.rpc_sync("worker2", workers.square, args=(a,))
            dist_autograd.backward(context_id, [c.sum()], mode="smart")
            np.testing.assert_allclose(dist_autograd.get_gradients(context_id)[a], 2 * a.data)
        assert len(dist_autograd.container) == 0
        assert wait_until(lambda: contexts_on_worker2() == 0)


def _loss(params, x):
    w0, w1, w2 = params
    hidden = engine.tanh(engine.matmul(x, w0))
    return (engine.matmul(hidden, w1) * w2).sum()


@pytest.mark.parametrize("optimizer_class, kwargs", [
    (optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    (optim.Adam, {"lr": 0.05, "weight_decay": 0.01}),
    (optim.AdamW, {"lr": 0.05, "weight_decay": 0.1}),
])
@pytest.mark.slow
def test_distributed_optimizer_updates_equal_a_local_optimizers(optimizer_class, kwargs):
    import engine.dist_autograd  # noqa: F401

    shapes = [(4, 3), (3, 2), (2,)]
    x = engine.tensor(np.linspace(-1, 1, 8).reshape(2, 4))
    with rpc_world(3):
        rrefs = [actors.remote(f"worker{i}", workers.make_param, args=(i, shape))
                 for i, shape in enumerate(shapes)]
        dist_optimizer = DistributedOptimizer(optimizer_class, rrefs, **kwargs)
        for _ in range(3):
            with dist_autograd.context() as context_id:
                params = [rref.to_here() if not rref.is_owner() else rref.local_value()
                          for rref in rrefs]
                dist_autograd.backward(context_id, [_loss(params, x)])
                dist_optimizer.step(context_id)
        final = [rref.to_here() for rref in rrefs]
    local = [workers.make_param(i, shape) for i, shape in enumerate(shapes)]
    local_optimizer = optimizer_class(local, **kwargs)
    for _ in range(3):
        local_optimizer.zero_grad()
        _loss(local, x).backward()
        local_optimizer.step()
    for got, want in zip(final, local):
        np.testing.assert_allclose(got.data, want.data, rtol=1e-6, atol=1e-9)


def test_concurrent_distributed_optimizers_on_the_same_parameters_lose_no_update():
    import engine.dist_autograd  # noqa: F401

    with rpc_world(2):
        weight = actors.remote("worker1", workers.make_param, args=(7, (3,)))
        start = weight.to_here().data.copy()
        optimizers = [DistributedOptimizer(optim.SGD, [weight], lr=0.5) for _ in range(2)]
        errors = []

        def train(optimizer, scale):
            try:
                for _ in range(5):
                    with dist_autograd.context() as context_id:
                        loss = (weight.to_here() * scale).sum()
                        dist_autograd.backward(context_id, [loss])
                        optimizer.step(context_id)
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=train, args=(opt, s))
                   for opt, s in zip(optimizers, (1.0, 2.0))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        final = weight.to_here().data
    assert not errors
    np.testing.assert_allclose(final, start - 0.5 * 5 * (1.0 + 2.0))


def test_a_bad_optimizer_argument_raises_when_the_distributed_optimizer_is_made(world3):
    # torch waits for every owner's optimizer, so the error comes before any training
    weights = [actors.remote(f"worker{i}", workers.make_param, args=(i, (3,))) for i in (1, 2)]
    with pytest.raises(ValueError, match="non-negative"):
        DistributedOptimizer(optim.SGD, weights, lr=-1.0)
    with pytest.raises(TypeError, match="bogus"):
        DistributedOptimizer(optim.Adam, weights, lr=0.1, bogus=3)
