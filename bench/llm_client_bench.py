"""LLM client benchmark: CPU per chat-completion call, and the pool at real latency.

1. CPU-seconds per 1,000 calls (``time.process_time`` of this process only: the fake
   LLM runs in a child process) for, in the same run, interleaved:
   - ``sdk``: the openai SDK on its aiohttp transport, posting the prebuilt body with
     ``client.post(cast_to=ChatCompletion)`` (the client before this benchmark);
   - ``aiohttp``: the floor, plain aiohttp posting the same JSON and parsing the answer
     into the same :class:`~agent.llm.LLMResponse`, nothing else;
   - ``client``: :class:`~agent.llm.OpenAICompatibleLLM` as shipped (plain aiohttp plus
     the pool's slots and counters).
   The bodies are a turn's real ones: the router's (its system prompt and the JSON of the
   agents), the budget agent's (mel's ~3 KB prompt, a few messages of history, its tool
   schemas) answered with a tool call, then the same with the tool's result, answered
   with text.
2. The pool at latency: 64 concurrent router calls, 16 connections, the fake answering in
   0.2 s, the profile's timeout 0.5 s. The SDK client's wait for a connection counts
   against the timeout (calls time out while waiting); the shipped client waits and
   starts the timeout with the connection held.

``python -m bench.llm_client_bench [calls]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

import aiohttp
import openai
from openai.types.chat import ChatCompletion

from agent.dates import SAO_PAULO
from agent.errors import LLMError, LLMTimeout
from agent.llm import (
    LLMResponse,
    OpenAICompatibleLLM,
    Usage,
    _to_response,
    cost_micro_usd,
    request_body,
)
from agent.messages import ChatMessage, ToolCallRequest
from agent.profiles import LLMProfile, LLMProfiles, load_profiles
from agent.routing import EnterpriseRouter, build_domain_agents

NOW = datetime(2026, 6, 15, 10, 30, tzinfo=SAO_PAULO)
ROUTER_ANSWER = '{"route": "budget_agent", "intent": "budget_overview", "confidence": 0.95}'
AGENT_ANSWER = (
    "Em junho vocês gastaram R$ 3.412,80 até agora, de um orçamento de R$ 5.000,00: ainda "
    "restam R$ 1.587,20 para os próximos 15 dias. Mercado e restaurantes foram as maiores "
    "categorias. Quer que eu mostre os gastos por categoria ou ajuste o orçamento do mês?"
)

Call = tuple[str, list[ChatMessage], dict[str, Any]]
"""(profile, messages, keyword arguments) of one ``complete`` call."""


# -- the fake, in its own process ---------------------------------------------------------


def _serve(delay: float) -> None:
    """Run the fake LLM until stdin closes (the child process)."""
    from tests.fakes.llm import FakeLLM, Reply, tool_call

    class QuietFakeLLM(FakeLLM):
        """Keeps no record of the calls (tens of thousands of bodies)."""

        async def _add(self, call: Any) -> None:
            return None

    def answer(body: dict[str, Any]) -> Reply:
        if body.get("response_format"):
            return Reply(content=ROUTER_ANSWER)
        if body.get("tools") and body["messages"][-1]["role"] == "user":
            return tool_call("budgetTotal", {"month": "2026-06"})
        return Reply(content=AGENT_ANSWER)

    async def main() -> None:
        async with QuietFakeLLM(responder=answer, delay=delay) as fake:
            print(fake.base_url, flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    asyncio.run(main())


@contextlib.asynccontextmanager
async def fake_llm_process(delay: float = 0.0) -> AsyncIterator[str]:
    """The fake LLM in a child process; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.llm_client_bench", "--serve", str(delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = await asyncio.get_running_loop().run_in_executor(None, proc.stdout.readline)
        if not base_url.startswith("http"):
            raise RuntimeError("the fake LLM did not start")
        yield base_url.strip()
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the three clients ----------------------------------------------------------------------


