"""Retention of the raw-delivery stream (``P:raw``): bodies hold personal data, so they
do not stay. Two limits: at most ``MEL_RAW_RETENTION_COUNT`` entries (``XTRIM MAXLEN``)
and nothing older than ``MEL_RAW_RETENTION_DAYS`` days (``XTRIM MINID``: a stream id
starts with the time it was added, in ms)."""

from __future__ import annotations

import time

import redis.asyncio as aioredis

from gateway.store.errors import REDIS_DOWN, StoreDown

__all__ = ["raw_min_id", "trim_raw"]


def raw_min_id(max_age_days: float, *, now: float | None = None) -> str:
    """The oldest stream id to keep for an age limit: ``<ms>-0``."""
    now = time.time() if now is None else now
    return f"{max(0, int((now - max_age_days * 86400) * 1000))}-0"


async def trim_raw(
    redis: aioredis.Redis,
    key: str,
    *,
    max_count: int | None,
    max_age_days: float | None,
    now: float | None = None,
) -> int:
    """Apply both limits to the stream at ``key``; the number of entries removed.

    ``None`` (or 0) disables a limit. Trimming is exact (not ``~``): it runs rarely, and
    an operator who asked for N days should not find N days and a bit.
    """
    removed = 0
    try:
        if max_age_days:
            minid = raw_min_id(max_age_days, now=now)
            removed += int(await redis.xtrim(key, minid=minid, approximate=False))
        if max_count:
            removed += int(await redis.xtrim(key, maxlen=max_count, approximate=False))
    except REDIS_DOWN as exc:
        raise StoreDown(f"Redis unavailable: {exc}") from exc
    return removed
