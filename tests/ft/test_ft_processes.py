"""Fault-tolerant data parallelism with real processes: kills mid-step, newcomers that
receive the state, a kill during that transfer, two losses at once, the last member
alone, a hung rank, and every replica lost at once."""
import contextlib
import multiprocessing as mp
import os
import queue
import signal
import time
import uuid
from collections import defaultdict

import pytest

from store import TCPStore
from tests.ft import replicas
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)
ctx = mp.get_context("spawn")


class Job:
    """A store server in this process and replicas in spawned ones; every wait bounded."""

    def __init__(self, server: TCPStore):
        self.server, self.session = server, uuid.uuid4().hex
        self.results = ctx.Queue()
        self.procs = {}
        self.steps = defaultdict(list)  # replica -> its step reports
        self.done = {}

    def start(self, replica: str, world: int, steps: int, **kwargs) -> None:
        proc = ctx.Process(target=replicas.run, args=(self.server.port, self.session, replica,
                                                      world, steps, self.results),
                           kwargs=kwargs, daemon=True)
        proc.start()
        self.procs.setdefault(replica, []).append(proc)

    def collect(self, finishing, timeout: float = 60.0) -> None:
        """Read reports until every replica in `finishing` said it is done (or failed)."""
        deadline = time.monotonic() + timeout
        while not set(finishing) <= set(self.done):
            try:
                item = self.results.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"replicas {sorted(set(finishing) - set(self.done))} "
                                     f"did not finish within {timeout}s") from None
            if item[1] in ("done", "error"):
                self.done[item[0]] = item
            else:
                self.steps[item[0]].append(item)

    def wait_steps(self, replica: str, count: int, timeout: float = 60.0) -> None:
        """Read reports until `replica` reported `count` steps."""
        deadline = time.monotonic() + timeout
        while len(self.steps[replica]) < count:
            item = self.results.get(timeout=max(0.0, deadline - time.monotonic()))
            if item[1] == "done":
                self.done[item[0]] = item
            else:
                self.steps[item[0]].append(item)

    def wait_exit(self, replica: str, timeout: float = 20.0) -> int:
        proc = self.procs[replica][-1]
        proc.join(timeout)
        assert not proc.is_alive(), f"replica {replica} did not end"
        return proc.exitcode

    def committed(self):
        """{step: {replica: digest}} of the committed steps."""
        table = defaultdict(dict)
        for reports in self.steps.values():
            for replica, step, committed, _, _, digest, _ in reports:
                if committed:
                    table[step][replica] = digest
        return table

    def kill_all(self) -> None:
        for procs in self.procs.values():
            for proc in procs:
                if proc.is_alive():
                    os.kill(proc.pid, signal.SIGCONT)  # a stopped process must run to die
                    proc.kill()
                proc.join(10)


@contextlib.contextmanager
def job():
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=30)
    j = Job(server)
    try:
        yield j
    finally:
        j.kill_all()
        server.close()


def assert_consistent(j: Job) -> None:
    """Every committed step left the same parameters on every member; no step went back."""
    for step, digests in j.committed().items():
        assert len(set(digests.values())) == 1, f"step {step} diverged: {digests}"
    by_process = defaultdict(list)
    for reports in j.steps.values():
        for report in reports:
            by_process[report[-1]].append(report[1])
    for pid, steps in by_process.items():
        assert steps == sorted(steps), f"process {pid} went back: {steps}"


@pytest.mark.slow
def test_a_kill_during_the_all_reduce_fails_the_step_and_the_survivors_go_on_in_place():
    with job() as j:
        for r in "012":
            j.start(r, 3, 12, fault=("kill_in_allreduce", 5) if r == "2" else None)
        j.collect("01")
        assert j.wait_exit("2") == -signal.SIGKILL
        for r in "01":
            outcome = [rep[1:3] + rep[4:5] for rep in j.steps[r]]
            assert outcome[5] == (5, False, ("0", "1", "2"))  # the step in flight: not applied
            after = next(o for o in outcome[6:] if o[1])  # the next committed one
            assert after[0] == 6 and "2" not in after[2]  # on the survivors
            assert j.done[r][2] == 12
        assert [j.wait_exit(r) for r in "01"] == [0, 0]  # the same processes throughout
        assert len(j.procs["0"]) == len(j.procs["1"]) == 1
        assert_consistent(j)


def test_a_kill_during_the_all_reduce_of_a_closure_fails_the_step_on_the_survivors():
    """optimizer.step(closure): the closure's forward and backward are the step voted on."""
    with job() as j:
        for r in "012":
            j.start(r, 3, 8, closure=True,
                    fault=("kill_in_allreduce", 5) if r == "2" else None)
        j.collect("01")
        assert j.wait_exit("2") == -signal.SIGKILL
        for r in "01":
            outcome = [rep[1:3] + rep[4:5] for rep in j.steps[r]]
            assert outcome[5] == (5, False, ("0", "1", "2"))  # the step in flight: not applied
            assert j.done[r][2] == 8
        assert_consistent(j)
        assert j.done["0"][3] == j.done["1"][3]


