"""Helpers for the console's tests (API and browser): agents seeded through the store with
cheap scrypt parameters (the stored hash names its parameters, so logins verify as fast),
and a cookie-holding client that logs in and sends the CSRF token as the page does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from gateway.clock import utc_now_iso
from gateway.store import Store
from gateway.store.console import AgentRecord, ConsoleStore
from gateway.support_agents import ScryptParams, agent_key, hash_password
from tests.e2e.conftest import BUSINESS, Gateway

FAST = ScryptParams(n=2**8, r=8, p=1)
"""Cheap enough for tests; production hashes use ``support_agents.SCRYPT``."""
USER = "+5511999990000"
THREAD = f"twilio:{BUSINESS}:{USER}"
PASSWORD = "senha-boa-123"


async def seed_agent(store: Store, name: str, password: str = PASSWORD) -> None:
    record = AgentRecord(agent_key(name), name, hash_password(password, FAST), utc_now_iso())
    await ConsoleStore(store).add_agent(record, replace=True)


@pytest.fixture
def start(start_gateway: Callable[..., Any], redis: aioredis.Redis) -> Callable[..., Any]:
    """``await start("ana", "bia", **settings)``: those agents exist before the gateway
    starts (so its roster counts them from the first turn: support is available without
    SUPPORT_TOKEN)."""

    async def go(*agents: str, **overrides: Any) -> Gateway:
        store = Store(redis, "mel")
        for name in agents:
            await seed_agent(store, name)
        gw: Gateway = await start_gateway(**overrides)
        return gw

    return go


class ConsoleClient:
    """One browser's worth of console: its own cookie jar, its CSRF token."""

    def __init__(self, gw: Gateway) -> None:
        self.gw = gw
        self.http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        self.csrf = ""
        self.name = ""

    async def login(
        self, name: str, password: str = PASSWORD, **headers: str
    ) -> aiohttp.ClientResponse:
        resp = await self.http.post(
            self.gw.url("/console/api/login"),
            json={"name": name, "password": password},
            headers=headers,
        )
        if resp.status == 200:
            body = await resp.json()
            self.csrf, self.name = body["csrf"], body["name"]
        await resp.read()
        return resp

    async def call(
        self, method: str, path: str, *, csrf: bool = True, **kw: Any
    ) -> tuple[int, Any]:
        headers = dict(kw.pop("headers", {}))
        if csrf and method != "GET":
            headers["X-CSRF-Token"] = self.csrf
        if method != "GET" and "json" not in kw and "data" not in kw:
            kw["json"] = {}
        async with self.http.request(
            method, self.gw.url(f"/console/api/{path}"), headers=headers, **kw
        ) as resp:
            body = await resp.json() if resp.content_type == "application/json" else None
            return resp.status, body

    async def close(self) -> None:
        await self.http.close()