class SdkLLM:
    """The client before this benchmark: the openai SDK (``AsyncOpenAI`` on
    ``DefaultAioHttpClient``, no retries) posting the prebuilt body; the wait for a pooled
    connection inside the call's timeout."""

    def __init__(self, profiles: LLMProfiles, base_url: str, max_connections: int = 64) -> None:
        self.profiles = profiles
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
            max_connections=max_connections, max_keepalive_connections=16, keepalive_expiry=30.0
        )
        self.client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key="not-needed",
            max_retries=0,
            http_client=openai.DefaultAioHttpClient(limits=limits),
        )

    async def complete(
        self, profile: str, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> LLMResponse:
        settings = self.profiles.get(profile)
        body = request_body(settings, messages, **kwargs)
        try:
            async with asyncio.timeout(settings.timeout_seconds):
                completion = await self.client.post(
                    "/chat/completions",
                    cast_to=ChatCompletion,
                    body=body,
                    options={"timeout": settings.timeout_seconds},
                )
        except (TimeoutError, openai.APITimeoutError) as exc:
            raise LLMTimeout(profile, "timeout") from exc
        except openai.OpenAIError as exc:
            raise LLMError(profile, str(exc)) from exc
        return _sdk_response(profile, settings, completion)

    async def aclose(self) -> None:
        await self.client.close()


def _sdk_response(profile: str, settings: LLMProfile, completion: Any) -> LLMResponse:
    """SDK ``ChatCompletion`` → LLMResponse, as the SDK client converted it."""
    choice = completion.choices[0]
    raw = choice.message
    calls = tuple(
        ToolCallRequest(id=c.id, name=c.function.name, arguments=c.function.arguments or "{}")
        for c in raw.tool_calls or ()
    )
    usage = completion.usage
    prompt, produced = int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)
    return LLMResponse(
        message=ChatMessage(role="assistant", content=raw.content or "", tool_calls=calls or None),
        usage=Usage(prompt, produced, cost_micro_usd(settings, prompt, produced), 1),
        model=str(completion.model or settings.model),
        profile=profile,
        finish_reason=choice.finish_reason,
    )


