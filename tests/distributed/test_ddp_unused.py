"""DDP with parameters that forward leaves unused: an error on every rank by default,
torch's averages with ``find_unused_parameters=True``; never silent divergence."""
import numpy as np
import pytest

from tests.distributed import ddp_scenarios as sc
from tests.distributed.ranks import run_ranks

# Two spawned ranks start and train three tiny steps in about 2 s; the margin covers a
# loaded machine.
pytestmark = pytest.mark.timeout(60)
RANKS_FINISH = 40


def _identical_across_ranks(results):
    for _, params in results[1:]:
        for name, value in params.items():
            assert value.tobytes() == results[0][1][name].tobytes(), name


def _first_step_grads(rank, world, extra_on):
    """Rank `rank`'s own gradients of the first step, in one process (the oracle)."""
    from engine import Tensor
    from engine.nn import functional as F

    model = sc.branchy(seed=5)  # rank 0's initial weights, which DDP broadcasts
    inputs, targets = sc.batches(world)[0]
    mine = slice(rank * sc.PER_RANK, (rank + 1) * sc.PER_RANK)
    F.mse_loss(model(Tensor(inputs[mine]), sc.uses_extra(rank, extra_on)),
               Tensor(targets[mine])).backward()
    return {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.slow
@pytest.mark.parametrize("extra_on", ["nowhere", "rank0"])
def test_an_unused_parameter_is_an_error_on_every_rank_at_backward_naming_it(extra_on):
    results = run_ranks(2, sc.train_branchy, False, extra_on, timeout=RANKS_FINISH)
    for rank, (steps, _) in enumerate(results):
        for error, _ in steps:
            assert error is not None, f"rank {rank} trained on without an error"
            where, message = error
            assert where == "backward"
            assert "Expected to have finished reduction in the prior iteration" in message
            assert "extra.weight" in message and "extra.bias" in message
            assert "used.weight" not in message
            assert "find_unused_parameters=True" in message
            if extra_on == "rank0":
                assert "got one on 1 of 2 ranks" in message
    _identical_across_ranks(results)  # a rank that goes on does not diverge


@pytest.mark.slow
def test_find_unused_parameters_keeps_a_grad_unused_everywhere_none_and_trains_the_rest():
    from engine import Tensor
    from engine.nn import functional as F
    from engine.optim import SGD

    results = run_ranks(2, sc.train_branchy, True, "nowhere", timeout=RANKS_FINISH)
    for steps, _ in results:
        for error, grads in steps:
            assert error is None
            assert grads["extra.weight"] is None and grads["extra.bias"] is None
    _identical_across_ranks(results)
    model = sc.branchy(seed=5)  # one process on the whole batch
    optimizer = SGD(model.parameters(), lr=0.1)
    for inputs, targets in sc.batches(2):
        optimizer.zero_grad()
        F.mse_loss(model(Tensor(inputs), False), Tensor(targets)).backward()
        optimizer.step()
    for name, param in model.named_parameters():
        np.testing.assert_allclose(results[0][1][name], param.data, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_find_unused_parameters_averages_a_parameter_used_on_one_rank_with_zeros():
    results = run_ranks(2, sc.train_branchy, True, "rank0", timeout=RANKS_FINISH)
    own = [_first_step_grads(rank, 2, "rank0") for rank in range(2)]
    for steps, _ in results:
        assert all(error is None for error, _ in steps)
        grads = steps[0][1]
        for name in ("extra.weight", "extra.bias"):  # (g0 + 0) / 2
            np.testing.assert_allclose(grads[name], own[0][name] / 2, rtol=1e-5, atol=1e-7)
        for name in ("used.weight", "used.bias"):
            np.testing.assert_allclose(grads[name], (own[0][name] + own[1][name]) / 2,
                                       rtol=1e-5, atol=1e-7)
    for name in results[0][0][0][1]:
        assert results[0][0][0][1][name].tobytes() == results[1][0][0][1][name].tobytes()
    _identical_across_ranks(results)


def test_the_forward_decides_whether_a_backward_synchronises_as_in_torch():
    """torch: the forward must run inside `no_sync()` for its backward to stay local."""
    results = run_ranks(2, sc.no_sync_decided_by_the_forward, timeout=RANKS_FINISH)
    own = [result[2] for result in results]
    assert not np.allclose(own[0], own[1])
    for rank, (local, synced, _) in enumerate(results):
        np.testing.assert_array_equal(local, own[rank])  # forward inside: stays local
        np.testing.assert_allclose(synced, (own[0] + own[1]) / 2, rtol=1e-6)  # outside


@pytest.mark.parametrize("differ, says", [
    ("shape", "parameter 0.weight is float32[3, 4] on rank 0 but float32[4, 4] on rank 1"),
    ("count", "rank 0 has 4 parameters and rank 1 has 6"),
])
def test_models_that_differ_across_ranks_are_an_error_on_every_rank_at_construction(
        differ, says):
    """As torch's: named at once on every rank, not as a broadcast that fails on the
    ranks that receive it, or as a gradient all-reduce that meets a broadcast."""
    for kind, message in run_ranks(2, sc.wraps_other_models, differ, timeout=RANKS_FINISH):
        assert kind == "RuntimeError", message
        assert "expects the same model on every rank" in message and says in message
