"""The whole service as a user sees it: the real app on loopback, real Redis, and fake
Twilio REST / Graph / LLM servers that speak the real wire formats."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestServer

from channels import compute_twilio_signature
from gateway.http.app import create_app, server_options
from gateway.http.keys import COMPONENTS, STORE
from gateway.settings import Settings
from gateway.store import Store
from tests.fakes.graph_api import FakeGraphAPI
from tests.fakes.llm import FakeLLM, start_fake_llm
from tests.fakes.payloads import sign_meta, twilio_inbound_params
from tests.fakes.twilio_api import FakeTwilioAPI

ACCOUNT_SID = "AC" + "1" * 32
AUTH_TOKEN = "twilio-test-auth-token"
BUSINESS = "+14155238886"
META_SECRET = "meta-app-secret"
META_TOKEN = "meta-access-token"
META_PHONE_ID = "106540352242922"
PROFILES = Path(__file__).parent.parent / "data" / "e2e_llm_profiles.yaml"
AGENT_MODEL = "agent-model"  # each role has its own model name in PROFILES
ROUTER_MODEL = "router-model"
ROUTER_ANSWER = '{"route": "budget_agent", "intent": "budget_overview", "confidence": 0.95}'


def agent_calls(fake: FakeLLM) -> list[dict[str, Any]]:
    """The calls the domain agents made (not the router's or the classifier's)."""
    return fake.calls_for(AGENT_MODEL)


class Gateway:
    """A running gateway plus the helpers a test needs to talk to it like a provider."""

    def __init__(self, server: TestServer, store: Store, settings: Settings) -> None:
        self.server = server
        self.store = store
        self.settings = settings
        self.session = aiohttp.ClientSession()

    def url(self, path: str) -> str:
        return str(self.server.make_url(path))

    async def twilio(
        self,
        body: str = "oi",
        *,
        sid: str | None = None,
        user: str = "+5511999990000",
        params: dict[str, str] | None = None,
        path: str = "/webhooks/twilio",
        token: str = AUTH_TOKEN,
        signature: str | None = None,
    ) -> aiohttp.ClientResponse:
        """POST a Twilio inbound delivery, signed as Twilio signs it."""
        if params is None:
            params = twilio_inbound_params(
                sid=sid or "SM" + uuid.uuid4().hex, from_=user, to=BUSINESS, body=body
            )
        url = self.url(path)
        sig = signature if signature is not None else compute_twilio_signature(token, url, params)
        resp = await self.session.post(url, data=params, headers={"X-Twilio-Signature": sig})
        await resp.read()
        return resp

    async def meta(self, payload: dict[str, Any] | bytes, *, secret: str = META_SECRET) -> Any:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        resp = await self.session.post(
            self.url("/webhooks/meta"),
            data=body,
            headers={
                "Content-Type": "application/json",
                "X-Hub-Signature-256": sign_meta(secret, body),
            },
        )
        await resp.read()
        return resp

    async def events(self, type_: str | None = None) -> list[dict[str, Any]]:
        out = await self.store.events.read("0-0", count=10_000)
        return [e for e in out if type_ is None or e["type"] == type_]

    async def wait_events(self, type_: str, n: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            found = await self.events(type_)
            if len(found) >= n or asyncio.get_running_loop().time() > deadline:
                return found
            await asyncio.sleep(0.05)

    async def idle(self, timeout: float = 15.0) -> None:
        """Wait until every thread's inbox is drained and every reply finished."""
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            _len, pending, _lag = await self.store.ready.stats()
            if pending == 0 and not await self.store.redis.keys(
                f"{self.store.keys.prefix}:t:*:sched"
            ):
                return
            await asyncio.sleep(0.05)
        raise AssertionError("gateway did not become idle")

    async def close(self) -> None:
        await self.session.close()


GatewayFactory = Callable[..., "asyncio.Future[Gateway]"]


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    fake = await start_fake_llm()
    fake.by_model[ROUTER_MODEL] = lambda request: ROUTER_ANSWER
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def fake_twilio() -> AsyncIterator[FakeTwilioAPI]:
    async with FakeTwilioAPI(ACCOUNT_SID, AUTH_TOKEN) as fake:
        yield fake


@pytest.fixture
async def fake_graph() -> AsyncIterator[FakeGraphAPI]:
    async with FakeGraphAPI(META_TOKEN) as fake:
        yield fake


def make_settings(
    redis_url: str, tmp_path: Path, *, llm: FakeLLM | None, twilio: FakeTwilioAPI | None,
    graph: FakeGraphAPI | None, **overrides: Any,
) -> Settings:  # fmt: skip
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "mel_data_dir": tmp_path / "mel",
        "mel_claim_idle_seconds": 3.0,
        "mel_shutdown_grace_seconds": 3.0,
        "meta_app_secret": META_SECRET,
        "meta_verify_token": "verify-me",
        "psychologist_enabled": False,  # its own tests turn it on
        "enable_route_stickiness": False,  # the journeys' tests run both ways
    }
    if llm is not None:
        values["llm_base_url"] = llm.base_url
        values["llm_api_key"] = "sk-test"
        values["llm_profiles_path"] = PROFILES
    if twilio is not None:
        values.update(
            twilio_account_sid=ACCOUNT_SID,
            twilio_auth_token=AUTH_TOKEN,
            twilio_whatsapp_from=f"whatsapp:{BUSINESS}",
            twilio_api_base_url=twilio.base_url,
        )
    if graph is not None:
        values.update(
            meta_access_token=META_TOKEN,
            meta_phone_number_id=META_PHONE_ID,
            meta_graph_base_url=graph.base_url,
        )
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.fixture
async def start_gateway(
    redis_url: str,
    redis: aioredis.Redis,
    tmp_path: Path,
    fake_llm: FakeLLM,
    fake_twilio: FakeTwilioAPI,
    fake_graph: FakeGraphAPI,
) -> AsyncIterator[Callable[..., Any]]:
    """Factory: ``await start_gateway(**settings_overrides)`` → a running Gateway."""
    started: list[tuple[Gateway, TestServer]] = []

    async def start(*, run_worker: bool = True, **overrides: Any) -> Gateway:
        url = overrides.pop("redis_url", redis_url)
        settings = make_settings(
            url, tmp_path, llm=fake_llm, twilio=fake_twilio, graph=fake_graph, **overrides
        )
        app = create_app(settings, run_worker=run_worker)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server(**server_options(settings))
        gw = Gateway(server, app[STORE], settings)
        started.append((gw, server))
        if run_worker:
            for _ in range(100):
                worker = app[COMPONENTS].worker
                if worker is not None and worker.running:
                    break
                await asyncio.sleep(0.02)
        return gw

    yield start
    for gw, server in reversed(started):
        await gw.close()
        await server.close()


@pytest.fixture
async def gateway(start_gateway: Callable[..., Any]) -> Gateway:
    gw: Gateway = await start_gateway()
    return gw
