"""Time as the gateway writes it: ISO-8601 UTC with milliseconds, and Unix milliseconds."""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = ["now_ms", "parse_iso", "utc_now_iso"]


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_ms() -> int:
    return int(time.time() * 1000)


def parse_iso(value: str) -> datetime:
    """An ISO timestamp (``Z`` or an offset) as an aware datetime; ``ValueError`` if bad."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
