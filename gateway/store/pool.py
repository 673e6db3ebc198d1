"""The Redis connection pool: a fixed size, calls that wait for a free connection, and
counters that show when they had to.

redis-py's default pool fails at once when it is full ("Too many connections"), which
looks like an outage to the caller. This one waits (``BlockingConnectionPool``), up to
``timeout`` seconds, and then raises :class:`PoolExhausted` — a store error of its own,
not :class:`StoreDown`: the server is fine, the process asked too much of it at once.
"""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.errors import Unavailable
from gateway.store.errors import StoreError

__all__ = ["MeteredPool", "PoolExhausted"]

_WAITED = 0.001
"""A wait longer than this counts as one (getting an idle connection takes microseconds)."""


class PoolExhausted(StoreError, Unavailable):
    """No Redis connection became free in time: the process is over its pool's size."""


class MeteredPool(aioredis.BlockingConnectionPool):
    """``BlockingConnectionPool`` that counts the calls that waited and for how long."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waits = 0
        self.wait_seconds = 0.0
        self.exhausted = 0

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        if self.can_get_connection():  # no wait: skip the condition and its timer
            return await aioredis.ConnectionPool.get_connection(self)  # type: ignore[no-untyped-call]
        started = time.monotonic()
        try:
            return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]
        except RedisConnectionError as exc:
            if "No connection available" not in str(exc):
                raise  # connecting failed: the server is down
            self.exhausted += 1
            raise PoolExhausted(
                f"no free Redis connection within {self.timeout:g}s ({self.max_connections} in use)"
            ) from exc
        finally:
            waited = time.monotonic() - started
            if waited > _WAITED:
                self.waits += 1
                self.wait_seconds += waited

    @property
    def in_use(self) -> int:
        return len(self._in_use_connections)

    @property
    def idle(self) -> int:
        return len(self._available_connections)
