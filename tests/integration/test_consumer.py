"""The stream consumer on a real Redis: entries for work already under way."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import redis.asyncio as aioredis

from gateway.store import ConsumerGroup
from gateway.workers.consumer import StreamConsumer


class OneAtATime(StreamConsumer):
    """Handles entries keyed by ``k``; an entry whose key is being handled is busy."""

    def __init__(self, group: ConsumerGroup) -> None:
        super().__init__(group, concurrency=4, claim_idle=30.0, read_block_ms=20)
        self.active: set[bytes] = set()
        self.handled: list[str] = []
        self.first_may_end = asyncio.Event()

    def busy(self, entry_id: str, fields: Mapping[bytes, bytes]) -> bool:
        return fields[b"k"] in self.active

    async def handle(self, entry_id: str, fields: Mapping[bytes, bytes]) -> None:
        key = fields[b"k"]
        self.active.add(key)
        try:
            if not self.handled:
                await self.first_may_end.wait()
            self.handled.append(entry_id)
            await self.group.ack(entry_id)
        finally:
            self.active.discard(key)


async def test_an_entry_read_while_its_work_is_busy_starts_when_it_is_free(
    redis: aioredis.Redis,
) -> None:
    """A thread's new ready entry can arrive just after its owner released it, while the
    owner's task is still ending: it must run right after, not wait for a claim (the
    claim comes only after ``claim_idle``, 30 s here)."""
    group = ConsumerGroup(redis, "test:ready", "workers")
    consumer = OneAtATime(group)
    first = await redis.xadd("test:ready", {"k": "thread-a"})
    running = asyncio.create_task(consumer.run())
    try:
        while not consumer.active:
            await asyncio.sleep(0.01)
        second = await redis.xadd("test:ready", {"k": "thread-a"})
        await asyncio.sleep(0.2)  # read meanwhile, and held: its thread is busy
        assert consumer.handled == []
        consumer.first_may_end.set()
        async with asyncio.timeout(2):
            while len(consumer.handled) < 2:
                await asyncio.sleep(0.01)
        assert consumer.handled == [first.decode(), second.decode()]
        assert (await redis.xpending("test:ready", "workers"))["pending"] == 0
    finally:
        consumer.stop()
        await running
