"""DistributedDataParallel against single-process training on the whole batch."""
import numpy as np
import pytest

from tests.distributed import scenarios
from tests.distributed.ranks import run_ranks

pytestmark = pytest.mark.timeout(180)

STEPS, PER_RANK = 6, 8


def single_process(world):
    """The same model (rank 0's initial weights) trained on each step's whole batch."""
    from engine import Tensor
    from engine.nn import functional as F
    from engine.optim import SGD

    model = scenarios.ddp_model(seed=100)
    optimizer = SGD(model.parameters(), lr=0.1)
    for inputs, targets in scenarios.ddp_batches(STEPS, PER_RANK * world):
        optimizer.zero_grad()
        F.mse_loss(model(Tensor(inputs)), Tensor(targets)).backward()
        optimizer.step()
    return [p.data for p in model.parameters()]


@pytest.mark.parametrize("world,bucket_cap_mb,accumulate", [
    (2, 25, False),  # one bucket
    (3, 0.0005, False),  # a bucket per parameter or two: several all-reduces overlap backward
    (2, 0.0005, True),  # half of every step's gradient accumulated under no_sync()
])
@pytest.mark.slow
def test_ddp_trains_like_one_process_on_the_whole_batch_and_ranks_stay_identical(
        world, bucket_cap_mb, accumulate):
    results = run_ranks(world, scenarios.ddp_train, STEPS, PER_RANK, bucket_cap_mb, accumulate,
                        timeout=150)
    for params in results[1:]:
        for mine, first in zip(params, results[0]):
            assert mine.tobytes() == first.tobytes()
    expected = single_process(world)
    for got, want in zip(results[0], expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    initial = [p.data for p in scenarios.ddp_model(seed=100).parameters()]
    assert any(not np.allclose(a, b) for a, b in zip(results[0], initial))  # it trained
