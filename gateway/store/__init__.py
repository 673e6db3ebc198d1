"""The Redis adapter: every key, script and stream the gateway uses.

:class:`Store` bundles the parts on one client: ``threads`` (the hot path of a thread),
``ingest`` (webhook deliveries), ``events`` (the event log), consumer groups on the
streams, and ``psychologist`` storage (``gateway.store.psychologist``). Every public
coroutine raises :class:`StoreDown` when Redis cannot be reached.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from gateway.store._codec import as_str
from gateway.store.errors import (
    ActionRefused,
    LeaseLost,
    StoreDown,
    StoreError,
    translates_redis_errors,
)
from gateway.store.events import EventLog, envelope
from gateway.store.ingest import Ingest, Intake
from gateway.store.keys import Keys
from gateway.store.scripts import Scripts
from gateway.store.streams import ConsumerGroup, Entry, NoGroup
from gateway.store.threads import READY_GROUP, LoadedThread, ThreadStore

__all__ = [
    "READY_GROUP",
    "ActionRefused",
    "ConsumerGroup",
    "Entry",
    "EventLog",
    "Ingest",
    "Intake",
    "Keys",
    "LeaseLost",
    "LoadedThread",
    "NoGroup",
    "Store",
    "StoreDown",
    "StoreError",
    "ThreadStore",
    "as_str",
    "envelope",
]


@translates_redis_errors
class Store:
    """The gateway's Redis, in parts. Holds no state besides the client."""

    def __init__(
        self,
        redis: aioredis.Redis,
        prefix: str = "mel",
        *,
        events_maxlen: int = 1_000_000,
        raw_maxlen: int = 100_000,
        raw_refused_max: int = 10_000,
        dedupe_ttl: int = 8 * 24 * 3600,
        reply_ttl: int = 3 * 24 * 3600,
        history_cap: int = 40,
        thread_ttl: int = 180 * 24 * 3600,
        session_ttl: int = 90 * 24 * 3600,
    ) -> None:
        self.redis = redis
        self.keys = Keys(prefix)
        scripts = Scripts(redis)
        self.scripts = scripts
        self.events = EventLog(redis, self.keys, scripts, events_maxlen, session_ttl)
        self.threads = ThreadStore(
            redis,
            self.keys,
            scripts,
            events_maxlen=events_maxlen,
            reply_ttl=reply_ttl,
            sent_ttl=dedupe_ttl,
            history_cap=history_cap,
            thread_ttl=thread_ttl,
            session_ttl=session_ttl,
        )
        self.ingest = Ingest(
            redis,
            self.keys,
            scripts,
            dedupe_ttl=dedupe_ttl,
            raw_maxlen=raw_maxlen,
            events_maxlen=events_maxlen,
            refused_max=raw_refused_max,
            thread_ttl=thread_ttl,
        )
        self.ready = ConsumerGroup(redis, self.keys.ready, READY_GROUP, start="0")
        self._own: list[aioredis.Redis] = []

    def own_event_log(self, max_connections: int = 4) -> EventLog:
        """The event log on a pool of its own (same server, ``max_connections`` at most,
        waiting for a free one): for readers that block, so they never take connections
        from the webhooks and the turns. ``close_own_pools`` closes it."""
        main = self.redis.connection_pool
        pool = aioredis.BlockingConnectionPool(
            connection_class=main.connection_class,
            max_connections=max_connections,
            timeout=30,
            **main.connection_kwargs,
        )
        client = aioredis.Redis(connection_pool=pool)
        self._own.append(client)
        return EventLog(
            client, self.keys, Scripts(client), self.events.maxlen, self.events.session_ttl
        )

    async def close_own_pools(self) -> None:
        for client in self._own:
            await client.aclose()
        self._own.clear()

    def group(self, stream: str, name: str, start: str = "0") -> ConsumerGroup:
        return ConsumerGroup(self.redis, stream, name, start)

    async def record_webhook_attempt(self, fields: dict[Any, Any]) -> None:
        """One support-webhook delivery attempt (the stream keeps the last 100,000)."""
        await self.redis.xadd(
            self.keys.support_webhook_attempts, fields, maxlen=100_000, approximate=True
        )

    async def ping(self) -> None:
        await self.redis.ping()

    async def info(self) -> dict[str, Any]:
        return dict(await self.redis.info())
