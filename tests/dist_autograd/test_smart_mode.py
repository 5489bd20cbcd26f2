"""SMART mode against local autograd on the same graph, and FAST mode refusing graphs it
cannot run instead of returning partial gradients."""
import time

import numpy as np
import pytest

import actors
import engine
from actors.runtime import Kind
from engine import dist_autograd, optim
from engine.dist_autograd import DistBackwardError, UnknownContextError
from engine.optim import DistributedOptimizer
from tests.dist_autograd import workers
from tests.dist_autograd.workers import call

pytestmark = pytest.mark.timeout(60)


def scalars(*values):
    return [engine.tensor(np.array(v, dtype=np.float64), requires_grad=True) for v in values]


def local_grads(build, values, passes=1):
    """The local engine's leaf gradients for `build(remote=False, *leaves)`'s roots."""
    leaves = scalars(*values)
    roots = build(False, *leaves)
    for index, root in enumerate(roots[:passes]):
        root.backward(retain_graph=index + 1 < passes)
    return [leaf.grad for leaf in leaves]


def dist_grads(build, values, mode, passes=1):
    """The same graph over RPC, in one context: one pass per root, in order."""
    with dist_autograd.context() as context_id:
        leaves = scalars(*values)
        roots = build(True, *leaves)
        for index, root in enumerate(roots[:passes]):
            dist_autograd.backward(context_id, [root], retain_graph=index + 1 < passes,
                                   mode=mode)
        grads = dist_autograd.get_gradients(context_id)
    return [grads.get(leaf) for leaf in leaves]


def assert_same_grads(got, want):
    assert [g is None for g in got] == [w is None for w in want]
    for g, w in zip(got, want):
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-12)


def fast_error(build, values, passes=1) -> DistBackwardError:
    """FAST mode's error on `build`'s graph, checked to come within a second."""
    started = time.monotonic()
    with pytest.raises(DistBackwardError, match="mode='smart'") as info:
        dist_grads(build, values, "fast", passes)
    assert time.monotonic() - started < 1.0
    return info.value


def issue_example(remote, a, b, c):
    """d = a + b and e = b * c on worker1; roots d, then e."""
    d = call(remote, "worker1", engine.add, a, b)
    e = call(remote, "worker1", engine.mul, b, c)
    return [d.sum(), e.sum()]


@pytest.mark.slow
def test_an_unused_rpc_output_leaves_smart_right_and_fast_raising(world3):
    """∂(a + b)/∂(a, b, c) at (2, 3, 4) = (1, 1, absent); e = b * c is not used."""
    got = dist_grads(issue_example, (2.0, 3.0, 4.0), "smart")
    assert_same_grads(got, local_grads(issue_example, (2.0, 3.0, 4.0)))
    assert_same_grads(got, [1.0, 1.0, None])
    error = fast_error(issue_example, (2.0, 3.0, 4.0))
    assert "worker0: message" in str(error) and "worker1: message" in str(error)


def test_two_passes_in_one_context_accumulate_like_local_autograd(world3):
    """∂(a + b) then ∂(b·c) at (2, 3, 4), retained: (1, 1 + c, b) = (1, 5, 3)."""
    got = dist_grads(issue_example, (2.0, 3.0, 4.0), "smart", passes=2)
    assert_same_grads(got, local_grads(issue_example, (2.0, 3.0, 4.0), passes=2))
    assert_same_grads(got, [1.0, 5.0, 3.0])
    fast_error(issue_example, (2.0, 3.0, 4.0), passes=2)


def hidden_path(remote, x):
    """z = 2x on worker1, which squares z on worker2 and throws it away; root z."""
    return [call(remote, "worker1", workers.double_with_square_aside, x, "worker2", remote)]


def test_a_hidden_path_through_a_third_worker_is_not_waited_for(world3):
    """∂(2x)/∂x at x = 3 is 2; worker2's send is dead and worker2 gets no message."""
    with dist_autograd.context() as context_id:
        (x,) = scalars(3.0)
        (z,) = hidden_path(True, x)
        dist_autograd.backward(context_id, [z], mode="smart")
        got = dist_autograd.get_gradients(context_id)[x]
        assert actors.rpc_sync("worker1", workers.passes_seen, args=(context_id,)) == 1
        assert actors.rpc_sync("worker2", workers.passes_seen, args=(context_id,)) == 0
    assert_same_grads([got], local_grads(hidden_path, (3.0,)))
    assert_same_grads([got], [2.0])
    assert "worker1: message" in str(fast_error(hidden_path, (3.0,)))


def callback(remote, x):
    """worker1: y = 3x, y² back on worker0 (y + x there too, unused); root y² + y."""
    return [call(remote, "worker1", workers.triple_and_call_back, x, "worker0", remote)]


