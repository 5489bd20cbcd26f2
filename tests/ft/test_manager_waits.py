"""A fault-tolerant member waiting at a round: it says so when the wait is long, a
newcomer that found nobody starts again from the latest round while a live member holds
the state and fails once none does, a restarted replica passes by the rounds its earlier
process was in, and a member the others went on without joins them again."""
import concurrent.futures
import contextlib

import pytest
import structlog

import engine.ft as ft
from engine.ft.quorum import Arrival, plan
from store import PrefixStore, StoreTimeoutError, TCPStore
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(30)


def test_a_member_waiting_for_another_says_whom_for_the_whole_wait(monkeypatch):
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "0.4")
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_EVERY", "0.5")
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
    manager = ft.Manager(store=server, replica_id="0", world_size=2, session="waits",
                         timeout=1.5, progress=False)
    last = plan(0, {m: Arrival(0, f"inc-{m}") for m in ("0", "1")}, "0")
    try:
        with structlog.testing.capture_logs() as logs:
            # Replica 1 never votes: the round waits for it, in slices, until its deadline
            # lets the one member there go on.
            votes = manager._rounds.arrive("c/0", "ok", last, 1.5, final_min=1)
    finally:
        manager.shutdown()
        server.close()
    assert votes == {"0": b"ok"}
    reports = [e["event"] for e in logs if e["log_level"] == "warning"]
    # Due at 0.4 s and 0.9 s, reported between slices: one wait, whose reports a slow
    # slice may merge or delay, where each 0.25 s slice alone would report nothing.
    assert 1 <= len(reports) <= 3, reports
    assert all(r.startswith("store quorum 'c/0' as '0': waiting for members ['0', '1']")
               for r in reports), reports


@contextlib.contextmanager
def newcomer_setting(session: str, replica_id: str, **timeouts):
    """A store server, its keys under `session`, a Manager for `replica_id` there and a
    thread for another member's arrivals; all closed afterwards."""
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
    manager = ft.Manager(store=server, replica_id=replica_id, world_size=2, session=session,
                         progress=False, **timeouts)
    member = concurrent.futures.ThreadPoolExecutor(1)
    try:
        yield PrefixStore(f"ft/{session}", server), manager, member
    finally:
        member.shutdown()
        manager.shutdown()
        server.close()


def test_a_newcomer_that_found_no_round_starts_again_from_the_latest_round():
    with newcomer_setting("again", "9", timeout=1.0, join_timeout=0.5) as (keys, manager,
                                                                          member):
        keys.set("latest", "5")  # a round nobody is at any more
        keys.set_ephemeral("holders/0", "inc-0")  # replica 0 lives, in a long step
        manager.start_quorum()
        assert manager.wait_quorum() is None  # round 6: nobody came
        assert isinstance(manager.errored(), StoreTimeoutError)
        keys.set("latest", "40")
        at_41 = member.submit(keys.quorum, "q/41", "0", Arrival(3, "inc-0").encode(),
                              count=2, timeout=10)
        manager.should_commit()  # ends the failed step; the next one starts its quorum
        manager.start_quorum()
        assert "9" in at_41.result(15)  # it arrived at the round after the latest


def test_a_restarted_replica_passes_by_the_rounds_its_earlier_process_was_in():
    with newcomer_setting("restarted", "2", timeout=1.0) as (keys, manager, member):
        keys.set("latest", "0")
        for round_ in (1, 2):  # released with the replica's earlier process, now dead
            keys.quorum(f"q/{round_}", "2", Arrival(round_, "earlier").encode(), count=1,
                        timeout=5)
        at_3 = member.submit(keys.quorum, "q/3", "0", Arrival(3, "inc-0").encode(),
                             count=2, timeout=10)
        manager.start_quorum()
        result = at_3.result(15)
        # It came to the round that was still open, as itself; taking round 1 or 2 as
        # its own would have started a group of one at a step it never reached.
        assert Arrival.decode(result["2"]).incarnation == manager._incarnation
        manager.wait_quorum()


def test_a_member_the_others_went_on_without_past_the_remembered_rounds_joins_them_again():
    with newcomer_setting("passed", "1", timeout=0.5, join_timeout=10.0) as (keys, manager,
                                                                             member):
        # It was in round 0 with replica 0, then stood still while replica 0 went on to
        # round 5000: round 1, long forgotten by the store, is released with it alone.
        manager._round = 1
        manager._last = plan(0, {m: Arrival(0, f"inc-{m}") for m in "01"}, "1")
        keys.set("latest", "5000")
        manager.start_quorum()
        assert manager.wait_quorum() is None  # not a step of its own, alone at step 0
        assert "went on to round 5000" in str(manager.errored())
        at_5001 = member.submit(keys.quorum, "q/5001", "0", Arrival(7, "inc-0").encode(),
                                count=2, timeout=10)
        manager.should_commit()
        manager.start_quorum()
        assert "1" in at_5001.result(15)  # it came back as a newcomer, after the latest


def test_a_newcomer_fails_saying_so_once_no_live_member_holds_the_state():
    with newcomer_setting("lost", "9", timeout=1.0, join_timeout=0.5) as (keys, manager, _):
        keys.set("latest", "5")
        holder = keys.clone()  # replica 0's own session
        try:
            holder.set_ephemeral("holders/0", "inc-0")
            manager.start_quorum()
            assert manager.wait_quorum() is None  # nobody came, but replica 0 lives: wait on
            assert isinstance(manager.errored(), StoreTimeoutError)
            manager.should_commit()
        finally:
            holder.close()  # replica 0's process ends, and its key with its session
        assert wait_until(lambda: not keys.check(["holders/0"]))
        manager.start_quorum()
        with pytest.raises(ft.NoLiveReplicaError, match="every replica of this job was lost"):
            manager.wait_quorum()
        with pytest.raises(ft.NoLiveReplicaError):  # every later call says so too
            manager.should_commit()


