"""rpc_sync, rpc_async and remote functions in a world of three processes."""

import traceback

import numpy as np
import pytest
import zmq

import actors
from actors.runtime import RemoteError, RequestTimeoutError
from actors.runtime.protocol import envelope
from actors.runtime.protocol import Kind
from tests.rpc import workers
from tests.waiting import run_in_threads

pytestmark = pytest.mark.timeout(60)


def test_a_worker_is_reached_by_name_rank_or_worker_info(world):
    info = actors.get_worker_info("worker1")
    assert info == actors.WorkerInfo("worker1", 1) and (info.name, info.id) == ("worker1", 1)
    for to in ("worker1", 1, info):
        assert actors.rpc_sync(to, workers.whoami) == "worker1"


def test_rpc_async_returns_a_future_of_the_value(world):
    future = actors.rpc_async("worker2", workers.add, args=(np.ones(3), np.ones(3)))
    assert isinstance(future, actors.Future)
    np.testing.assert_array_equal(future.wait(10), [2.0, 2.0, 2.0])
    assert future.then(lambda f: f.value().sum()).wait(10) == 6.0


def test_keyword_arguments_and_large_arrays_travel(world):
    array = actors.rpc_sync("worker1", workers.make_array, kwargs={"n": 1_000_000})
    np.testing.assert_array_equal(array, np.arange(1_000_000))


def test_rpc_to_self_works(world):
    assert actors.rpc_sync("worker0", workers.add, args=(2, 3)) == 5
    assert actors.get_worker_info() == actors.WorkerInfo("worker0", 0)


def test_a_remote_function_may_itself_make_rpcs(world):
    assert actors.rpc_sync("worker1", workers.nested_add, args=("worker2", 1, 2)) == 30


def test_a_remote_exception_is_raised_with_its_type_and_the_remote_traceback(world):
    with pytest.raises(KeyError, match="no entry 'x'") as info:
        actors.rpc_sync("worker1", workers.raise_key_error, args=("x",))
    assert "raise_key_error" in info.value.remote_traceback


def test_an_uncaught_remote_exception_prints_the_remote_traceback_and_the_worker_as_in_torch(
        world):
    """What a caller's uncaught exception prints: the callee's frames, named after the
    worker that raised, as the cause above the caller's own (torch prints them, with
    "On WorkerInfo(...)", in its message); before, only the caller's frames."""
    def printed(call):
        with pytest.raises(KeyError) as info:
            call()
        return "".join(traceback.format_exception(info.type, info.value, info.tb))

    for call in (lambda: actors.rpc_sync("worker1", workers.raise_key_error, args=("x",)),
                 lambda: actors.rpc_async("worker1", workers.raise_key_error, args=("x",)).wait(),
                 lambda: actors.remote("worker1", workers.raise_key_error, args=("x",)).to_here()):
        text = printed(call)
        assert "raised on worker 'worker1':" in text and "in raise_key_error" in text
        assert text.index("in raise_key_error") < text.index("direct cause") < text.index(
            "test_calls.py")
    text = printed(lambda: actors.rpc_sync("worker1", workers.call_raising_key_error,
                                           args=("worker2", "y")))
    assert text.index("raised on worker 'worker1'") < text.index("raised on worker 'worker2'")


@pytest.mark.parametrize("name", ["SystemExit", "KeyboardInterrupt"])
def test_a_remote_function_raising_a_base_exception_answers_it_and_the_worker_serves_on(
        world, name):
    """The caller gets a RemoteError naming it (raised as it is, it would end or seem to
    interrupt the caller's own program); the callee's thread lives on."""
    for _ in range(12):  # more than the callee's pool has threads
        with pytest.raises(RemoteError, match=f"builtins.{name}: {name}") as info:
            actors.rpc_sync("worker1", workers.raise_base, args=(name,), timeout=30)
        assert info.value.remote_type == f"builtins.{name}"
        assert "raise_base" in info.value.remote_traceback
    assert actors.rpc_sync("worker1", workers.add, args=(1, 2), timeout=30) == 3
    rref = actors.remote("worker1", workers.raise_base, args=(name,), timeout=30)
    with pytest.raises(RemoteError, match=name):
        rref.to_here(30)


