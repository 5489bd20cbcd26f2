"""Structured logging for the whole code base: key=value lines by default, JSON on request.

Quiet by default, as torch is: events below WARNING are dropped; what a person
needs to see (the launcher's progress, where a worker or a store server listens) the
commands print as plain lines instead (`say`). ``ACTORGRAD_LOG_LEVEL`` (debug, info,
warning, error) sets the threshold; ``ACTORGRAD_LOG_FORMAT=json`` gives JSON lines.
An application that configured structlog itself keeps its configuration.

Every line this process writes to its console through `say`, `write_line` or a log
event is written whole under one lock, so lines from several threads (the launcher's
own and the copies of its workers' output) never run into each other.

structlog is imported at the first event that passes the threshold, not at import:
most processes log nothing at the default threshold, and importing structlog is a
large part of every worker's start-up (docs/PERFORMANCE.md, "Start-up").
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from typing import IO, Any, Optional

LEVEL_VARIABLE = "ACTORGRAD_LOG_LEVEL"

_configured = False
_ours: Optional[bool] = None  # whether the pipeline in use is ours; None: none installed yet
_threshold: Optional[int] = None
_lock = threading.Lock()
# Held while one whole line goes to this process's stdout or stderr.
CONSOLE_LOCK = threading.Lock()


def write_line(stream: Optional[IO[str]], line: str) -> None:
    """Write `line` and its newline to `stream` in one piece, flushed; a closed stream is
    skipped (at interpreter exit, or when our own console went away)."""
    with CONSOLE_LOCK:
        try:
            stream.write(line + "\n")
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


def say(command: str, text: str, stream: Optional[IO[str]] = None) -> None:
    """One plain progress line for people, ``<command>: <text>``, on stderr by default."""
    write_line(stream if stream is not None else sys.stderr, f"{command}: {text}")


def threshold() -> int:
    """The lowest level this process logs at (``ACTORGRAD_LOG_LEVEL``; WARNING by default)."""
    global _threshold
    if _threshold is None:
        level = getattr(logging, os.environ.get(LEVEL_VARIABLE, "").upper() or "-", None)
        _threshold = level if isinstance(level, int) else logging.WARNING
    return _threshold


def configure() -> None:
    """Install the default structlog pipeline once, unless the application already did."""
    global _configured, _ours
    import structlog

    with _lock:
        if _configured or structlog.is_configured():
            _configured = True
            _ours = bool(_ours)
            return
        level = threshold()
        if os.environ.get("ACTORGRAD_LOG_FORMAT", "").lower() == "json":
            renderer = structlog.processors.JSONRenderer()
        else:
            renderer = structlog.processors.KeyValueRenderer(
                key_order=["timestamp", "level", "event"], drop_missing=True
            )
        structlog.configure(
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.format_exc_info,
                renderer,
            ],
            wrapper_class=structlog.make_filtering_bound_logger(level),
            logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),
            cache_logger_on_first_use=True,
        )
        _configured = _ours = True


def _passes(level: int) -> bool:
    """Whether an event at `level` goes to structlog: at or above our threshold, or
    always when the application configured structlog itself (its filter decides)."""
    if level >= threshold():
        return True
    if _ours is None:  # not configured yet: an application's own configuration counts
        # getattr: another thread may be importing structlog right now.
        is_configured = getattr(sys.modules.get("structlog"), "is_configured", None)
        return is_configured is not None and is_configured()
    return not _ours


class Logger:
    """A logger bound to `name`, with structlog's methods: an event below the threshold
    costs a comparison; the first one that passes installs the default pipeline."""

    __slots__ = ("name", "_bound")

    def __init__(self, name: str) -> None:
        self.name = name
        self._bound: Any = None

    def _emit(self, level: int, method: str, event: str, fields: dict) -> None:
        if not _passes(level):
            return
        if self._bound is None:
            import structlog

            configure()
            self._bound = structlog.get_logger(self.name).bind(logger=self.name)
        getattr(self._bound, method)(event, **fields)

    def debug(self, event: str, **fields: Any) -> None:
        self._emit(logging.DEBUG, "debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit(logging.INFO, "info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit(logging.WARNING, "warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit(logging.ERROR, "error", event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        """An ERROR event with the exception being handled."""
        self._emit(logging.ERROR, "exception", event, fields)


def get_logger(name: str) -> Logger:
    """The logger bound to `name` (structlog's methods and pipeline)."""
    return Logger(name)


class _CurrentStderr:
    """`sys.stderr` as it is at each write, a whole line at a time (structlog prints an
    event and its newline in two writes). A line from a daemon thread after the stream
    was closed (at interpreter exit) is dropped: logging must never raise there."""

    def __init__(self) -> None:
        self._pending = threading.local()

    def write(self, text: str) -> int:
        pending = getattr(self._pending, "text", "") + text
        line, newline, rest = pending.rpartition("\n")
        self._pending.text = rest
        if newline:
            write_line(sys.stderr, line)
        return len(text)

    def flush(self) -> None:
        pass  # write_line flushes each whole line
