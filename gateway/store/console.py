"""The support console's storage in Redis: agents, logins, login attempt counters.

======================================  ======  ==============================================
``P:console:agents``                    hash    agent key (the name casefolded) → JSON record
                                                ``{name, password, created_at}`` (``password``
                                                is the scrypt hash, ``gateway.support_agents``)
``P:console:session:{D}``               hash    one login: ``name``, ``key``, ``csrf``,
                                                ``created_at``, ``addr``; expires (TTL) with it
``P:console:agent:{K}:sessions``        set     the digests ``D`` of an agent's logins (ended
                                                when the agent is removed or replaced)
``P:console:login:{name|addr}:{who}``   string  login attempts in the current window (TTL)
======================================  ======  ==============================================

``D`` is the SHA-256 of the cookie's token: a copy of Redis holds no usable cookie.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.store._codec import as_str
from gateway.store.errors import translates_redis_errors

if TYPE_CHECKING:
    from gateway.store import Store

__all__ = ["AgentRecord", "ConsoleLogin", "ConsoleStore"]


@dataclass(frozen=True, slots=True)
class AgentRecord:
    key: str
    name: str
    password: str
    created_at: str

    def as_json(self) -> dict[str, str]:
        """What may be shown (never the password hash)."""
        return {"name": self.name, "created_at": self.created_at}


@dataclass(frozen=True, slots=True)
class ConsoleLogin:
    """A logged-in agent, as its session cookie resolves."""

    digest: str
    key: str
    name: str
    csrf: str
    created_at: str


@translates_redis_errors
class ConsoleStore:
    def __init__(self, store: Store) -> None:
        self.redis = store.redis
        self.keys = store.keys

    # --- agents ----------------------------------------------------------------------

    async def agents(self) -> list[AgentRecord]:
        raw = await self.redis.hgetall(self.keys.console_agents)
        found = [_record(as_str(k), as_str(v)) for k, v in raw.items()]
        return sorted(found, key=lambda a: a.key)

    async def agent(self, key: str) -> AgentRecord | None:
        raw = await self.redis.hget(self.keys.console_agents, key)
        return _record(key, as_str(raw)) if raw else None

    async def has_agents(self) -> bool:
        return bool(await self.redis.hlen(self.keys.console_agents))

    async def add_agent(self, record: AgentRecord, *, replace: bool) -> bool:
        """Store the agent; False when it exists and ``replace`` is not set. Replacing
        ends the agent's logins."""
        value = json.dumps(
            {"name": record.name, "password": record.password, "created_at": record.created_at}
        )
        if not replace:
            return bool(await self.redis.hsetnx(self.keys.console_agents, record.key, value))
        await self.redis.hset(self.keys.console_agents, record.key, value)
        await self.end_sessions(record.key)
        return True

    async def remove_agent(self, key: str) -> bool:
        """Remove the agent and end its logins; False when there was none."""
        removed = bool(await self.redis.hdel(self.keys.console_agents, key))
        await self.end_sessions(key)
        return removed

    # --- logins ----------------------------------------------------------------------

    async def open_session(self, login: ConsoleLogin, *, addr: str, ttl_seconds: int) -> None:
        session = self.keys.console_session(login.digest)
        index = self.keys.console_agent_sessions(login.key)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                session,
                mapping={
                    "key": login.key,
                    "name": login.name,
                    "csrf": login.csrf,
                    "created_at": login.created_at,
                    "addr": addr,
                },
            )
            pipe.expire(session, ttl_seconds)
            pipe.sadd(index, login.digest)
            pipe.expire(index, ttl_seconds)
            await pipe.execute()

    async def session(self, digest: str) -> ConsoleLogin | None:
        raw = await self.redis.hgetall(self.keys.console_session(digest))
        f = {as_str(k): as_str(v) for k, v in raw.items()}
        if not f.get("key") or not f.get("csrf"):
            return None
        return ConsoleLogin(
            digest, f["key"], f.get("name", f["key"]), f["csrf"], f.get("created_at", "")
        )

    async def close_session(self, login: ConsoleLogin) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self.keys.console_session(login.digest))
            pipe.srem(self.keys.console_agent_sessions(login.key), login.digest)
            await pipe.execute()

    async def end_sessions(self, key: str) -> int:
        """End every login of an agent; how many there were."""
        index = self.keys.console_agent_sessions(key)
        digests = [as_str(d) for d in await self.redis.smembers(index)]
        async with self.redis.pipeline(transaction=True) as pipe:
            for digest in digests:
                pipe.delete(self.keys.console_session(digest))
            pipe.delete(index)
            await pipe.execute()
        return len(digests)

    # --- login attempts --------------------------------------------------------------

    async def count_attempt(
        self, counters: dict[str, str], window_seconds: int
    ) -> dict[str, tuple[int, int]]:
        """Count one login attempt on each counter (``kind → who``), in a fixed window
        of ``window_seconds`` that starts with the first attempt: ``kind → (attempts so
        far, seconds left in the window)``."""
        keys = {kind: self.keys.console_login_attempts(kind, who) for kind, who in counters.items()}
        async with self.redis.pipeline(transaction=True) as pipe:
            for key in keys.values():
                pipe.set(key, 0, ex=window_seconds, nx=True)
                pipe.incr(key)
                pipe.ttl(key)
            res: list[Any] = await pipe.execute()
        out: dict[str, tuple[int, int]] = {}
        for n, kind in enumerate(keys):
            count, ttl = int(res[3 * n + 1]), int(res[3 * n + 2])
            out[kind] = (count, ttl if ttl > 0 else window_seconds)
        return out

    async def reset_attempts(self, kind: str, who: str) -> None:
        """A successful login: that counter starts over."""
        await self.redis.delete(self.keys.console_login_attempts(kind, who))

    # --- threads ---------------------------------------------------------------------

    async def closed_sessions(self, thread_id: str, limit: int = 20) -> list[tuple[str, int]]:
        """The thread's closed sessions, newest first: (session id, closed ms). The index
        is the psychologist's (``P:t:{T}:sessions``), kept by its consumer."""
        raw: Any = await self.redis.zrevrange(
            self.keys.thread(thread_id, "sessions"), 0, limit - 1, withscores=True
        )
        return [(as_str(member), int(score)) for member, score in raw]


def _record(key: str, raw: str) -> AgentRecord:
    data = json.loads(raw)
    return AgentRecord(
        key=key,
        name=str(data.get("name") or key),
        password=str(data.get("password") or ""),
        created_at=str(data.get("created_at") or ""),
    )