def test_an_exception_that_cannot_be_rebuilt_arrives_as_remote_error(world):
    with pytest.raises(RemoteError, match="UnpicklableAtCaller: boom") as info:
        actors.rpc_sync("worker2", workers.raise_unpicklable, args=("boom",))
    assert info.value.remote_type == "tests.rpc.workers.UnpicklableAtCaller"
    assert "raise_unpicklable" in info.value.remote_traceback


def test_a_call_past_its_timeout_fails_with_a_timeout_error_that_is_a_runtime_error_as_in_torch(
        world):
    named = ("tests.rpc.workers.sleep_then on worker 'worker1' got no reply within 0.2s")
    with pytest.raises(RequestTimeoutError, match=f"^{named}$") as info:
        actors.rpc_sync("worker1", workers.sleep_then, args=(2, "late"), timeout=0.2)
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, RuntimeError)
    with pytest.raises(RequestTimeoutError, match=f"^{named}$"):
        actors.rpc_async("worker1", workers.sleep_then, args=(2, "late"), timeout=0.2).wait(10)


def test_timeout_zero_means_no_timeout(world):
    assert actors.rpc_sync("worker1", workers.sleep_then, args=(0.3, "ok"), timeout=0) == "ok"


@pytest.mark.parametrize("timeout", [-1, actors.UNSET_RPC_TIMEOUT, None])
def test_a_negative_timeout_means_the_default_as_torchs_unset_rpc_timeout(world, timeout):
    assert actors.rpc_sync("worker1", workers.sleep_then, args=(0.3, "ok"),
                           timeout=timeout) == "ok"
    assert actors.rpc_async("worker1", workers.sleep_then, args=(0.3, "ok"),
                            timeout=timeout).wait(10) == "ok"
    rref = actors.remote("worker1", workers.sleep_then, args=(0.0, "kept"), timeout=timeout)
    assert rref.to_here(timeout=timeout) == "kept"


def test_a_nan_timeout_is_a_value_error_and_later_timeouts_still_fire(world):
    for call in (actors.rpc_sync, actors.rpc_async, actors.remote):
        with pytest.raises(ValueError, match="timeout must be a number of seconds, got nan"):
            call("worker1", workers.add, args=(1, 2), timeout=float("nan"))
    with pytest.raises(RequestTimeoutError):
        actors.rpc_async("worker1", workers.sleep_then, args=(2, "late"), timeout=0.2).wait(10)


@pytest.mark.parametrize("to", ["nobody", 7, -1])
def test_an_unknown_worker_is_a_value_error_listing_the_known_ones(world, to):
    with pytest.raises(ValueError, match=r"unknown worker .* 'worker0' \(rank 0\), 'worker1'"):
        actors.rpc_sync(to, workers.add, args=(1, 2))


def test_an_unpicklable_argument_fails_at_the_caller_before_anything_is_sent(world):
    before = actors.rpc_sync("worker2", workers.call_count)
    with pytest.raises(TypeError, match="cannot be sent.*refuses to be pickled"):
        actors.rpc_async("worker2", workers.count_calls, args=(workers.Unpicklable(),))
    assert actors.rpc_sync("worker2", workers.call_count) == before


def test_an_unpicklable_result_reaches_the_caller_as_an_error(world):
    with pytest.raises(TypeError, match="refuses to be pickled"):
        actors.rpc_sync("worker1", workers.return_unpicklable)


def test_garbage_on_a_workers_socket_does_not_disturb_calls_in_flight(world):
    from actors.rpc.state import current_agent

    address = current_agent().directory.address(actors.get_worker_info("worker1"))
    in_flight = actors.rpc_async("worker1", workers.sleep_then, args=(0.5, "intact"))
    zctx = zmq.Context()
    sock = zctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10_000)
    sock.connect(address)
    try:
        sock.send_multipart([b"garbage"])
        sock.send_multipart(envelope.encode(Kind.RPC_CALL, 5, "not a call"))
        for _ in range(2):
            sock.recv_multipart()  # each gets its error reply
    finally:
        sock.close(0)
        zctx.term()
    assert in_flight.wait(10) == "intact"
    assert actors.rpc_sync("worker1", workers.add, args=(1, 1)) == 2


def test_many_threads_can_call_at_once(world):
    results, errors = [], []

    def caller(i):
        try:
            results.append(actors.rpc_sync(1 + i % 2, workers.add, args=(i, i)))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    assert run_in_threads(caller, 16, 30)
    assert not errors and sorted(results) == [2 * i for i in range(16)]
