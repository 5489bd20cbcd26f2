"""A long wait reports what it waits for: first after the threshold, then at a fixed period."""
import pytest
import structlog

from actors.runtime.introspection.recorder import _size as recorder_size
from actors.runtime.process.waits import SlowWait, first_report_after, reported_by, when_due

pytestmark = pytest.mark.timeout(30)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_reports_are_due_at_the_threshold_then_every_period():
    assert [when_due(n, after=10, every=30) for n in range(3)] == [10, 40, 70]


def test_a_wait_reports_once_past_the_threshold_then_each_period(monkeypatch):
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "10")
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_EVERY", "30")
    clock, waiting_for = Clock(), ["rank 2"]
    wait = SlowWait(lambda: f"all_reduce #57 waiting for {waiting_for[0]}", clock=clock)
    with structlog.testing.capture_logs() as logs:
        clock.now += 9.9
        assert not wait.tick()
        assert wait.next_in() == pytest.approx(0.1)
        clock.now += 0.1
        assert wait.tick() and not wait.tick()
        waiting_for[0] = "ranks 2, 3"
        clock.now += 30
        assert wait.tick()
    assert [(e["log_level"], e["event"]) for e in logs] == [
        ("warning", "all_reduce #57 waiting for rank 2 for 10.0 s"),
        ("warning", "all_reduce #57 waiting for ranks 2, 3 for 40.0 s")]


def test_a_failing_description_does_not_break_the_wait(monkeypatch):
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "1")
    clock = Clock()
    wait = SlowWait(lambda: 1 / 0, clock=clock)
    clock.now += 1
    with structlog.testing.capture_logs() as logs:
        assert wait.tick()
    assert "ZeroDivisionError" in logs[0]["event"]


def test_bad_settings_fall_back_to_the_defaults(monkeypatch):
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "soon")
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_EVERY", "-1")
    wait = SlowWait(str)
    assert (wait.after, wait.every) == (10.0, 30.0)


def test_the_schedule_is_read_when_the_wait_first_asks_for_it(monkeypatch):
    # Waits start on every store quorum and every step's arrival, and most end before
    # they ask: the settings are read then, so the schedule is the one in force then.
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "10")
    clock = Clock()
    wait = SlowWait(lambda: "store quorum 'c/3'", clock=clock)
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "1")
    clock.now += 1.5
    with structlog.testing.capture_logs() as logs:
        assert wait.tick()
    assert [e["event"] for e in logs] == ["store quorum 'c/3' for 1.5 s"]
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "100")  # read once per wait
    assert wait.after == 1.0


def test_a_wait_inside_an_entered_one_stays_silent(monkeypatch):
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "1")
    clock = Clock()
    with SlowWait(lambda: "store barrier 'x': 3 of 4 arrived", clock=clock) as outer:
        inner = SlowWait(lambda: "store wait for key 'x/open'", clock=clock)
        clock.now += 5
        with structlog.testing.capture_logs() as logs:
            assert inner.next_in() == float("inf") and not inner.tick()
            assert outer.tick()
    assert [e["event"] for e in logs] == ["store barrier 'x': 3 of 4 arrived for 5.0 s"]
    assert not SlowWait(str, clock=clock).silent  # the outer one was left


def test_a_command_takes_the_reports_instead_of_the_log(monkeypatch):
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "1")
    clock, told = Clock(), []
    with reported_by(lambda what, seconds: told.append((what, seconds))):
        wait = SlowWait(lambda: ("nodes", 1, 2), clock=clock)
    clock.now += 1.5
    with structlog.testing.capture_logs() as logs:
        assert wait.tick()
    assert told == [(("nodes", 1, 2), 1.5)] and logs == []


@pytest.mark.parametrize("variable, value, read", [
    ("ACTORGRAD_WAIT_WARN_AFTER", "0", lambda: first_report_after()),
    ("ACTORGRAD_WAIT_WARN_AFTER", "ten", lambda: first_report_after()),
    ("ACTORGRAD_FLIGHT_RECORDER_SIZE", "1e3", lambda: recorder_size()),
    ("ACTORGRAD_FLIGHT_RECORDER_SIZE", "-5", lambda: recorder_size()),
])
def test_a_setting_that_does_not_read_as_one_gives_the_default_with_one_warning(
        monkeypatch, variable, value, read):
    monkeypatch.setenv(variable, value)
    with structlog.testing.capture_logs() as logs:
        default = read()
        assert read() == default  # read on every wait: it warns once
    assert default == {"ACTORGRAD_WAIT_WARN_AFTER": 10.0,
                       "ACTORGRAD_FLIGHT_RECORDER_SIZE": 4096}[variable]
    warned = [entry for entry in logs if entry["event"] == "setting_ignored"]
    assert [(w["variable"], w["value"], w["log_level"]) for w in warned] == \
        [(variable, value, "warning")]
