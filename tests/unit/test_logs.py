"""Log lines go to the stderr of the moment, even from loggers cached earlier."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator

import pytest
import structlog

from gateway.logs import configure_logging


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def test_a_cached_logger_follows_stderr_after_the_old_one_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging("json", "info")
    log = structlog.get_logger("test.logs")
    log.info("first.line")
    first.close()  # e.g. the capture of a test that has ended
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    log.info("second.line")
    logging.getLogger("test.stdlib").warning("stdlib line")
    out = second.getvalue()
    assert '"event": "second.line"' in out
    assert "stdlib line" in out
