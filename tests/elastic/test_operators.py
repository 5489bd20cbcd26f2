"""The operators are pure: each case is a state, a time and the action expected."""
import pytest

from store.elastic.operators import (ROLLBACK_PERIOD, Action, CloseOp, ExitOp, JoinOp,
                                     KeepAliveOp, RendezvousContext)
from store.elastic.settings import NodeDesc, RendezvousSettings, RendezvousTimeout
from store.elastic.state import RendezvousState

pytestmark = pytest.mark.timeout(30)

ME = NodeDesc("host", 100, 0)
A, B, C = (NodeDesc("host", 200 + i, 0) for i in range(3))
WALL = 1_000_000.0  # wall-clock "now"
NOW = 50.0  # monotonic "now"
BEFORE, AFTER = NOW + 10, NOW - 1  # operation deadlines: not reached / passed
SETTINGS = RendezvousSettings("run", min_nodes=2, max_nodes=3, timeout=RendezvousTimeout(),
                              keep_alive_interval=5, keep_alive_max_attempt=3)


def state(participants=(), waiting=(), complete=False, closed=False, deadline=None, beat=WALL):
    return RendezvousState(round=0, complete=complete, closed=closed, deadline=deadline,
                           participants={n: i for i, n in enumerate(participants)},
                           wait_list=set(waiting),
                           last_heartbeats={n: beat for n in (*participants, *waiting)})


def decide(op, st, deadline, now=NOW, wall=WALL):
    return op(RendezvousContext(ME, st, SETTINGS, now, wall), deadline)


JOIN_CASES = [
    ("closed rendezvous", state(closed=True), BEFORE, NOW, Action.ERROR_CLOSED),
    ("closed after our round completed", state([ME, A], complete=True, closed=True), BEFORE,
     NOW, Action.FINISH),
    ("closed, a complete round without us", state([A, B], complete=True, closed=True), BEFORE,
     NOW, Action.ERROR_CLOSED),
    ("complete and a participant", state([ME, A], complete=True), BEFORE, NOW, Action.FINISH),
    ("complete participant even after the deadline", state([ME, A], complete=True), AFTER,
     NOW, Action.FINISH),
    ("open round, not in it", state([A]), BEFORE, NOW, Action.ADD_TO_PARTICIPANTS),
    ("empty state", state(), BEFORE, NOW, Action.ADD_TO_PARTICIPANTS),
    ("complete round with room", state([A, B], complete=True), BEFORE, NOW,
     Action.ADD_TO_WAIT_LIST),
    ("complete round, max reached", state([A, B, C], complete=True), BEFORE, NOW, Action.SYNC),
    ("complete round, already waiting", state([A, B], [ME], complete=True), BEFORE, NOW,
     Action.SYNC),
    ("participant below min", state([ME]), BEFORE, NOW, Action.SYNC),
    ("participant, min reached, last call running", state([ME, A], deadline=WALL + 5), BEFORE,
     NOW, Action.SYNC),
    ("participant, min reached, last call over", state([ME, A], deadline=WALL - 1), BEFORE,
     NOW, Action.MARK_RENDEZVOUS_COMPLETE),
    ("participant after the deadline, in the rollback window", state([ME]), AFTER, NOW,
     Action.REMOVE_FROM_PARTICIPANTS),
    ("waiting after the deadline, in the rollback window", state([A, B], [ME], complete=True),
     AFTER, NOW, Action.REMOVE_FROM_WAIT_LIST),
    ("after the deadline, neither participant nor waiting", state([A]), AFTER, NOW,
     Action.ERROR_TIMEOUT),
    ("participant past the rollback window", state([ME]), AFTER - ROLLBACK_PERIOD - 1, NOW,
     Action.ERROR_TIMEOUT),
    ("participant whose heartbeat is due", state([ME], beat=WALL - 6), BEFORE, NOW,
     Action.KEEP_ALIVE),
]


@pytest.mark.parametrize("case", JOIN_CASES, ids=[c[0] for c in JOIN_CASES])
def test_join_decides_each_case_of_the_table(case):
    _, st, deadline, now, expected = case
    assert decide(JoinOp(), st, deadline, now) is expected


def test_join_does_not_read_the_clock_so_time_can_jump():
    st = state([ME, A], deadline=WALL + 30)
    assert decide(JoinOp(), st, BEFORE) is Action.SYNC
    assert decide(JoinOp(), st, BEFORE, wall=WALL + 31) is Action.MARK_RENDEZVOUS_COMPLETE


EXIT_CASES = [
    ("a participant leaves", state([ME, A]), BEFORE, Action.REMOVE_FROM_PARTICIPANTS),
    ("a participant of a complete round leaves", state([ME, A], complete=True), BEFORE,
     Action.REMOVE_FROM_PARTICIPANTS),
    ("not a participant: nothing to do", state([A]), BEFORE, Action.FINISH),
    ("a participant past the deadline", state([ME]), AFTER, Action.ERROR_TIMEOUT),
]


@pytest.mark.parametrize("case", EXIT_CASES, ids=[c[0] for c in EXIT_CASES])
def test_exit_decides_each_case_of_the_table(case):
    _, st, deadline, expected = case
    assert decide(ExitOp(), st, deadline) is expected


CLOSE_CASES = [
    ("open: close it", state([A]), BEFORE, Action.MARK_RENDEZVOUS_CLOSED),
    ("already closed", state(closed=True), AFTER, Action.FINISH),
    ("open past the deadline", state(), AFTER, Action.ERROR_TIMEOUT),
]


@pytest.mark.parametrize("case", CLOSE_CASES, ids=[c[0] for c in CLOSE_CASES])
def test_close_decides_each_case_of_the_table(case):
    _, st, deadline, expected = case
    assert decide(CloseOp(), st, deadline) is expected


KEEP_ALIVE_CASES = [
    ("heartbeat due", state([ME], beat=WALL - 5), BEFORE, Action.KEEP_ALIVE),
    ("heartbeat fresh", state([ME], beat=WALL - 1), BEFORE, Action.FINISH),
    ("not in the state", state([A], beat=WALL - 9), BEFORE, Action.FINISH),
    ("due past the deadline", state([ME], beat=WALL - 5), AFTER, Action.ERROR_TIMEOUT),
    ("waiting and due", state([A, B], [ME], complete=True, beat=WALL - 6), BEFORE,
     Action.KEEP_ALIVE),
]


@pytest.mark.parametrize("case", KEEP_ALIVE_CASES, ids=[c[0] for c in KEEP_ALIVE_CASES])
def test_keep_alive_decides_each_case_of_the_table(case):
    _, st, deadline, expected = case
    assert decide(KeepAliveOp(), st, deadline) is expected
