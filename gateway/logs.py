"""structlog set-up: JSON lines in production, the console renderer on a terminal."""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

import structlog

__all__ = ["StderrLogger", "configure_logging"]


class StderrLogger:
    """Writes each line to whatever ``sys.stderr`` is *now*.

    structlog caches a bound logger on first use; a logger holding the stream it was
    created with keeps writing to it after it is swapped (a test's capture, closed since).
    """

    _lock = threading.Lock()

    def msg(self, message: str) -> None:
        with self._lock:
            print(message, file=sys.stderr, flush=True)

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


def _stderr_logger(*_args: Any) -> StderrLogger:
    return StderrLogger()


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """The standard library's records, to the current ``sys.stderr`` too."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(fmt: str = "auto", level: str = "info") -> None:
    """``fmt``: auto (console on a TTY, else JSON) | json | console."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    numeric = logging.getLevelNamesMapping()[level.upper()]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(
        level=max(numeric, logging.WARNING), handlers=[_CurrentStderr()], force=True
    )
