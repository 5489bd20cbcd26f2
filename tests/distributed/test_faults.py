"""A rank that dies, hangs or calls something else, and groups used when they cannot be."""
import numpy as np
import pytest

import actors.distributed as dist
from tests.distributed import scenarios
from tests.distributed.ranks import run_ranks, spawn_ranks

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]  # not in the quick set


def test_a_killed_rank_makes_every_survivor_raise_a_connection_error_naming_it_within_a_second():
    outcomes = spawn_ranks(3, scenarios.dies_or_loops, 2, "kill", timeout=60, wait_for=[0, 1])
    assert outcomes[2][0] == "missing"
    for status, (kind, message, seconds, is_connection_error) in outcomes[:2]:
        assert status == "ok"
        assert kind == "RankLostError" and is_connection_error
        assert "rank 2" in message
        assert seconds < 1.0


def test_a_hung_rank_is_named_within_five_seconds():
    outcomes = spawn_ranks(3, scenarios.dies_or_loops, 1, "stop", timeout=60, wait_for=[0, 2])
    for status, (kind, message, seconds, is_connection_error) in (outcomes[0], outcomes[2]):
        assert status == "ok"
        assert kind == "RankLostError" and is_connection_error
        assert "rank 1" in message
        assert seconds < 5.0


def test_a_mismatched_shape_raises_a_value_error_naming_both_sides():
    results = run_ranks(2, scenarios.mismatched_shape)
    for kind, message in results:
        assert kind == "CollectiveMismatchError"
        assert "all_reduce(SUM, <f4, (4,))" in message
        assert "all_reduce(SUM, <f4, (5,))" in message
        assert "rank 0" in message and "rank 1" in message


def test_a_different_collective_at_the_same_step_is_caught_where_data_arrives():
    kind, message = run_ranks(2, scenarios.mismatched_collective)[0]
    assert kind == "CollectiveMismatchError"
    assert "all_reduce" in message and "broadcast" in message and "rank 1" in message


def test_ranks_that_wait_for_the_part_of_a_rank_that_found_a_mismatch_are_told_at_once():
    """Rank 2 (broadcast) finds the mismatch and sends nothing the all_reduce needs: the
    others raise CollectiveMismatchError from its notice, not RankLostError at its exit."""
    results = run_ranks(3, scenarios.one_calls_broadcast)
    assert results[2][0] == "CollectiveMismatchError"
    for kind, message in results[:2]:
        assert kind == "CollectiveMismatchError", message
        assert "rank 2 called broadcast" in message and "all_reduce" in message
        assert message.endswith("(found by rank 2)")


def test_an_all_to_all_piece_of_another_shape_names_its_sender():
    for rank, message in enumerate(run_ranks(2, scenarios.all_to_all_of_other_shapes)):
        assert message == (f"all_to_all: rank 1 sent float32[3] for rank {rank}'s output "
                           f"of float32[2]")


def test_ranks_that_disagree_on_a_broadcasts_root_are_told_at_their_next_call():
    """A root receives nothing, so a broadcast whose every rank is its own root returns
    at once everywhere (torch's waits out its timeout); the next call raises, naming the
    roots, instead of going on with arrays that were never broadcast."""
    for bcast, after in run_ranks(3, scenarios.roots_disagree):
        assert bcast == ("no error", "")
        kind, message = after
        assert kind == "CollectiveMismatchError", message
        assert message.count("called broadcast(") == 2 and "at step 0" in message


def test_monitored_barrier_names_the_rank_that_did_not_arrive_and_nobody_passes():
    results = run_ranks(3, scenarios.monitored, 2)
    assert results[0] == ("raised", "monitored_barrier: rank 2 did not arrive within 1s")
    assert results[1][0] == "raised" and "rank 2" in results[1][1]


def test_collectives_without_a_group_raise_a_clear_error():
    assert not dist.is_initialized()
    with pytest.raises(dist.DistError, match="init_process_group"):
        dist.all_reduce(np.zeros(3))
    with pytest.raises(dist.DistError, match="not initialized"):
        dist.destroy_process_group()


def test_wrong_arguments_are_refused_before_anything_is_sent(tmp_path):
    dist.init_process_group(init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        with pytest.raises(TypeError, match="numpy array or a tensor"):
            dist.all_reduce([1, 2, 3])
        with pytest.raises(ValueError, match="C-contiguous"):
            dist.all_reduce(np.zeros((4, 4))[:, 1])
        with pytest.raises(TypeError, match="AVG needs a floating dtype"):
            dist.all_reduce(np.zeros(3, np.int32), op=dist.ReduceOp.AVG)
        with pytest.raises(TypeError, match="MAX cannot order complex numbers"):
            dist.all_reduce(np.ones(2, np.complex64), op=dist.ReduceOp.MAX)
        frozen = np.ones(3)
        frozen.flags.writeable = False
        with pytest.raises(ValueError, match="all_reduce: tensor is read-only"):
            dist.all_reduce(frozen)
        with pytest.raises(ValueError, match="all_gather: tensor_list is read-only"):
            dist.all_gather([frozen], np.ones(3))
        dist.broadcast(frozen, src=0)  # the root's array is only read
        with pytest.raises(ValueError, match="src=3 is not a rank"):
            dist.broadcast(np.zeros(3), src=3)
        with pytest.raises(dist.DistError, match="already initialized"):
            dist.init_process_group(init_method=f"file://{tmp_path}/other", rank=0,
                                    world_size=1)
        array = np.arange(3.0)
        dist.all_reduce(array)  # a group of one: the array is its own sum
        np.testing.assert_array_equal(array, np.arange(3.0))
    finally:
        dist.destroy_process_group()
    with pytest.raises(dist.DistError, match="init_process_group"):
        dist.barrier()


def test_a_failing_async_call_reports_through_its_work_and_a_destroyed_group_refuses_calls():
    results = run_ranks(2, scenarios.async_failure_and_destroyed_subgroup)
    for waited, completed, kind, refused, array in results:
        assert waited == "CollectiveMismatchError" and completed and kind == waited
        assert refused == "the process group was destroyed"
        np.testing.assert_array_equal(array, [2.0, 2.0])
