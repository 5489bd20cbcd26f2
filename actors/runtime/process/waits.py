"""`SlowWait`: a long wait says at WARNING what it waits for, once it passes a threshold.

A job that hangs should never be silent. Any wait that can outlast a few seconds
(rendezvous, joining a world, a collective, a barrier, a store wait, the launcher)
wraps its loop in a `SlowWait`: the first report comes after
``ACTORGRAD_WAIT_WARN_AFTER`` seconds (10 by default), then one every
``ACTORGRAD_WAIT_WARN_EVERY`` seconds (30), each naming what is awaited and for how
long, e.g. ``all_reduce #57 waiting for rank 2 for 10.0 s``. ``when_due`` is pure, so
the schedule is tested without a clock; a wait loop bounds each blocking step by
`SlowWait.next_in` so that it wakes to report.

Two rules keep the reports few and in the right place. A wait entered (``with wait:``)
silences the waits made inside it on the same thread: a barrier says "3 of 4
arrived", not also which key its store waits for. And inside ``with reported_by(fn):``
a command takes the reports (`fn(what, seconds)`) to print them its own way instead
of the log.
"""
from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import Any, Callable, Iterator, Optional, Tuple

from actors.runtime.process.log import get_logger
from actors.runtime.process.settings import number_setting

AFTER_VARIABLE = "ACTORGRAD_WAIT_WARN_AFTER"
EVERY_VARIABLE = "ACTORGRAD_WAIT_WARN_EVERY"
DEFAULT_AFTER = 10.0
DEFAULT_EVERY = 30.0

_log = get_logger("actors.waits")
# Per thread: how many entered waits enclose the current code, and who takes reports.
_thread = threading.local()

Report = Callable[[Any, float], None]


def _seconds(variable: str, default: float) -> float:
    return number_setting(variable, default, float, lambda value: 0 < value < math.inf,
                          "seconds, more than 0")


def first_report_after() -> float:
    """Seconds into a wait at which its first report is due: a wait loop's first step may
    block this long before it needs a `SlowWait` at all (the common, short wait)."""
    return _seconds(AFTER_VARIABLE, DEFAULT_AFTER)


def when_due(reports: int, after: float, every: float) -> float:
    """Seconds into the wait at which report number `reports` (0 = the first) is due."""
    return after + reports * every


@contextlib.contextmanager
def reported_by(report: Report) -> Iterator[None]:
    """Inside the block, waits made on this thread report through `report(what, seconds)`
    instead of logging (`what` is what the wait's `what()` returned)."""
    previous = getattr(_thread, "report", None)
    _thread.report = report
    try:
        yield
    finally:
        _thread.report = previous


class SlowWait:
    """Reports one wait that may be long; `what()` says what it waits for, right now.

    `what` is called only when a report is due, so it may inspect live state (which
    ranks have delivered, how many nodes joined); it returns text, or an object whose
    `str` is the text. `since` is the wait's start on the monotonic clock (default:
    now). A wait made inside an entered one on the same thread is `silent`: it never
    reports and never asks its loop to wake (`next_in` is infinite). The schedule
    (`after`, `every`) is read from the environment when the wait first needs it.
    """

    def __init__(self, what: Callable[[], Any], since: Optional[float] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._what = what
        self._clock = clock
        self.since = clock() if since is None else since
        self._schedule: Optional[Tuple[float, float]] = None  # (after, every), read when needed
        self.reports = 0
        self.silent = getattr(_thread, "depth", 0) > 0
        self._report: Optional[Report] = getattr(_thread, "report", None)

    @property
    def after(self) -> float:
        """Seconds into the wait of the first report."""
        return self._due()[0]

    @property
    def every(self) -> float:
        """Seconds between two later reports."""
        return self._due()[1]

    def _due(self) -> Tuple[float, float]:
        # Read from the environment when the wait first asks, not when it starts: most
        # waits end before they ask, and a wait starts on every store quorum and every
        # step's arrival, where reading two variables would be a large share of its Python.
        if self._schedule is None:
            self._schedule = (first_report_after(), _seconds(EVERY_VARIABLE, DEFAULT_EVERY))
        return self._schedule

    def __enter__(self) -> "SlowWait":
        _thread.depth = getattr(_thread, "depth", 0) + 1
        return self

    def __exit__(self, *exc: object) -> None:
        _thread.depth -= 1

    def next_in(self) -> float:
        """Seconds until the next report is due (0 when it already is)."""
        if self.silent:
            return math.inf
        due = self.since + when_due(self.reports, *self._due())
        return max(0.0, due - self._clock())

    def tick(self) -> bool:
        """Report if a report is due; True if it did."""
        if self.silent:
            return False
        elapsed = self._clock() - self.since
        if elapsed < when_due(self.reports, *self._due()):
            return False
        self.reports += 1
        try:
            what = self._what()
        except Exception as error:  # a report must never break the wait it describes
            what = f"(could not say what: {error!r})"
        if self._report is not None:
            try:
                self._report(what, elapsed)
                return True
            except Exception:  # noqa: BLE001 - fall back to the log below
                pass
        _log.warning(f"{what} for {elapsed:.1f} s", waited_s=round(elapsed, 1))
        return True
