"""The event log (``P:events``) and each session's list of its event ids."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis

from events import Payload
from gateway.clock import utc_now_iso
from gateway.store._codec import as_str, dumps
from gateway.store.errors import translates_redis_errors
from gateway.store.keys import Keys
from gateway.store.scripts import Scripts

__all__ = ["EventLog", "encode_events", "envelope"]


def envelope(event_id: str, fields: Mapping[Any, Any]) -> dict[str, Any]:
    """The JSON envelope of one event: ``{id, type, at, thread_id, session_id, data}``."""
    f = {as_str(a): as_str(b) for a, b in fields.items()}
    return {
        "id": event_id,
        "type": f.get("type", ""),
        "at": f.get("at", ""),
        "thread_id": f.get("thread_id", ""),
        "session_id": f.get("session_id") or None,
        "data": json.loads(f["data"]) if f.get("data") else {},
    }


def encode_events(events: Sequence[Payload]) -> list[list[str]]:
    """``[[type, data json], …]``, as the scripts take them."""
    return [[e.TYPE, dumps(e.data())] for e in events]


@translates_redis_errors
class EventLog:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        scripts: Scripts,
        maxlen: int,
        session_ttl: int = 0,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.scripts = scripts
        self.maxlen = maxlen
        self.session_ttl = session_ttl

    async def publish(self, thread_id: str, session_id: str, *events: Payload) -> list[str]:
        """Append events outside a turn, in one atomic step; their ids. With a session id
        they join that session's evidence list too."""
        res: Any = await self.scripts.run(
            "publish",
            [self.keys.events, self.keys.session_events(session_id) if session_id else ""],
            [
                self.maxlen,
                utc_now_iso(),
                thread_id,
                session_id,
                dumps(encode_events(events)),
                self.session_ttl,
            ],
        )
        return [as_str(i) for i in res]

    async def read(
        self, after: str = "0-0", *, count: int = 100, block_ms: int | None = None
    ) -> list[dict[str, Any]]:
        """Envelopes after a stream id (exclusive), oldest first."""
        res: Any = await self.redis.xread({self.keys.events: after}, count=count, block=block_ms)
        out: list[dict[str, Any]] = []
        for _stream, entries in res or []:
            out.extend(envelope(as_str(eid), fields) for eid, fields in entries)
        return out

    async def last_id(self) -> str:
        """The newest event's id ("0-0" when there is none): where a live reader starts."""
        last: Any = await self.redis.xrevrange(self.keys.events, count=1)
        return as_str(last[0][0]) if last else "0-0"

    async def by_id(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Envelopes for the given ids (those trimmed away are skipped)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for event_id in ids:
                pipe.xrange(self.keys.events, event_id, event_id)
            found: list[Any] = await pipe.execute()
        return [envelope(as_str(e[0][0]), e[0][1]) for e in found if e]

    async def session_ids(self, session_id: str) -> list[str]:
        """The ids of a session's events, in order."""
        raw = await self.redis.lrange(self.keys.session_events(session_id), 0, -1)
        return [as_str(i) for i in raw]
