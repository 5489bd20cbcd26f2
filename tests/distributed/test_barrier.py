"""Barriers of groups past the all-to-all size: dissemination rounds, with real ranks."""
import math

import pytest

from actors.distributed import algorithms
from tests.distributed import scenarios
from tests.distributed.ranks import run_ranks, spawn_ranks
from tests.preloaded import ctx

pytestmark = pytest.mark.timeout(120)

# Past the all-to-all size, and not a power of two: the last round wraps around.
WORLD = algorithms.ALL_TO_ALL_BARRIER_MAX + 1


@pytest.mark.parametrize("size", range(1, 70))
def test_after_the_dissemination_rounds_every_rank_has_heard_of_every_other(size):
    rounds = [algorithms.dissemination_rounds(rank, size) for rank in range(size)]
    assert all(len(r) == math.ceil(math.log2(size)) for r in rounds)
    heard = [{rank} for rank in range(size)]
    for index in range(len(rounds[0])):
        for rank in range(size):
            told, heard_from = rounds[rank][index]
            assert rounds[heard_from][index][0] == rank  # the sender tells this very rank
        heard = [heard[rank] | heard[rounds[rank][index][1]] for rank in range(size)]
    assert heard == [set(range(size))] * size
    for rank in range(size):  # one message per sender a barrier: taken in order
        senders = [frm for _, frm in rounds[rank]]
        assert len(set(senders)) == len(senders) and rank not in senders


@pytest.mark.slow
def test_no_rank_leaves_a_large_barrier_before_the_last_rank_enters(tmp_path):
    lates = [WORLD - 1, 0, WORLD // 2]
    results = run_ranks(WORLD, scenarios.late_to_the_barrier, str(tmp_path), lates,
                        context=ctx)
    assert results == [[]] * WORLD


@pytest.mark.slow
@pytest.mark.parametrize("barriers_before", [0, 2])
def test_a_rank_killed_before_a_large_barrier_fails_every_survivor_naming_it_alone(
        barriers_before):
    victim = 3
    survivors = [rank for rank in range(WORLD) if rank != victim]
    outcomes = spawn_ranks(WORLD, scenarios.killed_before_a_barrier, victim, barriers_before,
                           timeout=60, wait_for=survivors, context=ctx)
    assert outcomes[victim][0] == "missing"
    for rank in survivors:
        # "ok" with the barrier's error, or "error" from init_process_group, for a rank
        # still forming the group when the victim died.
        status, (kind, message, *_) = outcomes[rank]
        assert status in ("ok", "error") and kind == "RankLostError", outcomes[rank]
        # A survivor that left first tells the others why: none names it instead.
        assert message.startswith(f"rank {victim} lost"), outcomes[rank]
    if barriers_before:
        assert all(outcomes[rank][0] == "ok" for rank in survivors)


@pytest.mark.slow
def test_a_rank_calling_another_collective_fails_a_large_barrier_on_every_rank():
    odd = 4
    outcomes = run_ranks(WORLD, scenarios.barrier_but_one_all_reduces, odd, context=ctx)
    assert "passed" not in [kind for kind, _ in outcomes]
    # The ranks that hear from it directly name both calls; the others, that those left.
    told = {to for to, _ in algorithms.dissemination_rounds(odd, WORLD)}
    for rank in sorted(told | {odd}):
        kind, message = outcomes[rank]
        assert kind == "CollectiveMismatchError", outcomes[rank]
        assert "barrier" in message and "all_reduce" in message
    assert {kind for kind, _ in outcomes} <= {"CollectiveMismatchError", "RankLostError"}
    for kind, message in outcomes:  # a rank that left names the mismatch that made it leave
        if kind == "RankLostError":
            assert "stopped by CollectiveMismatchError" in message, message
            assert "all_reduce" in message, message
