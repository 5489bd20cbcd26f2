"""The inbox's record of lost and departed ranks: whose word counts, and what overrules it."""
import pickle

import pytest

from actors.distributed.errors import RankLostError
from actors.distributed.inbox import Inbox

pytestmark = pytest.mark.timeout(10)


def test_a_loss_on_another_ranks_word_is_overruled_by_the_ranks_own_leave_notice():
    inbox = Inbox()
    inbox.lose(1, "its connection dropped (seen by rank 2)", reported=True)
    assert inbox.lost() == {1: "its connection dropped (seen by rank 2)"}
    inbox.leave(1)
    assert inbox.lost() == {} and inbox.has_left(1)


def test_a_loss_seen_here_stands_whoever_reported_it_first():
    inbox = Inbox()
    inbox.lose(1, "its connection dropped (seen by rank 2)", reported=True)
    inbox.lose(1, "its connection dropped")
    inbox.leave(1)
    assert inbox.lost() == {1: "its connection dropped (seen by rank 2)"}


def test_a_rank_that_left_is_never_lost_afterwards():
    inbox = Inbox()
    inbox.leave(1)
    inbox.lose(1, "its connection dropped")
    inbox.lose(1, "its connection dropped (seen by rank 2)", reported=True)
    assert inbox.lost() == {}


def test_a_wait_for_a_rank_that_left_names_and_carries_the_error_that_stopped_it():
    inbox = Inbox()
    inbox.leave(5, "CollectiveMismatchError: rank 5 called barrier() but rank 4 called "
                   "all_reduce()")
    with pytest.raises(RankLostError) as raised:
        inbox.take(("g", 0, 5), 5, range(9), None, lambda: "barrier() (step 0)")
    assert str(raised.value) == (
        "rank 5 lost: left the group before barrier() (step 0) was served, stopped by "
        "CollectiveMismatchError: rank 5 called barrier() but rank 4 called all_reduce()")
    # Passed on by a rank that leaves after it, and across processes.
    assert pickle.loads(pickle.dumps(raised.value)).cause == raised.value.cause == (
        "CollectiveMismatchError: rank 5 called barrier() but rank 4 called all_reduce()")


def test_a_wait_for_a_rank_that_left_in_order_names_no_error():
    inbox = Inbox()
    inbox.leave(5)
    with pytest.raises(RankLostError, match=r"^rank 5 lost: left the group before x was "
                                            r"served$") as raised:
        inbox.take(("g", 0, 5), 5, range(9), None, lambda: "x")
    assert raised.value.cause is None
