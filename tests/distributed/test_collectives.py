"""Every collective on real processes, checked against numpy computed here."""
import numpy as np
import pytest

from tests.distributed import scenarios
from tests.distributed.ranks import run_ranks

pytestmark = pytest.mark.timeout(180)

D = scenarios.data


def reduce_all(op, arrays):
    arrays = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    if op == "SUM":
        return sum(arrays[1:], arrays[0].copy())
    if op == "AVG":
        return sum(arrays[1:], arrays[0].copy()) / len(arrays)
    if op == "PRODUCT":
        return np.prod(np.stack(arrays), axis=0)
    return (np.max if op == "MAX" else np.min)(np.stack(arrays), axis=0)


@pytest.mark.parametrize("world, shared_memory", [
    (2, "1"), pytest.param(3, "1", marks=pytest.mark.slow),
    pytest.param(4, "1", marks=pytest.mark.slow), (2, "0"),
    pytest.param(4, "0", marks=pytest.mark.slow)])
@pytest.mark.slow
def test_every_collective_matches_numpy_and_every_rank_ends_bit_identical(
        world, shared_memory, monkeypatch):
    """With shared memory between the ranks of one host, and without, as across hosts
    (ring all_reduce, chain broadcast)."""
    monkeypatch.setenv("ACTORGRAD_SHARED_MEMORY", shared_memory)
    results = run_ranks(world, scenarios.every_collective, timeout=150)
    ranks = range(world)
    for shape in scenarios.SIZES:
        for op in ("SUM", "MAX", "AVG"):
            name = f"all_reduce/{op}/{shape}"
            expected = reduce_all(op, [D(r, shape) for r in ranks])
            np.testing.assert_allclose(results[0][name], expected, rtol=1e-5, atol=1e-4)
            assert results[0][name].dtype == np.float32
            for other in results[1:]:
                assert other[name].tobytes() == results[0][name].tobytes(), name
    for dtype in ("int32", "float64"):
        for op in ("SUM", "PRODUCT", "MIN"):
            name = f"all_reduce/{op}/{dtype}"
            expected = reduce_all(op, [D(r, (1001,), dtype, seed=1) for r in ranks])
            for result in results:
                np.testing.assert_allclose(result[name], expected, rtol=1e-12)
                assert result[name].dtype == np.dtype(dtype)
    for result in results:
        np.testing.assert_array_equal(result["broadcast"], D(world - 1, (2, 3)))
        assert result["broadcast_large"].tobytes() == \
            D(1, (3 * 1024 * 1024 + 5,), "float64").tobytes()
        np.testing.assert_array_equal(result["all_gather"], np.stack([D(r, (4,)) for r in ranks]))
        np.testing.assert_array_equal(result["all_gather_large"],
                                      np.stack([D(r, (300_001,)) for r in ranks]))
        np.testing.assert_array_equal(
            result["all_gather_into_tensor"],
            np.concatenate([D(r, (2, 3), "float64").reshape(-1) for r in ranks]))
        assert result["all_gather_object"] == [{"rank": r, "name": f"r{r}"} for r in ranks]
        assert result["broadcast_object_list"] == ["from 0", 0]
        assert result["async_done"] == [True, True, True]
        np.testing.assert_array_equal(
            result["async"], np.stack([np.full(3, sum(r + i for r in ranks), np.float32)
                                       for i in range(3)]))
        np.testing.assert_array_equal(
            result["all_to_all"], np.array([[r, result["rank"]] for r in ranks]))
    np.testing.assert_allclose(results[1]["reduce"], reduce_all("SUM", [D(r, (9,)) for r in ranks]),
                               rtol=1e-5)
    np.testing.assert_array_equal(results[0]["gather"], np.stack([D(r, (3,)) for r in ranks]))
    assert all(result["gather"] is None for result in results[1:])
    for rank, result in enumerate(results):
        assert (result["rank"], result["size"]) == (rank, world)
        np.testing.assert_array_equal(result["scatter"], D(rank, (5,), seed=2))
        np.testing.assert_allclose(
            result["reduce_scatter"], reduce_all("SUM", [D(s * world + rank, (3,)) for s in ranks]),
            rtol=1e-5)
        np.testing.assert_array_equal(
            result["reduce_scatter_tensor"],
            np.max(np.stack([D(s, (world * 2,), seed=3) for s in ranks]), axis=0)
            [rank * 2:rank * 2 + 2])


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_tagged_sends_stay_apart_and_recv_from_anyone_returns_the_sender(world):
    results = run_ranks(world, scenarios.point_to_point)
    for rank, (by_tag, _) in enumerate(results):
        left = (rank - 1) % world
        assert by_tag[7][0] == left and by_tag[7][1].tolist() == [left] * 4
        assert by_tag[8][0] == left and by_tag[8][1].tolist() == [left + 100] * 4
    assert results[0][1] == [(r, r) for r in range(1, world)]


