"""Structured logging for the whole code base: key=value lines by default, JSON on request.

Quiet by default, as torch is: events below WARNING are dropped; what a person
needs to see (the launcher's progress, where a worker or a store server listens) the
commands print as plain lines instead (`say`). ``ACTORGRAD_LOG_LEVEL`` (debug, info,
warning, error) sets the threshold; ``ACTORGRAD_LOG_FORMAT=json`` gives JSON lines.
An application that configured structlog itself keeps its configuration.

Every line this process writes to its console through `say`, `write_line` or a log
event is written whole under one lock, so lines from several threads (the launcher's
own and the copies of its workers' output) never run into each other.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from typing import IO, Optional

import structlog

LEVEL_VARIABLE = "ACTORGRAD_LOG_LEVEL"

_configured = False
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


def configure() -> None:
    """Install the default structlog pipeline once, unless the application already did."""
    global _configured
    with _lock:
        if _configured or structlog.is_configured():
            _configured = True
            return
        level_name = os.environ.get(LEVEL_VARIABLE, "").upper()
        level = getattr(logging, level_name, None) if level_name else None
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
            wrapper_class=structlog.make_filtering_bound_logger(
                level if isinstance(level, int) else logging.WARNING),
            logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),
            cache_logger_on_first_use=True,
        )
        _configured = True


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A structlog logger bound to `name`, with the default pipeline installed."""
    configure()
    return structlog.get_logger(name).bind(logger=name)


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
