"""Retention of the raw-delivery stream: bodies hold personal data, so they do not stay.

Two limits, both applied by :func:`trim_raw`: at most ``MEL_RAW_RETENTION_COUNT``
entries (``XTRIM MAXLEN``) and nothing older than ``MEL_RAW_RETENTION_DAYS`` days
(``XTRIM MINID``: a stream id starts with the time it was added, in ms).
:func:`run_retention` applies them every ``interval`` seconds until cancelled.
"""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis
import structlog

from gateway.store.threads import StoreDown

__all__ = ["raw_min_id", "run_retention", "trim_raw"]

log = structlog.get_logger("gateway.workers.retention")


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
    if max_age_days:
        removed += int(
            await redis.xtrim(key, minid=raw_min_id(max_age_days, now=now), approximate=False)
        )
    if max_count:
        removed += int(await redis.xtrim(key, maxlen=max_count, approximate=False))
    return removed


async def run_retention(
    redis: aioredis.Redis,
    key: str,
    *,
    max_count: int | None,
    max_age_days: float | None,
    interval: float = 3600.0,
) -> None:
    """Trim now and then every ``interval`` seconds, until cancelled; survives Redis
    outages (logs and tries again at the next tick)."""
    while True:
        try:
            removed = await trim_raw(redis, key, max_count=max_count, max_age_days=max_age_days)
        except StoreDown as exc:
            log.warning("retention.redis_unavailable", error=str(exc))
        except Exception as exc:  # a bad answer must not kill the loop
            log.error("retention.failed", error=f"{type(exc).__name__}: {exc}")
        else:
            if removed:
                log.info("retention.trimmed", key=key, removed=removed)
        await asyncio.sleep(interval)
