"""Future: waiting, values, errors, callbacks and chaining."""
import contextvars
import threading

import pytest

from actors.runtime import Future, FutureTimeoutError, InvalidStateError, wait_all
from actors.runtime.concurrency.futures import completed, failed

pytestmark = pytest.mark.timeout(30)


def test_wait_returns_the_value_set_by_another_thread():
    future = Future()
    threading.Thread(target=future.set_result, args=(42,)).start()
    assert future.wait(5) == 42
    assert future.done() and future.value() == 42


def test_wait_raises_the_exception_the_future_holds():
    future = failed(KeyError("k"))
    with pytest.raises(KeyError):
        future.wait(1)
    assert isinstance(future.exception(), KeyError)


def test_wait_with_a_timeout_gives_up_with_a_timeout_error():
    with pytest.raises(FutureTimeoutError) as info:
        Future().wait(0.05)
    assert isinstance(info.value, TimeoutError)


def test_every_thread_waiting_on_one_future_wakes_with_its_value_after_others_gave_up():
    future = Future()
    with pytest.raises(FutureTimeoutError):
        future.wait(0)  # an expired wait leaves nothing behind
    with pytest.raises(FutureTimeoutError):
        future.wait(0.01)
    values, started = [], threading.Barrier(9)

    def waiter() -> None:
        started.wait(5)
        values.append(future.wait(10))

    threads = [threading.Thread(target=waiter) for _ in range(8)]
    for thread in threads:
        thread.start()
    started.wait(5)
    future.set_result("done")
    for thread in threads:
        thread.join(10)
    assert values == ["done"] * 8
    assert future.wait(0) == "done"


def test_value_of_a_pending_future_is_an_invalid_state_error():
    with pytest.raises(InvalidStateError):
        Future().value()


def test_a_result_cannot_be_set_twice():
    future = completed(1)
    with pytest.raises(InvalidStateError):
        future.set_result(2)
    with pytest.raises(InvalidStateError):
        future.set_exception(ValueError())


def test_set_exception_needs_an_exception():
    with pytest.raises(TypeError):
        Future().set_exception("not an exception")


def test_callbacks_run_once_done_and_at_once_when_already_done():
    future, seen = Future(), []
    future.add_done_callback(lambda f: seen.append(("before", f.value())))
    future.set_result(7)
    future.add_done_callback(lambda f: seen.append(("after", f.value())))
    assert seen == [("before", 7), ("after", 7)]


def test_a_failing_callback_does_not_stop_the_others():
    future, seen = Future(), []
    future.add_done_callback(lambda f: 1 / 0)
    future.add_done_callback(lambda f: seen.append(f.value()))
    future.set_result(3)
    assert seen == [3]


@pytest.mark.parametrize("raised", [SystemExit, KeyboardInterrupt])
def test_a_callback_raising_a_base_exception_off_the_main_thread_is_logged_and_completion_goes_on(
        raised):
    future, seen = Future(), []

    def stop(_future):
        raise raised("from a callback")

    future.add_done_callback(stop)
    future.add_done_callback(lambda f: seen.append(f.value()))
    setter = threading.Thread(target=future.set_result, args=(3,))
    setter.start()
    setter.join(10)
    assert seen == [3]


def test_a_keyboard_interrupt_in_a_callback_on_the_main_thread_stops_the_program_as_asked():
    future = Future()

    def interrupt(_future):
        raise KeyboardInterrupt

    future.add_done_callback(interrupt)
    with pytest.raises(KeyboardInterrupt):
        future.set_result(3)
    assert future.value() == 3


def test_then_holds_the_callbacks_return_value_or_its_exception():
    source = Future()
    doubled = source.then(lambda f: f.value() * 2)
    broken = source.then(lambda f: 1 / 0)
    source.set_result(21)
    assert doubled.wait(1) == 42
    with pytest.raises(ZeroDivisionError):
        broken.wait(1)


def test_then_sees_the_exception_of_a_failed_future():
    chained = failed(ValueError("x")).then(lambda f: type(f.exception()).__name__)
    assert chained.wait(1) == "ValueError"


def test_settle_makes_what_the_future_holds_from_a_result_or_an_error():
    seen = []

    def settle(result, exception):
        seen.append((result, exception))
        if exception is not None:
            raise KeyError(str(exception))
        if result is None:
            raise ZeroDivisionError("no result")
        return result * 2

    doubled, mapped, broken = Future(settle), Future(settle), Future(settle)
    called = []
    doubled.add_done_callback(lambda done: called.append(done.value()))
    doubled.set_result(21)
    assert doubled.wait(1) == 42 and called == [42]
    error = ValueError("lost")
    mapped.set_exception(error)
    with pytest.raises(KeyError, match="lost"):
        mapped.wait(1)
    broken.set_result(None)
    assert isinstance(broken.exception(), ZeroDivisionError)
    assert seen == [(21, None), (None, error), (None, None)]


