"""RRefs: remote values, proxies, passing them on, and freeing them on the owner."""
import gc
import time

import pytest

import actors
from actors.rpc import RRefError
from actors.runtime import ProtocolError, RequestTimeoutError
from tests.rpc import workers
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(60)



def test_remote_returns_an_rref_whose_value_lives_on_the_owner(world):
    rref = actors.remote("worker1", workers.Counter, args=(5,))
    assert isinstance(rref, actors.RRef)
    assert rref.owner() == actors.WorkerInfo("worker1", 1) and rref.owner_name() == "worker1"
    assert not rref.is_owner()
    assert rref.to_here(timeout=10).value == 5


def test_local_value_works_on_the_owner_and_is_an_error_elsewhere(world):
    rref = actors.remote("worker2", workers.Counter, args=(3,))
    assert actors.rpc_sync("worker2", workers.local_value_of, args=(rref,)) == 3
    with pytest.raises(RRefError, match="only the owner 'worker2'"):
        rref.local_value()


def test_an_rref_to_a_value_owned_here_is_local(world):
    rref = actors.remote("worker0", workers.Counter, args=(9,))
    rref.confirmed().wait(10)
    assert rref.is_owner() and rref.local_value().value == 9 and rref.to_here().value == 9


def test_proxies_run_methods_on_the_owner(world):
    rref = actors.remote("worker1", workers.Counter)
    assert rref.rpc_sync().increment(2) == 2
    assert rref.rpc_async().increment(3).wait(10) == 5
    result = rref.remote().increment(10)
    assert isinstance(result, actors.RRef) and result.to_here() == 15
    assert rref.to_here().value == 15


def test_an_rref_passed_to_a_third_worker_can_fetch_the_value(world):
    rref = actors.remote("worker1", workers.Counter, args=(42,))
    assert actors.rpc_sync("worker2", workers.fetch_from_third, args=(rref,)) == 42


def test_an_error_in_remote_creation_surfaces_on_to_here(world):
    rref = actors.remote("worker1", workers.raise_key_error, args=("gone",))
    with pytest.raises(KeyError, match="gone"):
        rref.to_here(timeout=10)


def test_the_owner_frees_values_once_every_holder_dropped_its_reference(world):
    gc.collect()  # earlier tests' exceptions hold RRefs in reference cycles
    assert wait_until(lambda: actors.rpc_sync("worker1", workers.owned_values) == 0)
    rrefs = [actors.remote("worker1", workers.Counter, args=(i,)) for i in range(5)]
    for rref in rrefs:
        rref.confirmed().wait(10)
        # forks to third workers, which drop them when the call returns
        assert actors.rpc_sync("worker2", workers.fetch_from_third, args=(rref,)) >= 0
    assert actors.rpc_sync("worker1", workers.owned_values) == 5
    del rrefs, rref
    gc.collect()
    assert wait_until(lambda: actors.rpc_sync("worker1", workers.owned_values) == 0)


def test_an_rref_of_a_local_value_is_owned_here_and_usable_elsewhere(world):
    rref = actors.RRef(workers.Counter(7))
    assert rref.is_owner() and rref.owner_name() == "worker0" and rref.local_value().value == 7
    assert actors.rpc_sync("worker1", workers.fetch_from_third, args=(rref,)) == 7


def test_async_execution_methods_answer_through_every_proxy_like_torch(world):
    rref = actors.remote("worker1", workers.AsyncCounter, args=("worker2",))
    assert rref.rpc_sync().add_later(5) == 5
    assert rref.rpc_async().add_later(1).wait(10) == 6
    assert rref.remote().add_later(2).to_here(timeout=10) == 8
    assert rref.to_here(timeout=10).value == 8


def test_a_creation_that_timed_out_raises_at_the_next_use_of_the_rref_as_in_torch(world):
    rref = actors.remote("worker1", workers.sleep_then, args=(1.0, "late"), timeout=0.1)
    with pytest.raises(RequestTimeoutError):
        rref.confirmed().wait(10)
    assert not rref.confirmed_by_owner()
    uses = [lambda: rref.to_here(10), lambda: rref.rpc_sync().upper(),
            lambda: rref.rpc_async().upper(), lambda: rref.remote().upper()]
    for use in uses:
        with pytest.raises(RequestTimeoutError, match=r"the creation of RRef\(owner="
                                                             r"'worker1', .*\) by remote\(\) "
                                                             r"timed out"):
            use()


class _FailsToUnpickle:
    """An argument the owner cannot decode: its request is rejected before it runs."""

    def __reduce__(self):
        return int, ("not a number",)


def test_a_creation_the_owner_rejected_unrun_raises_at_once_at_the_next_use(world):
    uses = [lambda rref: rref.to_here(20), lambda rref: rref.rpc_sync(20).__len__()]
    for use in uses:
        rref = actors.remote("worker2", list, args=([_FailsToUnpickle()],), timeout=20)
        started = time.monotonic()
        with pytest.raises(ProtocolError, match=r"'worker2' rejected the creation of RRef"
                                                r".* unrun.*undecodable pickle body"):
            use(rref)  # before: RequestTimeoutError after the whole 20 s
        assert time.monotonic() - started < 1.5
        with pytest.raises(ProtocolError, match="rejected the creation"):
            use(rref)  # once the rejection is known, before anything is sent


def test_the_owner_of_a_rejected_creation_fails_every_fetch_at_once_and_keeps_nothing(world):
    gc.collect()  # earlier tests' exceptions hold RRefs in reference cycles
    owned_before = actors.rpc_sync("worker2", workers.owned_values)
    rref = actors.remote("worker2", list, args=([_FailsToUnpickle()],), timeout=20)
    with pytest.raises(ProtocolError):
        rref.confirmed().wait(10)
    started = time.monotonic()
    # worker1 knows nothing of the refusal: its fetch is answered by the owner itself.
    with pytest.raises(ProtocolError, match=r"rejected unrun.*undecodable pickle body"):
        actors.rpc_sync("worker1", workers.fetch_from_third, args=(rref,), timeout=20)
    assert time.monotonic() - started < 1.5  # before: the owner waited out the 20 s
    del rref
    gc.collect()
    actors.rpc_sync("worker1", gc.collect)  # its error's traceback held its copy of the RRef
    assert wait_until(lambda: actors.rpc_sync("worker2", workers.owned_values) <= owned_before)


def test_an_rref_whose_function_raised_is_confirmed_and_raises_its_error(world):
    rref = actors.remote("worker1", workers.raise_key_error, args=("y",))
    with pytest.raises(KeyError):
        rref.confirmed().wait(10)
    assert rref.confirmed_by_owner()
    with pytest.raises(KeyError, match="no entry 'y'"):
        rref.to_here(10)


def test_confirmed_by_owner_like_torch(world):
    rref = actors.remote("worker1", workers.Counter, args=(1,))
    rref.confirmed().wait(10)
    assert rref.confirmed_by_owner()
    assert actors.RRef(3).confirmed_by_owner()
    assert actors.rpc_sync("worker2", workers.confirmed_there, args=(rref,))


def test_rref_backward_with_a_context_on_an_owner_without_distributed_autograd_is_clear(world):
    rref = actors.remote("worker1", workers.Counter)
    with pytest.raises(RRefError, match="needs distributed autograd"):
        rref.backward(dist_autograd_ctx_id=12345)
    assert rref.rpc_sync().increment(1) == 1  # the owner keeps serving
