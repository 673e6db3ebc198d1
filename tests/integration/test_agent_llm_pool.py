"""OpenAICompatibleLLM's connection pool against the fake: calls beyond the pool wait (the
model's timeout starts once the connection is held), the wait has its own bound and its
own error, and the stats show in-flight calls and waits."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agent.errors import LLMError, LLMTimeout
from agent.llm import LLMPoolTimeout, OpenAICompatibleLLM
from agent.messages import ChatMessage
from agent.profiles import LLMProfiles, load_profiles
from tests.fakes.llm import FakeLLM, hang
from tests.integration.conftest import profiles_with

HELLO = [ChatMessage(role="user", content="oi")]


def _llm(fake: FakeLLM, profiles: LLMProfiles | None = None, **pool: Any) -> OpenAICompatibleLLM:
    """A client on ``fake`` with the packaged profiles (or ``profiles``) and ``pool``
    settings (closed by the test)."""
    return OpenAICompatibleLLM(
        profiles or load_profiles(), base_url=fake.base_url, environ={}, **pool
    )


async def test_calls_beyond_the_pool_wait_and_do_not_time_out_while_waiting() -> None:
    # 6 calls, 2 connections, 0.3 s a call: three waves, ~0.9 s in all. The router's
    # timeout is 0.45 s: a call of the last wave waits ~0.6 s, then takes 0.3 s.
    waits: list[tuple[str, float]] = []
    async with FakeLLM.running(delay=0.3) as fake:
        llm = _llm(
            fake,
            profiles=profiles_with(router={"timeout_seconds": 0.45}),
            max_connections=2,
            on_pool_wait=lambda profile, seconds: waits.append((profile, seconds)),
        )
        try:
            started = time.perf_counter()
            calls = asyncio.gather(*(llm.complete("router", HELLO) for _ in range(6)))
            await fake.wait_for_calls(2)  # the first wave, answered 0.3 s later
            during = llm.stats()
            assert fake.call_count == 2  # the pool holds the others back
            answers = await calls
            took = time.perf_counter() - started
        finally:
            await llm.aclose()

    assert [a.message.content for a in answers] == ["ok"] * 6  # none failed
    assert 0.85 < took < 3.0
    (pool,) = during.pools
    assert (pool.max_connections, pool.in_use, pool.waiting) == (2, 2, 4)
    assert (during.profiles["router"].in_flight, during.profiles["router"].waiting) == (2, 4)
    after = llm.stats()
    assert (after.pools[0].in_use, after.pools[0].waiting) == (0, 0)
    router = after.profiles["router"]
    assert (router.in_flight, router.waiting, router.waits, router.pool_timeouts) == (0, 0, 4, 0)
    assert sorted(profile for profile, _ in waits) == ["router"] * 4
    longest = max(seconds for _, seconds in waits)
    assert 0.45 < longest < 2.5  # longer than the model's timeout: it did not count
    assert router.wait_seconds == pytest.approx(sum(s for _, s in waits))
    assert after.pools[0].waits == 4


async def test_the_pool_wait_bound_raises_its_own_error_without_calling_the_endpoint() -> None:
    async with FakeLLM.running() as fake:
        fake.script(hang(1.0))
        llm = _llm(fake, max_connections=1, pool_timeout=0.1)
        try:
            holder = asyncio.create_task(llm.complete("agent", HELLO))  # holds the connection
            await fake.wait_for_calls(1)
            started = time.perf_counter()
            with pytest.raises(LLMPoolTimeout) as caught:
                await llm.complete("router", HELLO)
            waited = time.perf_counter() - started
            assert fake.call_count == 1  # the endpoint was never asked
            holder.cancel()
            with pytest.raises(asyncio.CancelledError):
                await holder
            answer = await llm.complete("router", HELLO)  # the slot came back
        finally:
            await llm.aclose()

    assert 0.08 < waited < 1.0
    error = caught.value
    assert not isinstance(error, LLMTimeout)  # saturation here, not a slow model
    assert isinstance(error, LLMError)
    assert error.transient
    assert (error.profile, error.status) == ("router", None)
    assert "no free connection" in error.reason
    assert "max_connections=1" in error.reason
    assert answer.message.content == "ok"
    stats = llm.stats()
    assert stats.profiles["router"].pool_timeouts == 1
    assert stats.pools[0].pool_timeouts == 1
    assert (stats.pools[0].in_use, stats.pools[0].waiting) == (0, 0)
    assert stats.profiles["agent"].in_flight == 0


async def test_a_model_timeout_gives_its_connection_back() -> None:
    async with FakeLLM.running() as fake:
        fake.script(hang(), hang())
        llm = _llm(fake, profiles=profiles_with(agent={"timeout_seconds": 0.2}), max_connections=1)
        try:
            # two calls, one connection: the second waits for the first to time out, then
            # gets its own full 0.2 s
            started = time.perf_counter()
            results = await asyncio.gather(
                *(llm.complete("agent", HELLO) for _ in range(2)), return_exceptions=True
            )
            took = time.perf_counter() - started
            third = await llm.complete("agent", HELLO)
        finally:
            await llm.aclose()

    assert [type(r) for r in results] == [LLMTimeout, LLMTimeout]
    assert 0.38 < took < 2.0
    assert third.message.content == "ok"
    assert llm.stats().pools[0].in_use == 0


async def test_a_cancelled_waiter_leaves_the_pool_clean() -> None:
    async with FakeLLM.running(delay=0.5) as fake:
        llm = _llm(fake, max_connections=1)
        try:
            first = asyncio.create_task(llm.complete("agent", HELLO))
            await fake.wait_for_calls(1)
            waiter = asyncio.create_task(llm.complete("router", HELLO))
            await asyncio.sleep(0.05)
            assert llm.stats().pools[0].waiting == 1
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert (await first).message.content == "ok"
            assert (await llm.complete("router", HELLO)).message.content == "ok"
        finally:
            await llm.aclose()

    pool = llm.stats().pools[0]
    assert (pool.in_use, pool.waiting) == (0, 0)
    assert fake.call_count == 2


async def test_in_flight_calls_are_counted_per_profile() -> None:
    async with FakeLLM.running(delay=0.5) as fake:
        llm = _llm(fake, max_connections=8)
        try:
            calls = asyncio.gather(
                *(llm.complete("router", HELLO) for _ in range(3)),
                llm.complete("agent", HELLO),
            )
            await fake.wait_for_calls(4)
            during = llm.stats()
            await calls
        finally:
            await llm.aclose()

    assert during.profiles["router"].in_flight == 3
    assert during.profiles["agent"].in_flight == 1
    assert during.pools[0].in_use == 4
    assert during.pools[0].waits == 0  # nobody waited: the pool was big enough
    assert {p.in_flight for p in llm.stats().profiles.values()} == {0}


async def test_each_endpoint_has_its_own_pool() -> None:
    async with FakeLLM.running(delay=0.5) as slow, FakeLLM.running() as fast:
        profiles = profiles_with(psychologist={"base_url": slow.base_url})
        llm = OpenAICompatibleLLM(profiles, base_url=fast.base_url, environ={}, max_connections=1)
        try:
            busy = asyncio.create_task(llm.complete("psychologist", HELLO))
            await slow.wait_for_calls(1)
            await llm.complete("router", HELLO)  # the other endpoint's pool is free
            assert not busy.done()
            await busy
        finally:
            await llm.aclose()

    assert {p.endpoint: p.waits for p in llm.stats().pools} == {slow.base_url: 0, fast.base_url: 0}


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"max_connections": 0}, "max_connections"),
        ({"pool_timeout": 0}, "pool_timeout"),
    ],
)
def test_pool_settings_are_checked(kwargs: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        OpenAICompatibleLLM(load_profiles(), environ={}, **kwargs)