def _complete_from_two_threads() -> None:
    runs, refused = [], []
    future = Future(lambda result, exception: runs.append(result) or result)
    start = threading.Barrier(2)

    def complete(value):
        start.wait(5)
        try:
            future.set_result(value)
        except InvalidStateError:
            refused.append(value)

    threads = [threading.Thread(target=complete, args=(v,)) for v in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len(runs) == 1 and len(refused) == 1
    assert future.value() == runs[0] and refused[0] != runs[0]


def test_settle_runs_once_when_two_threads_complete_the_future_at_once():
    for _ in range(200):
        _complete_from_two_threads()


def test_settle_that_raises_a_base_exception_leaves_it_in_the_future():
    def interrupted(result, exception):
        raise KeyboardInterrupt

    future = Future(interrupted)
    future.set_result(1)
    assert isinstance(future.exception(), KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        future.wait(1)


def test_wait_all_returns_values_in_order_and_raises_the_first_error():
    assert wait_all([completed(1), completed(2)]) == [1, 2]
    with pytest.raises(ValueError):
        wait_all([completed(1), failed(ValueError())])


def test_wait_all_bounds_the_whole_wait_by_its_timeout():
    with pytest.raises(TimeoutError):
        wait_all([Future(), Future()], timeout=0.05)


def test_wait_all_takes_futures_completed_one_by_one_by_another_thread_in_order():
    futures = [Future() for _ in range(1000)]

    def complete() -> None:
        for index, future in enumerate(futures):
            future.set_result(index)

    threading.Thread(target=complete).start()
    assert wait_all(futures, timeout=10) == list(range(1000))


def test_wait_all_raises_a_failure_it_finds_without_waiting_for_what_follows():
    with pytest.raises(ValueError):
        wait_all([failed(ValueError()), Future()])  # the second never completes


def test_wait_all_raises_the_first_error_in_order_once_the_futures_before_it_are_done():
    first, second, third = Future(), Future(), Future()

    def complete() -> None:
        third.set_exception(KeyError("third"))
        second.set_exception(ValueError("second"))
        first.set_result(1)

    threading.Thread(target=complete).start()
    with pytest.raises(ValueError, match="second"):
        wait_all([first, second, third], timeout=10)


def test_wait_all_leaves_no_callback_behind_when_it_times_out():
    late = Future()
    for _ in range(100):
        with pytest.raises(FutureTimeoutError, match="within 0.01s"):
            wait_all([late], timeout=0.01)
    assert late._callbacks == []
    late.set_result(1)
    assert wait_all([late]) == [1]


_REQUEST = contextvars.ContextVar("request", default=None)


def test_callbacks_run_in_the_context_variables_current_where_they_were_added():
    source = Future()
    seen = {}
    token = _REQUEST.set("call 1")
    try:
        source.add_done_callback(lambda f: seen.setdefault("callback", _REQUEST.get()))
        chained = source.then(lambda f: _REQUEST.get())
        inside = source.then(lambda f: source.then(lambda g: _REQUEST.get()))
        ran = []
        source.add_done_callback(ran.append)
        source.remove_done_callback(ran.append)  # found though it carries the context
    finally:
        _REQUEST.reset(token)
    outside = source.then(lambda f: _REQUEST.get())
    completer = threading.Thread(target=source.set_result, args=(1,))  # no variable set
    completer.start()
    completer.join(5)
    assert seen["callback"] == "call 1" and chained.wait(1) == "call 1"
    assert inside.wait(1).wait(1) == "call 1"  # a callback added from a callback too
    assert outside.wait(1) is None and ran == []
    assert _REQUEST.get() is None  # the completing thread's own variables are untouched


def test_a_removed_callback_does_not_run():
    ran = []
    future = Future()
    future.add_done_callback(ran.append)
    future.remove_done_callback(ran.append)
    future.set_result(1)
    assert ran == []


def test_a_callback_on_an_io_thread_that_waits_for_a_reply_raises_instead_of_hanging():
    """A reply's callbacks run on the I/O thread, through which the reply a wait there
    expects would have to come; before, such a wait (torch's
    ``fut.then(lambda f: rpc_async(...).wait())``) hung the actor for good."""
    from actors.runtime import Actor
    from tests.runtime import peers

    with Actor(name="server") as server, Actor(None, name="client") as client:
        release = threading.Event()
        server.register(peers.ECHO, lambda msg: release.wait(10) and msg.payload)
        first = client.request(server.address, peers.ECHO, 1, timeout=10)
        chained = first.then(
            lambda done: client.request(server.address, peers.ECHO, 2, timeout=10).wait())
        release.set()
        with pytest.raises(RuntimeError, match="I/O thread of actor 'client'.* then()"):
            chained.wait(10)
        # the actor serves on, and a wait elsewhere is as before
        assert client.request(server.address, peers.ECHO, 3, timeout=10).wait(10) == 3
