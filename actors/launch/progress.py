"""What the launcher tells: one plain line per event for people, structured lines for machines.

People read ``launch: <what happened>`` on stderr, each line whole, never inside a
line of a worker's output (they share `CONSOLE_LOCK`). Programs read the same events
as key=value lines (`event='agent_round_started' rank=...`, the structlog format) in
``<log-dir>/<run id>_<random>/events.log`` (a folder per agent) with ``--log-dir``;
with ``ACTORGRAD_LOG_LEVEL=info`` they also go to stderr, as every library event does.
"""
from __future__ import annotations

import sys
import threading
from typing import Any, Optional

import structlog

from actors.runtime.process.log import get_logger, say
from store.elastic.waiting import JoinWait, clock_time

COMMAND = "launch"
_log = get_logger("actors.launch")
_render = structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "event"],
                                                 drop_missing=True)
_stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)


def waiting_text(what: Any, seconds: float) -> str:
    """The line a person reads while the agent waits (for a rendezvous, at the exit
    barrier), from what the wait reports, e.g.
    ``waiting for nodes: 1 of 2 joined (min 2) for 10 s``."""
    if isinstance(what, JoinWait):
        if what.complete and what.on_wait_list:
            text = (f"waiting for the next round: round {what.round} runs with "
                    f"{what.joined} node{'s' if what.joined != 1 else ''}")
        elif what.complete:
            text = (f"waiting for a place: round {what.round} is full "
                    f"({what.joined} of {what.max_nodes} nodes)")
        elif what.last_call_ends is not None:
            text = (f"waiting for more nodes until {clock_time(what.last_call_ends)}, "
                    f"then starting with {what.joined} of {what.max_nodes} "
                    f"(min {what.min_nodes})")
        else:
            text = (f"waiting for nodes: {what.joined} of {what.max_nodes} joined "
                    f"(min {what.min_nodes})")
    else:
        text = str(what)
    return f"{text} for {seconds:.0f} s"


class Progress:
    """The launcher's events: `tell` prints a line for people and records the structured
    event, at its `level`, in `events_path` (if any), and in the log at info level."""

    def __init__(self, events_path: Optional[str] = None):
        self.events_path = events_path
        self._lock = threading.Lock()

    def tell(self, text: Optional[str], event: str, level: str = "info", **fields: Any) -> None:
        """Say `text` (None: nothing for people) and record `event` with its fields."""
        if text is not None:
            say(COMMAND, text, sys.stderr)
        _log.info(event, **fields)  # shown at ACTORGRAD_LOG_LEVEL=info; the line above is enough
        if self.events_path is not None:
            line = _render(None, level, _stamp(None, level, {"event": event, "level": level,
                                                            **fields}))
            with self._lock, open(self.events_path, "a", encoding="utf-8") as out:
                out.write(line + "\n")

    def waiting(self, what: Any, seconds: float) -> None:
        """A long wait's report (`actors.runtime.process.waits.reported_by`): a line for
        people and an `agent_waiting` warning event."""
        self.tell(waiting_text(what, seconds), "agent_waiting", "warning",
                  waiting_for=str(what), waited_s=round(seconds, 1))
