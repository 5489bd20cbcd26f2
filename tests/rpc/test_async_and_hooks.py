"""async_execution frees worker threads; hooks see and wrap every message."""
import pytest

import actors
from actors.rpc import RpcHook
from tests.rpc import workers
from tests.rpc.conftest import rpc_world

pytestmark = pytest.mark.timeout(90)


@pytest.mark.slow
def test_a_chain_of_nested_calls_completes_with_one_worker_thread_everywhere():
    with rpc_world(3, threads=1):
        path = ["worker1", "worker2", "worker1", "worker2", "worker1"]
        assert actors.rpc_sync("worker1", workers.chain, args=(path, 0), timeout=30) == 5


def test_async_execution_needs_the_function_to_return_a_future():
    with rpc_world(2):
        bad = actors.async_execution(workers.add)
        with pytest.raises(TypeError, match="must return an actors.Future"):
            actors.rpc_sync("worker1", bad, args=(1, 2))


def test_a_future_returned_without_async_execution_is_an_error_that_says_to_mark_it():
    """torch: "Can not pickle torch.futures.Future"; before, the error named a lock."""
    with rpc_world(2):
        with pytest.raises(TypeError, match="must be marked @async_execution"):
            actors.rpc_sync("worker1", workers._completed, args=(1,))
        with pytest.raises(TypeError, match="must be marked @async_execution"):
            actors.rpc_sync("worker1", workers.add, args=(actors.Future(), 1))


def test_hooks_see_requests_and_responses_on_both_sides_and_can_wrap_payloads():
    hook = workers.TracingHook()
    workers.TracingHook.seen.clear()
    actors.register_hook("trace", hook)
    try:
        with pytest.raises(ValueError, match="already registered"):
            actors.register_hook("trace", hook)
        with rpc_world(2, with_hook=True):
            assert actors.rpc_sync("worker1", workers.echo, args=("wrap-me",)) == "wrapped"
            seen_remote = actors.rpc_sync("worker1", workers.seen_by_hook)
        assert ("request", "worker0") in seen_remote
        assert ("response", "worker1") in workers.TracingHook.seen
    finally:
        actors.unregister_hook("trace")


def test_a_hook_must_be_an_rpc_hook():
    with pytest.raises(TypeError):
        actors.register_hook("bad", object())
    assert issubclass(workers.TracingHook, RpcHook)