def test_replicas_that_start_from_different_parameters_train_rank_0s_from_the_first_step():
    """As torch's DDP broadcasts rank 0's parameters at construction, members whose state
    differs from group rank 0's at the first step receive it."""
    with job() as j:
        for r in "012":
            j.start(r, 3, 4, seed=int(r))  # each replica built from a seed of its own
        j.collect("012")
        assert all(j.done[r][1] == "done" for r in "012"), j.done
        assert_consistent(j)
        assert set(j.committed()) == {1, 2, 3, 4}
        assert j.done["0"][3] == j.done["1"][3] == j.done["2"][3]


@pytest.mark.slow
def test_replaying_the_same_membership_history_from_the_same_seed_gives_the_same_parameters():
    finals = []
    for _ in range(2):
        with job() as j:
            for r in "012":
                j.start(r, 3, 10, seed=3, fault=("kill_in_allreduce", 4) if r == "2" else None)
            j.collect("01")
            finals.append(j.done["0"][3])
            assert j.done["0"][3] == j.done["1"][3]
    assert finals[0] == finals[1]


@pytest.mark.slow
def test_a_restarted_replica_receives_the_state_and_takes_part_in_the_next_steps():
    with job() as j:
        for r in "012":
            j.start(r, 3, 6, with_member="2" if r != "2" else None,
                    fault=("kill_in_allreduce", 3) if r == "2" else None)
        assert j.wait_exit("2") == -signal.SIGKILL
        j.start("2", 3, 0, with_member="2")  # the launcher's restart of only this worker
        j.collect("012")
        restarted = j.procs["2"][-1].pid
        joined = next(rep for rep in j.steps["2"] if rep[-1] == restarted and rep[2])
        assert joined[1] >= 4 and "2" in joined[4]  # it did not start over
        assert_consistent(j)
        assert j.done["0"][3] == j.done["1"][3] == j.done["2"][3]
        assert j.done["0"][4] == j.done["1"][4] == j.done["2"][4]  # the batches count came too


@pytest.mark.slow
def test_a_restarted_replica_using_a_parameter_nobody_else_uses_heals_to_the_same_state():
    """find_unused_parameters=True: in its healing step no member counts a gradient for
    that parameter, so the newcomer drops its own rather than apply it to the state."""
    with job() as j:
        for r in "012":
            j.start(r, 3, 6, with_member="2" if r != "2" else None, extra_on="2",
                    fault=("kill_in_allreduce", 3) if r == "2" else None)
        assert j.wait_exit("2") == -signal.SIGKILL
        j.start("2", 3, 0, with_member="2", extra_on="2")
        j.collect("012")
        assert_consistent(j)
        assert j.done["0"][3] == j.done["1"][3] == j.done["2"][3]


@pytest.mark.slow
def test_a_newcomer_after_many_steps_without_a_change_walks_to_the_current_round():
    with job() as j:
        for r in "01":
            j.start(r, 2, 20, with_member="2")
        j.wait_steps("1", 20)  # past round 16: where the rounds are was last written then
        j.start("2", 2, 0, with_member="2")
        j.collect("012")
        joined = [rep for rep in j.steps["2"] if rep[2]]
        assert joined and joined[0][1] > 20 and "2" in joined[0][4]
        assert_consistent(j)
        assert j.done["0"][3] == j.done["1"][3] == j.done["2"][3]


@pytest.mark.slow
def test_a_kill_during_the_state_transfer_makes_the_newcomer_retry_and_the_group_go_on():
    with job() as j:
        j.start("0", 2, 4, with_member="2", fault=("kill_in_transfer", None))
        j.start("1", 2, 4, with_member="2")
        j.wait_steps("1", 1)  # training has started: "2" is a newcomer
        j.start("2", 2, 0, with_member="2")
        j.collect("12")
        assert j.wait_exit("0") == -signal.SIGKILL
        members = [rep[4] for rep in j.steps["2"] if rep[2]]
        assert members and all(m == ("1", "2") for m in members)
        assert_consistent(j)
        assert j.done["1"][3] == j.done["2"][3]


@pytest.mark.slow
def test_two_ranks_lost_in_one_step_leave_the_other_two_going():
    with job() as j:
        for r in "0123":
            j.start(r, 4, 10, fault=("kill_in_allreduce", 4) if r in "23" else None)
        j.collect("01")
        outcome = [rep[1:3] + rep[4:5] for rep in j.steps["0"]]
        assert (4, False, ("0", "1", "2", "3")) in outcome
        assert any(o[:2] == (5, True) and not {"2", "3"} & set(o[2]) for o in outcome)
        assert_consistent(j)


@pytest.mark.slow
def test_the_last_member_goes_on_alone_with_min_replica_size_one_and_stops_committing_with_two():
    with job() as j:
        j.start("0", 2, 8, fault=None)
        j.start("1", 2, 8, fault=("kill_in_allreduce", 3))
        j.collect("0")
        assert [rep[4] for rep in j.steps["0"] if rep[2]][-1] == ("0",)
        assert j.done["0"][2] == 8
    with job() as j:
        j.start("0", 2, 8, min_replica_size=2, attempts=6)
        j.start("1", 2, 8, min_replica_size=2, fault=("kill_in_allreduce", 3))
        j.collect("0")
        outcome = [rep[1:3] for rep in j.steps["0"]]
        assert outcome[:3] == [(1, True), (2, True), (3, True)]
        assert all(not committed for _, committed in outcome[3:])
        assert j.done["0"][2] == 3


