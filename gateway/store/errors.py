"""The store's errors, and the one place where Redis client errors become them."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.errors import Conflict, GatewayError, Unavailable

__all__ = [
    "REDIS_DOWN",
    "ActionRefused",
    "LeaseLost",
    "StoreDown",
    "StoreError",
    "translates_redis_errors",
]

REDIS_DOWN: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, OSError)
"""What the Redis client raises when the server cannot be reached (or answer in time)."""


class StoreError(GatewayError):
    """Root of the store's errors."""


class StoreDown(StoreError, Unavailable):
    """Redis is unreachable: nothing was stored; the caller retries (a webhook: 503)."""


class ActionRefused(StoreError, Conflict):
    """The thread changed (or is busy) since the action was decided."""


class LeaseLost(StoreError):
    """Another worker owns the thread now; this one must drop the turn."""


_C = TypeVar("_C", bound=type)


def _translated(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except REDIS_DOWN as exc:
            raise StoreDown(f"Redis unavailable: {exc}") from exc

    return call


def translates_redis_errors(cls: _C) -> _C:
    """Class decorator: every public coroutine method of ``cls`` raises ``StoreDown``
    where the Redis client would raise a connection or timeout error, so no caller above
    the store needs to know the client's exceptions."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.iscoroutinefunction(member):
            setattr(cls, name, _translated(member))
    return cls