@pytest.mark.slow
def test_a_subgroup_reduces_among_its_members_and_refuses_the_others():
    results = run_ranks(4, scenarios.subgroup)
    assert [r[0] for r in results] == [0, -1, 1, -1]
    assert [r[3] for r in results] == [2, -1, 2, -1]  # torch's get_world_size for non-members
    for rank in (0, 2):
        np.testing.assert_array_equal(results[rank][1], np.full(3, 4.0))
    for rank in (1, 3):
        assert f"rank {rank} is not a member" in results[rank][2]


def test_get_global_rank_refuses_a_group_rank_outside_the_group_as_torch():
    """A negative group rank counted from the end (-1 gave the last member's rank)."""
    results = run_ranks(3, scenarios.global_ranks_of_a_subgroup)
    for found in results:
        assert found[:2] == [0, 2]
        for outside, message in zip((-1, 2, True), found[2:]):
            assert message == (f"group rank {outside!r} is not part of the group "
                               "(ranks [0, 2], group ranks 0-1)")


def test_an_engine_tensor_is_reduced_in_its_data():
    results = run_ranks(2, scenarios.tensors)
    for data in results:
        np.testing.assert_array_equal(data, np.full(3, 1.5, np.float32))


def test_the_one_array_forms_take_0d_pieces():
    results = run_ranks(2, scenarios.scalars_into_tensors)
    for rank, (losses, mine) in enumerate(results):
        np.testing.assert_array_equal(losses, [0.5, 1.5])
        assert mine.shape == () and mine == rank * (1 + 2)


def test_a_work_holds_the_outputs_as_torch_and_waits_for_a_timedelta():
    """torch's completion callbacks read ``fut.value()[0]``; its Work.wait takes a timedelta."""
    results = run_ranks(2, scenarios.work_outputs)
    for rank, (averaged, waited, same, gathered, barrier) in enumerate(results):
        np.testing.assert_array_equal(averaged, np.full(3, 1.5, np.float32))
        assert waited is True and same == [True, True]
        assert gathered == (2 if rank == 0 else 0)
        assert barrier == []


@pytest.mark.slow
def test_a_group_started_as_the_launcher_starts_workers_lives_beside_an_rpc_world():
    results = run_ranks(2, scenarios.beside_rpc, init="env")
    assert [called for called, _ in results] == [0, 10]
    for _, array in results:
        np.testing.assert_array_equal(array, [1.0, 1.0])


def test_a_rank_that_reached_the_previous_groups_store_forms_the_next_group_on_the_new_one():
    for array in run_ranks(2, scenarios.formed_again_while_the_master_lingers, init="env"):
        np.testing.assert_array_equal(array, [2.0, 2.0])


@pytest.mark.slow
def test_groups_form_again_and_again_on_a_store_the_ranks_pass_in(tmp_path):
    results = run_ranks(2, scenarios.explicit_store, str(tmp_path / "store"))
    for array in results:
        np.testing.assert_array_equal(array, [3.0, 3.0])