def test_a_newcomer_hears_the_job_finished_only_when_the_latest_rounds_members_left():
    """A replica that left before the others went on to later rounds says nothing of how
    the job ended: when they are all lost later, the newcomer hears that, not 'finished'."""
    from engine.ft.holders import Holders

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
    try:
        keys = PrefixStore("ft/session", server)
        early = Holders(keys, "3", "incarnation-3")
        early.hold()
        early.leave(100, 200)
        newcomer = Holders(keys, "9", "incarnation-9")
        waited = StoreTimeoutError("quorum", ["q/901"], 1.0)
        newcomer.check_joinable(waited, False, lambda: 201)  # no verdict yet: it waits on
        with pytest.raises(ft.NoLiveReplicaError) as raised:
            newcomer.check_joinable(waited, True, lambda: 201)
        assert not isinstance(raised.value, ft.ReplicasLeftError)
        last = Holders(keys, "0", "incarnation-0")
        last.hold()
        last.leave(400, 900)
        with pytest.raises(ft.ReplicasLeftError, match=r"after step 400 \(0\)\. The job has "
                                                       r"finished if they did"):
            newcomer.check_joinable(waited, False, lambda: 900)
    finally:
        server.close()


def test_timeouts_may_be_timedeltas_as_in_torchft():
    from datetime import timedelta

    import engine
    from engine import nn, optim

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
    manager = ft.Manager(store=server, replica_id="0", world_size=1, session="timedeltas",
                         timeout=timedelta(seconds=5), quorum_timeout=timedelta(seconds=2),
                         join_timeout=timedelta(seconds=3), progress=False)
    try:
        assert (manager.timeout, manager.quorum_timeout, manager.join_timeout) == (5, 2, 3)
        model = ft.DistributedDataParallel(manager, nn.Linear(2, 1))
        optimizer = ft.OptimizerWrapper(manager, optim.SGD(model.parameters(), lr=0.1))
        for _ in range(2):
            optimizer.zero_grad()
            model(engine.tensor([[1.0, 2.0]])).sum().backward()
            assert optimizer.step()
        assert manager.current_step() == 2
        with pytest.raises(TypeError, match="timeout must be seconds"):
            ft.Manager(store=server, replica_id="1", world_size=1, session="timedeltas",
                       timeout="10")
    finally:
        manager.shutdown()
        server.close()


def test_the_step_resumes_from_a_checkpoint_of_the_managers_state_dict():
    """torchft's checkpoint recipe: save manager.state_dict() with the model, load it into
    the manager of the restarted job, whose steps then go on from there."""
    import engine
    from engine import nn, optim

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)

    def train(session: str, steps: int, checkpoint=None) -> dict:
        manager = ft.Manager(store=server, replica_id="0", world_size=1, session=session,
                             progress=False)
        try:
            if checkpoint is not None:
                manager.load_state_dict(checkpoint)
            model = ft.DistributedDataParallel(manager, nn.Linear(2, 1))
            optimizer = ft.OptimizerWrapper(manager, optim.SGD(model.parameters(), lr=0.1))
            for _ in range(steps):
                optimizer.zero_grad()
                model(engine.tensor([[1.0, 2.0]])).sum().backward()
                assert optimizer.step()
            return manager.state_dict()
        finally:
            manager.shutdown()

    try:
        saved = train("first-run", 3)
        assert saved == {"step": 3, "batches_committed": 3}
        assert train("restarted-run", 2, checkpoint=saved) == {"step": 5,
                                                               "batches_committed": 5}
    finally:
        server.close()


def test_a_failed_quorum_is_one_failure_of_the_step_however_often_it_is_waited_for():
    import engine
    from engine import nn, optim

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
    # Replica 1 never comes: the first round cannot have min_replica_size members.
    manager = ft.Manager(2, store=server, replica_id="0", world_size=2, session="once",
                         join_timeout=0.5, progress=False)
    try:
        model = ft.DistributedDataParallel(manager, nn.Linear(2, 1))
        optimizer = ft.OptimizerWrapper(manager, optim.SGD(model.parameters(), lr=0.1))
        with structlog.testing.capture_logs() as logs:
            optimizer.zero_grad()
            model(engine.tensor([[1.0, 2.0]])).sum().backward()  # waits in the all-reduce
            assert manager.num_participants() == 0
            assert not optimizer.step()
        failures = [e for e in logs if e["event"] == "ft_step_failed"]
        assert len(failures) == 1, failures
        assert "StoreTimeoutError" in failures[0]["error"]
    finally:
        manager.shutdown()
        server.close()


def test_a_store_lost_at_the_vote_fails_the_step_and_is_not_raised_into_the_loop():
    """As a hung member's store connection looks when it wakes: the quorum is done, the
    vote cannot reach the store."""
    import engine
    from engine import nn, optim

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
    client = TCPStore("127.0.0.1", server.port, timeout=10)
    manager = ft.Manager(store=client, replica_id="0", world_size=1, session="vote",
                         timeout=3, progress=False)
    try:
        model = ft.DistributedDataParallel(manager, nn.Linear(2, 1))
        optimizer = ft.OptimizerWrapper(manager, optim.SGD(model.parameters(), lr=0.1))
        optimizer.zero_grad()
        model(engine.tensor([[1.0, 2.0]])).sum().backward()
        assert manager.wait_quorum() is not None
        weight = model.module.weight.data.copy()
        server.close()
        assert not optimizer.step()
        assert (model.module.weight.data == weight).all() and manager.current_step() == 0
        assert "StoreConnectionError" in type(manager.errored()).__name__
    finally:
        manager.shutdown()
        client.close()
        server.close()
