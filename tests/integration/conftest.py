"""Fixtures for the agent's integration tests: the fake LLM over HTTP, a ledger on the
real Redis, and factories wiring them into the real openai client and AgentChat."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

import pytest
import redis.asyncio as aioredis

from agent.chat import AgentChat
from agent.dates import SAO_PAULO
from agent.ledger import Ledger
from agent.llm import OpenAICompatibleLLM
from agent.profiles import LLMProfiles, load_profiles
from agent.tools import default_registry
from tests.fakes.llm import FakeLLM, start_fake_llm

NOW = datetime(2026, 6, 15, 10, 30, tzinfo=SAO_PAULO)
"""The agent tests' "now": mid June 2026 in São Paulo."""


def profiles_with(**changes: dict[str, Any]) -> LLMProfiles:
    """The packaged profiles with some fields changed: ``profiles_with(agent={...})``,
    ``profiles_with(transcription={...})``."""
    base = load_profiles()
    assert base.transcription is not None
    return LLMProfiles(
        {
            name: profile.model_copy(update=changes.get(name, {}))
            for name, profile in base.profiles.items()
        },
        "test-profiles.yaml",
        base.transcription.model_copy(update=changes.get("transcription", {})),
    )


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    """A running fake OpenAI-compatible endpoint (no key required)."""
    fake = await start_fake_llm()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
def ledger(redis: aioredis.Redis) -> Ledger:
    return Ledger(redis)


@pytest.fixture
async def make_llm() -> AsyncIterator[Callable[..., OpenAICompatibleLLM]]:
    """``make_llm(base_url=..., api_key=..., profiles=..., environ=...)``; closed after."""
    made: list[OpenAICompatibleLLM] = []

    def make(
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        profiles: LLMProfiles | None = None,
        environ: dict[str, str] | None = None,
    ) -> OpenAICompatibleLLM:
        llm = OpenAICompatibleLLM(
            profiles or load_profiles(), base_url=base_url, api_key=api_key, environ=environ or {}
        )
        made.append(llm)
        return llm

    yield make
    for llm in made:
        await llm.aclose()


MakeAgent = Callable[..., Awaitable[AgentChat]]


@pytest.fixture
def make_agent(
    fake_llm: FakeLLM, ledger: Ledger, make_llm: Callable[..., OpenAICompatibleLLM]
) -> MakeAgent:
    """AgentChat on the real openai client pointed at ``fake_llm``, the real ledger, the
    finance tools and a clock fixed at :data:`NOW`. Keyword arguments go to AgentChat;
    ``profiles=`` replaces the profiles."""

    async def make(*, profiles: LLMProfiles | None = None, **kwargs: Any) -> AgentChat:
        llm = make_llm(base_url=fake_llm.base_url, profiles=profiles)
        kwargs.setdefault("clock", lambda: NOW)
        return AgentChat(llm, default_registry(), ledger, **kwargs)

    return make