def test_a_call_back_to_the_initiator_is_a_cycle_of_workers_not_of_the_graph(world3):
    """∂(9x² + 3x)/∂x at x = 2 is 18·2 + 3 = 39."""
    got = dist_grads(callback, (2.0,), "smart")
    assert_same_grads(got, local_grads(callback, (2.0,)))
    assert_same_grads(got, [39.0])
    fast_error(callback, (2.0,))


def every_path(remote, a, b):
    """rpc_async, remote + to_here and rpc_sync, each also making an output the root
    does not use: root 2a + a·b + (a + b)."""
    if remote:
        doubled = actors.rpc_async("worker1", engine.mul, args=(a, 2.0)).wait(10)
        actors.rpc_async("worker2", engine.mul, args=(b, b)).wait(10)
        product = actors.remote("worker2", engine.mul, args=(a, b)).to_here()
        actors.remote("worker1", engine.sub, args=(a, b)).to_here()
    else:
        doubled, product = a * 2.0, a * b
    total = call(remote, "worker1", engine.add, a, b)
    return [(doubled + product + total).sum()]


@pytest.mark.parametrize("mode", ["smart", "fast"])
def test_rpc_async_and_remote_with_to_here_record_for_smart_mode(world3, mode):
    """∂(2a + ab + a + b)/∂(a, b) at (2, 3) = (2 + b + 1, a + 1) = (6, 3)."""
    if mode == "fast":
        fast_error(every_path, (2.0, 3.0))
        return
    got = dist_grads(every_path, (2.0, 3.0), mode)
    assert_same_grads(got, local_grads(every_path, (2.0, 3.0)))
    assert_same_grads(got, [6.0, 3.0])


def test_rref_proxies_and_rref_backward_run_smart_mode(world3):
    """loss = Σ(x·w) on worker1 via a proxy (x + w unused); ∂/∂x = w = 5, ∂/∂w = x = 2."""
    scaler = actors.remote("worker1", workers.Scaler, args=(5.0,))
    for through_rref_backward in (False, True):
        with dist_autograd.context() as context_id:
            (x,) = scalars([2.0])
            scaled, _ = scaler.rpc_sync().scale_and_shift(x)
            if through_rref_backward:
                loss = actors.remote("worker2", engine.sum, args=(scaled,))
                loss.backward(context_id, mode="smart")
            else:
                dist_autograd.backward(context_id, [scaled.sum()], mode="smart")
            got_x = dist_autograd.get_gradients(context_id)[x]
            got_w = actors.rpc_sync("worker1", workers.scaler_weight_grad,
                                    args=(scaler, context_id))
        np.testing.assert_allclose(got_x, [5.0])
        np.testing.assert_allclose(got_w, [2.0])


def test_distributed_optimizer_steps_on_smart_gradients(world3):
    """loss = Σ(p1·p2), with p1 also sent to worker2 and the answer thrown away;
    SGD(lr=0.1): p1 -= 0.1·p2, p2 -= 0.1·p1."""
    rrefs = [actors.remote(f"worker{i}", workers.make_param, args=(i, (3,))) for i in (1, 2)]
    start = [rref.to_here().data.copy() for rref in rrefs]
    optimizer = DistributedOptimizer(optim.SGD, rrefs, lr=0.1)
    with dist_autograd.context() as context_id:
        p1, p2 = (rref.to_here() for rref in rrefs)
        actors.rpc_sync("worker2", workers.square, args=(p1,))
        dist_autograd.backward(context_id, [(p1 * p2).sum()], mode="smart")
        optimizer.step(context_id)
    np.testing.assert_allclose(rrefs[0].to_here().data, start[0] - 0.1 * start[1])
    np.testing.assert_allclose(rrefs[1].to_here().data, start[1] - 0.1 * start[0])


def test_an_unknown_mode_is_a_value_error(world3):
    with dist_autograd.context() as context_id:
        with pytest.raises(ValueError, match="mode"):
            dist_autograd.backward(context_id, scalars(1.0), mode="clever")


def test_a_step_naming_an_unknown_send_or_context_is_an_error_to_its_sender(world3):
    unknown_send = (1 << 48) | 999_999
    with dist_autograd.context() as context_id:
        actors.rpc_sync("worker1", engine.add, args=tuple(scalars(1.0, 2.0)))
        with pytest.raises(DistBackwardError, match="no send function for message"):
            actors.call_service("worker1", Kind.AUTOGRAD_BACKWARD_STEP,
                                (context_id, 1, False, [], (unknown_send,)))
    with pytest.raises(UnknownContextError, match="0x1234"):
        actors.call_service("worker1", Kind.AUTOGRAD_BACKWARD_STEP,
                            (0x1234, 1, False, [], None))
    assert actors.rpc_sync("worker1", engine.add, args=(1, 2)) == 3