class PlainAiohttpLLM:
    """The floor: one aiohttp session, post the JSON, parse into the same LLMResponse."""

    def __init__(self, profiles: LLMProfiles, base_url: str) -> None:
        self.profiles = profiles
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.headers = {"Authorization": "Bearer not-needed", "Content-Type": "application/json"}
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))

    async def complete(
        self, profile: str, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> LLMResponse:
        settings = self.profiles.get(profile)
        body = request_body(settings, messages, **kwargs)
        payload = json.dumps(body, ensure_ascii=False).encode()
        async with self.session.post(self.url, data=payload, headers=self.headers) as response:
            raw = await response.read()
        return _to_response(profile, settings, json.loads(raw))

    async def aclose(self) -> None:
        await self.session.close()


# -- the workload ---------------------------------------------------------------------------


def turn_calls() -> list[Call]:
    """One turn's three calls with their real bodies: router, agent (→ a tool call),
    agent with the tool's result (→ text)."""
    agents = build_domain_agents(None, None, clock=lambda: NOW)
    budget = agents["budget_agent"]
    history = [
        ChatMessage(role="user", content="oi mel, quanto a gente gastou com mercado em maio?"),
        ChatMessage(
            role="assistant",
            content="Em maio vocês gastaram R$ 1.245,30 em mercado. Quer ver as outras "
            "categorias ou comparar com abril?",
        ),
        ChatMessage(role="user", content="e esse mês, como estamos no orçamento?"),
    ]
    router = EnterpriseRouter(None, agents).request(history)
    system = ChatMessage(role="system", content=budget.system_prompt(NOW))
    schemas = budget.tools.schemas()
    asked = ToolCallRequest(id="call_1", name="budgetTotal", arguments='{"month": "2026-06"}')
    after_tool = [
        system,
        *history,
        ChatMessage(role="assistant", content="", tool_calls=(asked,)),
        ChatMessage(
            role="tool",
            tool_call_id="call_1",
            content='{"month": "2026-06", "spent": "R$ 3.412,80", "budget": "R$ 5.000,00", '
            '"remaining": "R$ 1.587,20", "by_category": {"mercado": "R$ 1.320,10", '
            '"restaurantes": "R$ 845,00", "transporte": "R$ 410,70"}}',
        ),
    ]
    return [
        ("router", router, {"response_format": {"type": "json_object"}}),
        ("agent", [system, *history], {"tools": schemas}),
        ("agent", after_tool, {"tools": schemas}),
    ]


def body_sizes(profiles: LLMProfiles) -> list[int]:
    return [
        len(json.dumps(request_body(profiles.get(p), m, **kw), ensure_ascii=False).encode())
        for p, m, kw in turn_calls()
    ]


Complete = Callable[..., Awaitable[LLMResponse]]


async def _run(complete: Complete, calls: list[Call], n: int, concurrency: int) -> None:
    """``n`` calls cycling through ``calls``, ``concurrency`` at a time."""
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            profile, messages, kwargs = calls[i % len(calls)]
            await complete(profile, messages, **kwargs)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def cpu_per_call(n: int, rounds: int, concurrency: int) -> dict[str, Any]:
    profiles = load_profiles()
    calls = turn_calls()
    async with fake_llm_process() as base_url:
        clients: dict[str, Any] = {
            "sdk": SdkLLM(profiles, base_url),
            "aiohttp": PlainAiohttpLLM(profiles, base_url),
            "client": OpenAICompatibleLLM(
                profiles, base_url=base_url, environ={}, max_connections=64
            ),
        }
        check = {
            name: await client.complete(p, m, **kw)
            for name, client in clients.items()
            for p, m, kw in calls[1:2]
        }
        seen = {
            (r.usage, r.finish_reason, tuple((t.name, t.arguments) for t in r.message.tool_calls))
            for r in check.values()
            if r.message.tool_calls
        }
        assert len(check) == len(clients), check
        assert len(seen) == 1, check  # every client read the same answer
        for client in clients.values():  # warm up: connections, caches
            await _run(client.complete, calls, 300, concurrency)
        cpu: dict[str, list[float]] = {name: [] for name in clients}
        for _ in range(rounds):
            for name, client in clients.items():
                started = time.process_time()
                await _run(client.complete, calls, n, concurrency)
                cpu[name].append((time.process_time() - started) / n * 1000)
        for client in clients.values():
            await client.aclose()
    cpu_ms = {name: statistics.median(values) for name, values in cpu.items()}
    return {
        "cpu_s_per_1000": cpu_ms,  # CPU-seconds per 1,000 calls = CPU-ms per call
        "sizes": body_sizes(profiles),
    }


async def pool_at_latency(
    calls: int = 64, connections: int = 16, latency: float = 0.2, timeout: float = 0.5
) -> dict[str, dict[str, float]]:
    base = load_profiles()
    profiles = LLMProfiles(
        {
            name: p.model_copy(update={"timeout_seconds": timeout}) if name == "router" else p
            for name, p in base.profiles.items()
        },
        "bench",
    )
    router = turn_calls()[0]
    out: dict[str, dict[str, float]] = {}
    async with fake_llm_process(latency) as base_url:
        waits: list[float] = []
        clients: dict[str, Any] = {
            "sdk": SdkLLM(profiles, base_url, max_connections=connections),
            "client": OpenAICompatibleLLM(
                profiles,
                base_url=base_url,
                environ={},
                max_connections=connections,
                on_pool_wait=lambda _profile, seconds: waits.append(seconds),
            ),
        }
        for name, client in clients.items():
            await client.complete(*router[:2], **router[2])  # connect before timing
            waits.clear()

            async def one(client: Any = client) -> tuple[bool, float]:
                started = time.perf_counter()
                try:
                    await client.complete(router[0], router[1], **router[2])
                except LLMTimeout:
                    return False, time.perf_counter() - started
                return True, time.perf_counter() - started

            results = await asyncio.gather(*(one() for _ in range(calls)))
            took = [seconds for _, seconds in results]
            out[name] = {
                "timed_out": sum(not ok for ok, _ in results) / calls,
                "p50": statistics.median(took),
                "max": max(took),
                "waited": len(waits),
                "wait_max": max(waits, default=0.0),
            }
            await client.aclose()
    return out


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - not on Windows
        return None
    return uvloop.new_event_loop


def main(n: int = 2000, rounds: int = 5, concurrency: int = 32) -> None:
    import logging

    from gateway.logs import configure_logging

    configure_logging("console", "info")  # the gateway's default: debug lines filtered out
    logging.getLogger("aiohttp").setLevel(logging.ERROR)
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:  # the gateway's loop
        cpu = runner.run(cpu_per_call(n, rounds, concurrency))
        pool = runner.run(pool_at_latency())
    c = cpu["cpu_s_per_1000"]
    floor = c["aiohttp"]
    sizes = ", ".join(f"{size / 1024:.1f}" for size in cpu["sizes"])
    print(f"\n== LLM client (bodies {sizes} KB; median of {rounds} interleaved rounds) ==")
    rows = [
        ("openai SDK, client.post (before)", c["sdk"]),
        ("plain aiohttp, same body (floor)", c["aiohttp"]),
        ("OpenAICompatibleLLM (shipped)", c["client"]),
    ]
    for label, cpu_s in rows:
        print(f"{label:<36} {cpu_s:6.3f} CPU-s/1000 calls  {cpu_s / floor:5.2f}x floor")
    print(f"SDK / shipped: {c['sdk'] / c['client']:.2f}x the CPU per call")
    print("pool at latency: 64 router calls, 16 connections, 0.2 s a call, timeout 0.5 s")
    for name, r in pool.items():
        waited = "(not measured)"
        if name == "client":
            waited = f"{r['waited']:.0f} calls, max {r['wait_max']:.2f} s"
        print(
            f"  {name:<7} timed out {r['timed_out']:4.0%}  p50 {r['p50']:.2f} s  "
            f"max {r['max']:.2f} s  waited for a connection: {waited}"
        )


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        _serve(float(sys.argv[2]))
    else:
        main(*(int(arg) for arg in sys.argv[1:2]))
