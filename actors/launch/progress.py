"""What the launcher tells: one plain line per event for people, structured lines for machines.

People read ``launch: <what happened>`` on stderr, each line whole, never inside a
line of a worker's output (they share `CONSOLE_LOCK`). Programs read the same events
as key=value lines (`event='agent_round_started' rank=...`, the structlog format) in
``<log-dir>/<run id>/events.log`` when ``--log-dir`` is given; with
``ACTORGRAD_LOG_LEVEL=info`` they also go to stderr, as every library event does.
"""
from __future__ import annotations

import sys
import threading
from typing import Any, Optional

import structlog

from actors.runtime.process.log import get_logger, say

COMMAND = "launch"
_log = get_logger("actors.launch")
_render = structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "event"],
                                                 drop_missing=True)
_stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)


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
