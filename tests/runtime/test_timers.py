"""`Timers`, the I/O thread's timer heap: what is due, in what order, and how long the
loop may sleep."""
import pytest

from actors.runtime.io.timers import Timers

pytestmark = pytest.mark.timeout(10)


def test_due_timers_come_earliest_first_and_equal_deadlines_in_the_order_they_were_set():
    timers = Timers()
    late = timers.add(-1.0, print, ("late",))
    early = timers.add(-2.0, print, ("early",))
    first_of_two, second_of_two = (timers.add(-1.5, print, (name,)) for name in "ab")
    timers.add(60.0, print, ("not yet",))
    assert timers.due() == [early, first_of_two, second_of_two, late]
    assert timers.due() == []


def test_a_cancelled_timer_is_never_due():
    timers = Timers()
    cancelled, kept = timers.add(-1.0, print, ()), timers.add(-1.0, print, ())
    cancelled.cancel()
    assert timers.due() == [kept]


def test_the_loop_sleeps_until_the_next_timer_at_most_a_minute_and_forever_without_one():
    timers = Timers()
    assert timers.sleep_ms() is None
    timers.add(1e9, print, ())  # a wait "forever": ZeroMQ's poll takes a C int
    assert timers.sleep_ms() == 60_000
    timers.add(0.5, print, ())
    assert 0 < timers.sleep_ms() <= 501
    timers.add(-5.0, print, ())
    assert timers.sleep_ms() == 0
    timers.clear()
    assert timers.sleep_ms() is None


def test_a_nan_delay_is_refused_and_the_heap_keeps_its_order():
    timers = Timers()
    with pytest.raises(ValueError, match="nan"):
        timers.add(float("nan"), print, ())
    soon = timers.add(-1.0, print, ())
    assert timers.due() == [soon] and timers.sleep_ms() is None
