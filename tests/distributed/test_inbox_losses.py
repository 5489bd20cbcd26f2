"""The inbox's record of lost and departed ranks: whose word counts, and what overrules it."""
import pytest

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
