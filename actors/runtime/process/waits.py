"""`SlowWait`: a long wait says at WARNING what it waits for, once it passes a threshold.

A job that hangs should never be silent. Any wait that can outlast a few seconds
(rendezvous, joining a world, a collective, a barrier, a store wait, the launcher)
wraps its loop in a `SlowWait`: the first report comes after
``ACTORGRAD_WAIT_WARN_AFTER`` seconds (10 by default), then one every
``ACTORGRAD_WAIT_WARN_EVERY`` seconds (30), each naming what is awaited and for how
long, e.g. ``all_reduce #57 waiting for rank 2 for 10.0 s``. ``when_due`` is pure, so
the schedule is tested without a clock; a wait loop bounds each blocking step by
`SlowWait.next_in` so that it wakes to report.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Optional

from actors.runtime.process.log import get_logger

AFTER_VARIABLE = "ACTORGRAD_WAIT_WARN_AFTER"
EVERY_VARIABLE = "ACTORGRAD_WAIT_WARN_EVERY"
DEFAULT_AFTER = 10.0
DEFAULT_EVERY = 30.0

_log = get_logger("actors.waits")


def _seconds(variable: str, default: float) -> float:
    try:
        value = float(os.environ.get(variable, default))
    except ValueError:
        return default
    return value if value > 0 else default


def when_due(reports: int, after: float, every: float) -> float:
    """Seconds into the wait at which report number `reports` (0 = the first) is due."""
    return after + reports * every


class SlowWait:
    """Reports one wait that may be long; `what()` says what it waits for, right now.

    `what` is called only when a report is due, so it may inspect live state (which
    ranks have delivered, how many nodes joined). `since` is the wait's start on the
    monotonic clock (default: now).
    """

    def __init__(self, what: Callable[[], str], since: Optional[float] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._what = what
        self._clock = clock
        self.since = clock() if since is None else since
        self.after = _seconds(AFTER_VARIABLE, DEFAULT_AFTER)
        self.every = _seconds(EVERY_VARIABLE, DEFAULT_EVERY)
        self.reports = 0

    def next_in(self) -> float:
        """Seconds until the next report is due (0 when it already is)."""
        due = self.since + when_due(self.reports, self.after, self.every)
        return max(0.0, due - self._clock())

    def tick(self) -> bool:
        """Log the report if one is due; True if it logged."""
        elapsed = self._clock() - self.since
        if elapsed < when_due(self.reports, self.after, self.every):
            return False
        self.reports += 1
        try:
            what = self._what()
        except Exception as error:  # a report must never break the wait it describes
            what = f"(could not say what: {error!r})"
        _log.warning(f"{what} for {elapsed:.1f} s", waited_s=round(elapsed, 1))
        return True
