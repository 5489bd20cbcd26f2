"""init_rpc and init_process_group: ranks that disagree on the world, or claim one name or
rank twice, fail on every rank at once, naming the values and the ranks."""
import pytest

from tests.joining import join_all

# Spawning three processes and joining takes about 2 s; a conflict is seen right after.
pytestmark = pytest.mark.timeout(60)
JOIN_TIMEOUT = 30.0  # what every join is allowed; a visible conflict must come far sooner
SEEN_AT_ONCE = 10.0  # from start to error, process start-up included
REPORTS_WITHIN = 40.0


def _every_join_failed_at_once(outcomes, *needles):
    for index, (outcome, seconds) in enumerate(outcomes):
        assert outcome.split(":")[0] in ("RpcInitError", "DistError"), (index, outcome)
        for needle in needles:
            assert needle in outcome, (index, outcome)
        assert seconds < SEEN_AT_ONCE, (index, seconds)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["rpc", "pg"])
def test_ranks_that_disagree_on_the_world_size_all_fail_naming_both_sizes(kind):
    names = ["a", "b"] if kind == "rpc" else [None, None]
    outcomes = join_all(kind, [(0, 2, names[0]), (1, 3, names[1])], JOIN_TIMEOUT,
                        REPORTS_WITHIN)
    _every_join_failed_at_once(outcomes, "disagree on the world size", "says 2", "says 3",
                               "rank 0", "rank 1")


@pytest.mark.slow
def test_a_worker_name_used_twice_fails_on_every_worker_naming_it_and_both_ranks():
    outcomes = join_all("rpc", [(0, 2, "twin"), (1, 2, "twin")], JOIN_TIMEOUT, REPORTS_WITHIN)
    _every_join_failed_at_once(outcomes, "duplicate worker name 'twin'", "rank 0", "rank 1")


@pytest.mark.slow
def test_a_rank_claimed_twice_in_a_process_group_fails_on_every_rank():
    outcomes = join_all("pg", [(0, 3, None), (1, 3, None), (1, 3, None)], JOIN_TIMEOUT,
                        REPORTS_WITHIN)
    _every_join_failed_at_once(outcomes, "rank 1 is claimed twice", "pid")


@pytest.mark.slow
def test_ranks_that_agree_still_join():
    outcomes = join_all("pg", [(0, 2, None), (1, 2, None)], JOIN_TIMEOUT, REPORTS_WITHIN)
    assert [outcome for outcome, _ in outcomes] == ["joined", "joined"]


def _form_groups(ports, rank, results):
    """Form a group of 2 as `rank` on each of `ports` in turn; report the all_reduces."""
    import numpy as np

    import actors.distributed as dist

    sums = []
    for port in ports:
        dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=2, timeout=JOIN_TIMEOUT)
        array = np.ones(2)
        dist.all_reduce(array)
        sums.append(array.tolist())
        dist.destroy_process_group()
    results.put((rank, len(ports), sums))


@pytest.mark.slow
def test_a_process_that_formed_a_group_before_forms_another_with_a_newly_started_peer():
    from tests.joining import ctx
    from tests.net import free_port
    from tests.subprocesses import reap

    ports = [free_port(), free_port()]
    results = ctx.Queue()
    procs = [ctx.Process(target=_form_groups, args=(ports, 0, results), daemon=True),
             ctx.Process(target=_form_groups, args=(ports[:1], 1, results), daemon=True),
             ctx.Process(target=_form_groups, args=(ports[1:], 1, results), daemon=True)]
    try:
        for proc in procs:
            proc.start()
        reports = sorted(results.get(timeout=REPORTS_WITHIN) for _ in procs)
    finally:
        reap(procs)
    assert reports == [(0, 2, [[2.0, 2.0], [2.0, 2.0]]), (1, 1, [[2.0, 2.0]]),
                       (1, 1, [[2.0, 2.0]])]


def test_a_claim_that_comes_after_the_world_formed_fails_at_once_saying_so():
    """The members that formed the world went on: the late claimant does not wait for
    their acknowledgements (`ACK_GRACE`), it raises at once."""
    import threading
    import time

    from store.agreement import Belief, agree
    from store.hash_store import HashStore

    store, errors = HashStore(timeout=10), []

    def join(rank, name):
        agree(store, Belief(rank, 2, name), 10, RuntimeError, str)

    members = [threading.Thread(target=join, args=(r, n)) for r, n in ((0, "a"), (1, "b"))]
    for member in members:
        member.start()
    for member in members:
        member.join(10)
    started = time.monotonic()
    with pytest.raises(RuntimeError) as late:
        agree(store, Belief(1, 2, "c"), 10, RuntimeError, str)
    assert time.monotonic() - started < 5.0  # not the 10 s of ACK_GRACE
    assert str(late.value).startswith("rank 1 is claimed twice: by worker 'b'")
    assert str(late.value).endswith("a world of 2 had formed from the claims before this "
                                    "one, and went on")
    assert not errors
