"""Structured logging for the whole code base: key=value lines by default, JSON on request.

Quiet by default, as torch is: library events below WARNING are dropped, except the
progress of the launcher and of the worker command (`PROGRESS_LOGGERS`: rounds,
restarts, workers started and stopped, a worker serving). ``ACTORGRAD_LOG_LEVEL``
(debug, info, warning, error) sets one threshold for everything instead;
``ACTORGRAD_LOG_FORMAT=json`` gives JSON lines. An application that configured
structlog itself keeps its configuration.
"""
from __future__ import annotations

import logging
import os
import sys
import threading

import structlog

LEVEL_VARIABLE = "ACTORGRAD_LOG_LEVEL"
# Whose info events are shown without a level set: what the launcher is doing.
PROGRESS_LOGGERS = ("actors.launch", "actors.worker")

_configured = False
_lock = threading.Lock()


def configure() -> None:
    """Install the default structlog pipeline once, unless the application already did."""
    global _configured
    with _lock:
        if _configured or structlog.is_configured():
            _configured = True
            return
        level_name = os.environ.get(LEVEL_VARIABLE, "").upper()
        level = getattr(logging, level_name, None) if level_name else None
        quiet = [] if isinstance(level, int) else [_drop_quiet_events]
        if os.environ.get("ACTORGRAD_LOG_FORMAT", "").lower() == "json":
            renderer = structlog.processors.JSONRenderer()
        else:
            renderer = structlog.processors.KeyValueRenderer(
                key_order=["timestamp", "level", "event"], drop_missing=True
            )
        structlog.configure(
            processors=[
                *quiet,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.format_exc_info,
                renderer,
            ],
            wrapper_class=structlog.make_filtering_bound_logger(
                level if isinstance(level, int) else logging.INFO),
            logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),
            cache_logger_on_first_use=True,
        )
        _configured = True


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A structlog logger bound to `name`, with the default pipeline installed."""
    configure()
    return structlog.get_logger(name).bind(logger=name)


def _drop_quiet_events(logger: object, method: str, event: dict) -> dict:
    if method in ("debug", "info") and not str(event.get("logger", "")).startswith(
            PROGRESS_LOGGERS):
        raise structlog.DropEvent
    return event


class _CurrentStderr:
    """`sys.stderr` as it is at each write. A line from a daemon thread after the stream
    was closed (at interpreter exit) is dropped: logging must never raise there."""

    def write(self, text: str) -> int:
        try:
            return sys.stderr.write(text)
        except (AttributeError, OSError, ValueError):
            return 0

    def flush(self) -> None:
        try:
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):
            pass
