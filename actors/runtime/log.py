"""Structured logging for the whole code base: key=value lines by default, JSON on request.

Set ``ACTORGRAD_LOG_FORMAT=json`` for JSON lines and ``ACTORGRAD_LOG_LEVEL`` (debug,
info, warning, error) for the threshold. An application that configured structlog
itself keeps its configuration.
"""
from __future__ import annotations

import logging
import os
import sys
import threading

import structlog

_configured = False
_lock = threading.Lock()


def configure() -> None:
    """Install the default structlog pipeline once, unless the application already did."""
    global _configured
    with _lock:
        if _configured or structlog.is_configured():
            _configured = True
            return
        level_name = os.environ.get("ACTORGRAD_LOG_LEVEL", "info").upper()
        level = getattr(logging, level_name, logging.INFO)
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
            logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
            cache_logger_on_first_use=True,
        )
        _configured = True


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A structlog logger bound to `name`, with the default pipeline installed."""
    configure()
    return structlog.get_logger(name).bind(logger=name)
