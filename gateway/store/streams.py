"""Consumer groups on the gateway's streams (the ready queue, the event log): what a
stream consumer needs — create the group, read new entries, claim abandoned ones, keep
its own fresh, acknowledge, trim."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from gateway.store._codec import as_str
from gateway.store.errors import StoreError, translates_redis_errors

__all__ = ["ConsumerGroup", "Entry", "NoGroup"]

Entry = tuple[str, Mapping[bytes, bytes]]
"""A stream entry: its id and its fields (empty when it was trimmed away)."""


class NoGroup(StoreError):
    """The group (or its stream) is gone, e.g. after a FLUSHALL: create it again."""


def _no_group(exc: ResponseError) -> bool:
    return "NOGROUP" in str(exc)


@translates_redis_errors
class ConsumerGroup:
    """The group ``group`` on the stream ``stream``.

    ``start``: where a new group begins reading — ``"0"`` (everything in the stream) or
    ``"$"`` (only what is added from now on).
    """

    def __init__(self, redis: aioredis.Redis, stream: str, group: str, start: str = "0") -> None:
        self.redis = redis
        self.stream = stream
        self.group = group
        self.start = start

    async def ensure(self) -> None:
        """Create the group (and the stream) unless it exists."""
        try:
            await self.redis.xgroup_create(self.stream, self.group, id=self.start, mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def exists(self) -> bool:
        try:
            groups: Any = await self.redis.xinfo_groups(self.stream)
        except ResponseError:  # no stream yet
            return False
        return any(as_str(g["name"]) == self.group for g in groups)

    async def read(self, consumer: str, count: int, block_ms: int) -> list[Entry]:
        """New entries for ``consumer`` (blocks up to ``block_ms``)."""
        try:
            res: Any = await self.redis.xreadgroup(
                self.group, consumer, {self.stream: ">"}, count=count, block=block_ms
            )
        except ResponseError as exc:
            if _no_group(exc):
                raise NoGroup(str(exc)) from None
            raise
        return [(as_str(eid), fields) for _stream, batch in res or [] for eid, fields in batch]

    async def claim_idle(self, consumer: str, min_idle_ms: int, count: int) -> list[Entry]:
        """Entries another (dead) consumer left pending for ``min_idle_ms``, now ours."""
        try:
            res: Any = await self.redis.xautoclaim(
                self.stream, self.group, consumer, min_idle_ms, "0-0", count=count
            )
        except ResponseError as exc:
            if _no_group(exc):
                raise NoGroup(str(exc)) from None
            raise
        return [(as_str(eid), fields or {}) for eid, fields in (res[1] if res else [])]

    async def touch(self, consumer: str, ids: Sequence[str]) -> None:
        """Reset the idle time of entries we are still working on, so nobody claims them."""
        if not ids:
            return
        try:
            await self.redis.xclaim(self.stream, self.group, consumer, 0, list(ids), justid=True)
        except ResponseError as exc:
            if _no_group(exc):
                raise NoGroup(str(exc)) from None
            raise

    async def ack(self, *ids: str) -> None:
        if ids:
            await self.redis.xack(self.stream, self.group, *ids)

    async def stats(self) -> tuple[int, int, float]:
        """(entries in the stream, delivered but unacknowledged, age in s of the oldest)."""
        try:
            summary: Any = await self.redis.xpending(self.stream, self.group)
        except ResponseError:
            return 0, 0, 0.0
        length = await self.redis.xlen(self.stream)
        lag = 0.0
        if summary["pending"]:
            oldest_ms = int(as_str(summary["min"]).split("-")[0])
            lag = max(0.0, time.time() - oldest_ms / 1000)
        return int(length), int(summary["pending"]), lag

    async def trim_acknowledged(self) -> None:
        """Drop entries older than the oldest one still pending (all of them acknowledged
        or trimmed). For a stream only this group reads."""
        summary: Any = await self.redis.xpending(self.stream, self.group)
        if summary["pending"]:
            min_id = as_str(summary["min"])
        else:
            groups: Any = await self.redis.xinfo_groups(self.stream)
            last = next(
                (g["last-delivered-id"] for g in groups if as_str(g["name"]) == self.group), None
            )
            if last is None:
                return
            ms, seq = as_str(last).split("-")
            min_id = f"{ms}-{int(seq) + 1}"
        await self.redis.xtrim(self.stream, minid=min_id, approximate=True)