@pytest.mark.slow
def test_a_hung_rank_is_lost_after_the_timeout_and_the_others_go_on():
    with job() as j:
        for r in "012":
            j.start(r, 3, 8, timeout=2.0,
                    fault=("stop_in_allreduce", 3) if r == "2" else None)
        j.collect("01")
        outcome = [rep[1:3] + rep[4:5] for rep in j.steps["0"]]
        assert any(not o[1] and "2" in o[2] for o in outcome)  # the step it hung in
        assert outcome[-1][:2] == (8, True) and "2" not in outcome[-1][2]
        assert_consistent(j)


@pytest.mark.slow
def test_a_hung_rank_that_wakes_after_the_others_finished_never_trains_alone():
    """Continued after the others went on and left, it finds every round it comes to
    released without it; it must not then release a round by itself, as a member of
    its old group, and train its stale state alone: it hears that they left."""
    with job() as j:
        for r in "012":
            j.start(r, 3, 8, timeout=2.0, fault=("stop_in_allreduce", 3) if r == "2" else None)
        j.collect("01")
        # Its holder key lives as long as its store session: gone once the session is.
        assert wait_until(lambda: "2" not in holders(j), timeout=30), holders(j)
        os.kill(j.procs["2"][0].pid, signal.SIGCONT)
        assert j.wait_exit("2", timeout=30) == 1  # the error, raised out of the loop
        end = eval(j.server.get(f"{j.session}/end/2").decode())  # its last report
        assert end[1] == "error" and end[2].startswith("ReplicasLeftError"), end


def holders(j: Job):
    head = f"ft/{j.session}/holders/"
    return sorted(k[len(head):] for k in j.server.list_keys() if k.startswith(head))


@pytest.mark.slow
def test_when_every_replica_is_lost_at_once_the_restarted_ones_fail_saying_so():
    with job() as j:
        for r in "01":
            j.start(r, 2, 8, fault=("kill_in_allreduce", 3))
        j.wait_steps("0", 2)
        assert holders(j) == ["0", "1"]  # each member holds the state from its first step
        assert [j.wait_exit(r) for r in "01"] == [-signal.SIGKILL] * 2
        assert wait_until(lambda: holders(j) == [])  # the keys ended with the processes' sessions
        for r in "01":  # the launcher's restart of each (--restart-policy failed)
            j.start(r, 2, 8, join_timeout=1.0)
        j.collect("01", timeout=30)
        for r in "01":
            assert j.done[r][1] == "error", j.done[r]
            assert j.done[r][2].startswith(f"NoLiveReplicaError: replica '{r}' found no "
                                           f"round to join in time and no live member")
            assert "every replica of this job was lost at once" in j.done[r][2]
            assert j.wait_exit(r) == 1  # the error ends the script: its restarts run out
        # Nothing was committed after the loss: the step number did not go back to 0.
        assert max(j.committed()) == 3


@pytest.mark.slow
def test_a_newcomer_whose_only_sender_dies_in_the_transfer_fails_saying_so():
    with job() as j:
        j.start("0", 1, 10**6, fault=("kill_in_transfer", None))
        j.wait_steps("0", 2)
        j.start("1", 1, 4, join_timeout=1.0)
        assert j.wait_exit("0") == -signal.SIGKILL
        j.collect("1", timeout=30)
        assert j.done["1"][1] == "error", j.done["1"]
        assert j.done["1"][2].startswith("NoLiveReplicaError: replica '1' found no round")
        assert not any(rep[2] for rep in j.steps["1"])  # it never trained on its own


@pytest.mark.slow
def test_a_member_that_shuts_down_is_not_waited_for_and_a_newcomer_after_all_left_is_told():
    """The survivors' next quorum does not wait out its timeout for a member that left;
    a newcomer that comes after every member left hears that at once, not after its
    join timeout, and not that every replica was lost."""
    with job() as j:
        started = time.monotonic()
        for r, steps in (("0", 8), ("1", 8), ("2", 3)):
            j.start(r, 3, steps, timeout=20.0)  # also how long a quorum waits for a member
        j.collect("012")
        assert time.monotonic() - started < 15.0  # with a wait of 20 s for "2", above 20
        steps_after = [rep for rep in j.steps["0"] if rep[1] > 3]
        assert steps_after and all(rep[2] for rep in steps_after)
        assert "2" not in steps_after[-1][4]
        assert_consistent(j)
        j.start("3", 3, 8, join_timeout=60.0)
        j.collect("3", timeout=30)  # within the 60 s it would otherwise wait
        assert j.done["3"][1] == "error"
        assert j.done["3"][2].startswith("ReplicasLeftError: replica '3' found nobody to "
                                         "join: every replica that held the state left the "
                                         "job (shut down) after step 8 (0, 1)"), j.done["3"]
