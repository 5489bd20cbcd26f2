"""The pure decisions of a fault-tolerant step: ranks, healing, expectations, commits."""
import pytest

from engine.ft.quorum import (VOTE_FAILED, VOTE_OK, Arrival, MembershipChange,
                              StaleQuorumError, arrived, commits, expected, membership_change,
                              plan)

pytestmark = pytest.mark.timeout(10)


def arrivals(**steps):
    return {m: Arrival(s, f"inc-{m}") for m, s in steps.items()}


def test_ranks_follow_numeric_replica_ids_on_every_member():
    got = {me: plan(7, arrivals(**{"10": 3, "2": 3, "1": 3}), me) for me in ("1", "2", "10")}
    assert all(p.members == ("1", "2", "10") for p in got.values())
    assert [got[m].rank for m in ("1", "2", "10")] == [0, 1, 2]


def test_members_behind_heal_from_up_to_date_members_in_turn():
    members = arrivals(**{"0": 5, "1": 5, "2": 0, "3": 2, "4": 0})
    p = {me: plan(1, members, me) for me in members}
    assert p["2"].heal_from == 0 and p["3"].heal_from == 1 and p["4"].heal_from == 0
    assert p["0"].send_to == (2, 4) and p["1"].send_to == (3,)
    assert all(q.max_step == 5 and q.participants == 2 for q in p.values())
    assert not p["0"].healing and p["3"].healing


def test_the_group_is_formed_anew_when_membership_or_an_incarnation_changed_or_it_broke():
    members = arrivals(**{"0": 1, "1": 1})
    first = plan(1, members, "0")
    assert first.reconfigure  # no group yet
    assert not plan(2, members, "0", first.incarnations).reconfigure
    assert plan(2, members, "0", first.incarnations, broken=True).reconfigure
    restarted = dict(members, **{"1": Arrival(0, "another process")})
    assert plan(2, restarted, "0", first.incarnations).reconfigure


def test_a_member_not_in_the_round_is_refused():
    with pytest.raises(ValueError, match="not in quorum round 3"):
        plan(3, arrivals(**{"0": 1}), "1")


def test_a_round_holds_this_process_only_with_its_own_incarnation():
    result = {m: a.encode() for m, a in arrivals(**{"0": 3, "2": 3}).items()}
    assert arrived(result, "2", "inc-2")
    assert not arrived(result, "2", "a restarted process")
    assert not arrived(result, "1", "inc-1")


def test_a_member_expects_the_last_members_but_those_it_knows_are_lost():
    last = plan(1, arrivals(**{"0": 1, "1": 1, "2": 1}), "1")
    assert expected(last, {2}, "1") == ("0", "1")
    assert expected(last, {1}, "1") == ("0", "1", "2")  # never itself out
    assert expected(None, (), "1") == ("1",)


def test_a_step_commits_only_if_every_member_voted_ok_and_enough_contributed():
    p = plan(1, arrivals(**{"0": 4, "1": 4, "2": 0}), "0")
    ok = {"0": VOTE_OK, "1": VOTE_OK, "2": VOTE_OK}
    assert commits(p, ok, 2)
    assert not commits(p, ok, 3)  # the healing member does not count
    assert not commits(p, dict(ok, **{"2": VOTE_FAILED}), 1)
    assert not commits(p, {"0": VOTE_OK, "1": VOTE_OK}, 1)  # a vote missing


def test_a_member_behind_never_goes_on_without_a_member_at_the_step_it_saw():
    with pytest.raises(StaleQuorumError, match="no member at step 5"):
        plan(4, arrivals(**{"2": 0}), "2", seen_step=5)  # the up-to-date ones are slow
    assert plan(4, arrivals(**{"1": 5, "2": 0}), "2", seen_step=5).heal_from == 0


def test_a_membership_change_names_who_joined_was_lost_or_came_back_as_a_new_process():
    first = plan(0, arrivals(**{"0": 0, "1": 0, "2": 0}), "0", None, False)
    same = plan(1, arrivals(**{"0": 1, "1": 1, "2": 1}), "0", first.incarnations, False)
    assert membership_change(same, first) is None
    assert membership_change(first, None) == MembershipChange(("0", "1", "2"), (), ())
    later = {"0": Arrival(2, "inc-0"), "2": Arrival(0, "inc-2-again"),
             "10": Arrival(0, "inc-10")}
    changed = plan(2, later, "0", same.incarnations, False)
    assert membership_change(changed, same) == MembershipChange(("10",), ("1",), ("2",))


def test_before_the_first_commit_members_whose_state_differs_from_rank_0s_receive_it():
    members = {"0": Arrival(0, "inc-0", "a"), "1": Arrival(0, "inc-1", "b"),
               "2": Arrival(0, "inc-2", "a")}
    p = {me: plan(0, members, me) for me in members}
    assert p["1"].heal_from == 0 and p["0"].send_to == (1,) and not p["2"].healing
    assert all(q.participants == 2 for q in p.values())
    later = {"0": Arrival(3, "inc-0"), "1": Arrival(3, "inc-1")}  # no digest once committed
    assert not any(plan(4, later, me).healing for me in later)
