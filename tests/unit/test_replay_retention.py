"""Retention of the raw-delivery stream by count and by age (real Redis)."""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis

from gateway.store import Store
from gateway.store.raw import raw_min_id, trim_raw
from gateway.workers.retention import RawRetention

KEY = "mel:raw"
DAY_MS = 86_400_000


async def fill(redis: aioredis.Redis, ages_in_days: list[float]) -> None:
    now_ms = int(time.time() * 1000)
    for i, age in enumerate(sorted(ages_in_days, reverse=True)):
        await redis.xadd(KEY, {"meta": "{}", "body": b""}, id=f"{now_ms - int(age * DAY_MS)}-{i}")


async def test_age_limit_removes_what_is_older(redis: aioredis.Redis) -> None:
    await fill(redis, [40, 31, 29, 1, 0])
    removed = await trim_raw(redis, KEY, max_count=None, max_age_days=30)
    assert removed == 2
    assert await redis.xlen(KEY) == 3


async def test_count_limit_keeps_the_newest(redis: aioredis.Redis) -> None:
    await fill(redis, [5, 4, 3, 2, 1])
    newest = [e[0] for e in await redis.xrange(KEY)][-2:]
    assert await trim_raw(redis, KEY, max_count=2, max_age_days=None) == 3
    assert [e[0] for e in await redis.xrange(KEY)] == newest


async def test_both_limits_apply_and_nothing_is_a_no_op(redis: aioredis.Redis) -> None:
    await fill(redis, [10, 3, 2, 1])
    assert await trim_raw(redis, KEY, max_count=2, max_age_days=7) == 2
    assert await trim_raw(redis, KEY, max_count=None, max_age_days=None) == 0
    assert await trim_raw(redis, "mel:nothing", max_count=5, max_age_days=1) == 0


def test_min_id() -> None:
    assert raw_min_id(1, now=2 * 86400) == "86400000-0"
    assert raw_min_id(10, now=0) == "0-0"


async def test_the_job_trims_periodically_until_stopped(redis: aioredis.Redis) -> None:
    job = RawRetention(Store(redis, "mel"), max_count=1, max_age_days=None, interval=0.05)
    task = asyncio.create_task(job.run())
    try:
        await fill(redis, [3, 2, 1])
        for _ in range(100):
            if await redis.xlen(KEY) == 1:
                break
            await asyncio.sleep(0.02)
        assert await redis.xlen(KEY) == 1
    finally:
        job.stop()
        await asyncio.wait_for(task, 1)
