"""OpenAICompatibleLLM over HTTP against the fake chat-completions server."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import pytest
from aiohttp import web

from agent.errors import LLMBadResponse, LLMError, LLMTimeout, LLMUnavailable
from agent.llm import OpenAICompatibleLLM
from agent.messages import ChatMessage, ToolCallRequest
from tests.fakes._server import LoopbackServer
from tests.fakes.llm import (
    FakeLLM,
    echo_responder,
    error,
    hang,
    no_choices,
    raw,
    text,
    tool_call,
    tool_calls,
)
from tests.integration.conftest import profiles_with

MakeLLM = Callable[..., OpenAICompatibleLLM]
HELLO = [ChatMessage(role="user", content="oi")]


async def test_a_text_answer_with_usage_and_cost(fake_llm: FakeLLM, make_llm: MakeLLM) -> None:
    llm = make_llm(base_url=fake_llm.base_url)
    fake_llm.script(text("Oi! Como posso ajudar?", prompt_tokens=10_000, completion_tokens=1000))

    response = await llm.complete("psychologist", HELLO)

    assert response.message == ChatMessage(role="assistant", content="Oi! Como posso ajudar?")
    assert (response.profile, response.model, response.finish_reason) == (
        "psychologist",
        "gpt-4.1",
        "stop",
    )
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (10_000, 1000)
    assert response.usage.cost_micro_usd == 20_000 + 8_000  # 2.00 and 8.00 USD per Mtok
    assert response.usage.calls == 1


async def test_the_request_carries_the_profile_and_only_what_was_given(
    fake_llm: FakeLLM, make_llm: MakeLLM
) -> None:
    llm = make_llm(base_url=fake_llm.base_url)

    await llm.complete("route_continuity", HELLO)
    await llm.complete(
        "agent",
        HELLO,
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        tool_choice="auto",
        max_tokens=50,
        response_format={"type": "json_object"},
    )

    plain, full = fake_llm.calls
    assert plain == {
        "model": "gpt-4.1-mini",
        "messages": [{"role": "user", "content": "oi"}],
        "temperature": 0.0,
        "max_tokens": 80,
    }
    assert full["max_tokens"] == 50  # the per-call override
    assert full["temperature"] == 0.2
    assert full["tool_choice"] == "auto"
    assert full["response_format"] == {"type": "json_object"}
    assert full["tools"][0]["function"]["name"] == "f"
    assert fake_llm.requests[0].path == "/v1/chat/completions"


async def test_tool_calls_are_parsed(fake_llm: FakeLLM, make_llm: MakeLLM) -> None:
    llm = make_llm(base_url=fake_llm.base_url)
    fake_llm.script(
        tool_calls(
            ("budgetTotal", {"month": "2026-06"}, "call_1"),
            ("spendingByCategory", "{}", "call_2"),
            content="Vou olhar.",
        )
    )

    response = await llm.complete("agent", HELLO)

    assert response.finish_reason == "tool_calls"
    assert response.message.content == "Vou olhar."
    assert response.message.tool_calls == (
        ToolCallRequest(id="call_1", name="budgetTotal", arguments='{"month": "2026-06"}'),
        ToolCallRequest(id="call_2", name="spendingByCategory", arguments="{}"),
    )


async def test_a_tool_round_trip_is_accepted_by_the_validating_server(
    fake_llm: FakeLLM, make_llm: MakeLLM
) -> None:
    llm = make_llm(base_url=fake_llm.base_url)
    fake_llm.script(tool_call("budgetTotal", {"month": "2026-06"}, id="call_9"), "Pronto.")
    first = await llm.complete("agent", HELLO)

    second = await llm.complete(
        "agent",
        [
            *HELLO,
            first.message,
            ChatMessage(role="tool", tool_call_id="call_9", content='{"spent_cents": 0}'),
        ],
    )

    assert second.message.content == "Pronto."
    assert fake_llm.last_call["messages"][1]["tool_calls"][0]["id"] == "call_9"


async def test_a_request_the_real_api_would_reject_is_rejected(
    fake_llm: FakeLLM, make_llm: MakeLLM
) -> None:
    llm = make_llm(base_url=fake_llm.base_url)
    orphan = ChatMessage(role="tool", tool_call_id="call_x", content="{}")

    with pytest.raises(LLMError) as caught:
        await llm.complete("agent", [*HELLO, orphan])

    assert caught.value.status == 400
    assert fake_llm.requests[0].status == 400


async def test_the_api_key_is_sent_as_a_bearer_token(make_llm: MakeLLM) -> None:
    async with FakeLLM.running(api_key="sk-right") as fake:
        good = make_llm(base_url=fake.base_url, api_key="sk-right")
        assert (await good.complete("agent", HELLO)).message.content == "ok"
        assert fake.requests[0].headers["Authorization"] == "Bearer sk-right"

        bad = make_llm(base_url=fake.base_url, api_key="sk-wrong")
        with pytest.raises(LLMError) as caught:
            await bad.complete("agent", HELLO)
        assert caught.value.status == 401
        assert "sk-wrong" not in str(caught.value)


async def test_a_keyless_endpoint_gets_the_placeholder(
    fake_llm: FakeLLM, make_llm: MakeLLM
) -> None:
    await make_llm(base_url=fake_llm.base_url).complete("agent", HELLO)

    assert fake_llm.requests[0].headers["Authorization"] == "Bearer not-needed"


async def test_each_profile_goes_to_its_own_endpoint_with_its_own_key(make_llm: MakeLLM) -> None:
    async with (
        FakeLLM.running(api_key="oci-key") as oci,
        FakeLLM.running(api_key="default-key") as default,
    ):
        profiles = profiles_with(
            agent={"base_url": oci.base_url, "api_key_env": "OCI_GENAI_KEY", "model": "cohere"},
            router={"api_key_env": "UNSET_KEY"},
        )
        llm = make_llm(
            base_url=default.base_url,
            api_key="default-key",
            profiles=profiles,
            environ={"OCI_GENAI_KEY": "oci-key"},
        )

        await llm.complete("agent", HELLO)
        await llm.complete("router", HELLO)
        await llm.complete("psychologist", HELLO)

        assert [call["model"] for call in oci.calls] == ["cohere"]
        assert oci.requests[0].headers["Authorization"] == "Bearer oci-key"
        assert [call["model"] for call in default.calls] == ["gpt-4.1-mini", "gpt-4.1"]
        assert {r.headers["Authorization"] for r in default.requests} == {"Bearer default-key"}
        pools = llm.stats().pools  # one connection pool per distinct endpoint
        assert sorted(pool.endpoint for pool in pools) == sorted([oci.base_url, default.base_url])


async def test_no_endpoint_raises_unavailable_without_a_call(make_llm: MakeLLM) -> None:
    llm = make_llm()

    with pytest.raises(LLMUnavailable, match="no endpoint configured"):
        await llm.complete("agent", HELLO)


async def test_a_hanging_endpoint_times_out_at_the_profile_timeout(
    fake_llm: FakeLLM, make_llm: MakeLLM
) -> None:
    llm = make_llm(
        base_url=fake_llm.base_url, profiles=profiles_with(agent={"timeout_seconds": 0.2})
    )
    fake_llm.script(hang())

    started = time.perf_counter()
    with pytest.raises(LLMTimeout) as caught:
        await llm.complete("agent", HELLO)

    assert 0.15 < time.perf_counter() - started < 2
    assert caught.value.profile == "agent"
    assert fake_llm.call_count == 1
    assert fake_llm.requests[0].status == 0  # never answered


async def test_slow_models_are_slow(make_llm: MakeLLM) -> None:
    async with FakeLLM.running(latency_by_model={"gpt-4.1": 0.3}) as fake:
        llm = make_llm(base_url=fake.base_url)
        started = time.perf_counter()
        await llm.complete("agent", HELLO)
        fast = time.perf_counter() - started
        started = time.perf_counter()
        await llm.complete("psychologist", HELLO)
        slow = time.perf_counter() - started

    assert fast < 0.25 <= slow
    assert len(fake.calls_for("gpt-4.1")) == 1


@pytest.mark.parametrize("status", [400, 429, 500, 503])
async def test_http_errors_are_llm_errors_without_retries(
    fake_llm: FakeLLM, make_llm: MakeLLM, status: int
) -> None:
    llm = make_llm(base_url=fake_llm.base_url)
    fake_llm.script(error(status))

    with pytest.raises(LLMError) as caught:
        await llm.complete("agent", HELLO)

    assert type(caught.value) is LLMError
    assert caught.value.status == status
    assert str(caught.value) == f"LLM profile 'agent': HTTP {status}"
    assert fake_llm.call_count == 1


async def test_no_choices_is_a_bad_response(fake_llm: FakeLLM, make_llm: MakeLLM) -> None:
    fake_llm.script(no_choices())

    with pytest.raises(LLMBadResponse, match="no choices"):
        await make_llm(base_url=fake_llm.base_url).complete("agent", HELLO)


async def test_a_response_without_usage_counts_zero_tokens(
    fake_llm: FakeLLM, make_llm: MakeLLM
) -> None:
    fake_llm.script(
        raw(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "llama",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": None},
                        "finish_reason": "stop",
                    }
                ],
            }
        )
    )

    response = await make_llm(base_url=fake_llm.base_url).complete("agent", HELLO)

    assert response.message.content == ""
    assert (response.usage.total_tokens, response.usage.cost_micro_usd) == (0, 0)
    assert response.model == "llama"


async def test_a_refused_connection_is_an_llm_error(make_llm: MakeLLM) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = make_llm(base_url=f"http://127.0.0.1:{port}/v1")

    with pytest.raises(LLMError, match="connection failed"):
        await llm.complete("agent", HELLO)


async def test_the_fake_can_echo_and_answer_at_the_root_path(make_llm: MakeLLM) -> None:
    async with FakeLLM.running(responder=echo_responder) as fake:
        llm = make_llm(base_url=fake.root_url)

        response = await llm.complete("agent", [ChatMessage(role="user", content="gastei 10")])

        assert response.message.content == "Recebi: gastei 10"
        assert fake.requests[0].path == "/chat/completions"


async def test_the_fake_can_be_watched_while_a_call_is_in_flight(make_llm: MakeLLM) -> None:
    async with FakeLLM.running(delay=0.2) as fake:
        llm = make_llm(base_url=fake.base_url)
        fake.script(["primeira", "segunda", "sobra"])
        assert fake.pending == 3

        calls = asyncio.gather(*(llm.complete("agent", HELLO) for _ in range(2)))
        seen = await fake.wait_for_calls(2, timeout=1)
        assert len(seen) == 2
        assert {r.status for r in fake.requests} == {0}  # received, not answered yet
        answers = await calls

        assert sorted(a.message.content for a in answers) == ["primeira", "segunda"]
        assert {r.status for r in fake.requests} == {200}
        fake.reset()
        assert (fake.call_count, fake.pending) == (0, 0)
        with pytest.raises(AssertionError, match="expected 1 LLM calls"):
            await fake.wait_for_calls(1, timeout=0.05)


class _RawEndpoint(LoopbackServer):
    """Answers every chat call with ``body`` verbatim (what the fake cannot send)."""

    def __init__(self, body: bytes, content_type: str = "application/json") -> None:
        super().__init__()
        self.body = body
        self.content_type = content_type

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._answer)

    async def _answer(self, request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=self.body, content_type=self.content_type)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'{"choices": [', "not JSON"),
        (b"<html>Bad Gateway</html>", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"choices": [{"message": "oi"}]}', "has no message"),
        (b'{"choices": [{"message": {"content": ["a"]}}]}', "content is not text"),
        (b'{"choices": [{"message": {"tool_calls": [{"type": "custom"}]}}]}', "unsupported"),
        (
            b'{"choices": [{"message": {"tool_calls": [{"function": {"name": "f"}}]}}]}',
            "has no id",
        ),
    ],
)
async def test_an_unusable_body_is_a_bad_response(
    make_llm: MakeLLM, body: bytes, problem: str
) -> None:
    async with _RawEndpoint(body) as endpoint:
        llm = make_llm(base_url=f"{endpoint.base_url}/v1")

        with pytest.raises(LLMBadResponse, match=problem) as caught:
            await llm.complete("agent", HELLO)

    assert not caught.value.transient


async def test_tool_call_arguments_given_as_an_object_become_json_text(make_llm: MakeLLM) -> None:
    body = (
        b'{"model": "m", "choices": [{"finish_reason": "tool_calls", "message": {"tool_calls":'
        b' [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}'
        b']}}], "usage": {"prompt_tokens": 5, "completion_tokens": null}}'
    )
    async with _RawEndpoint(body) as endpoint:
        llm = make_llm(base_url=f"{endpoint.base_url}/v1")
        response = await llm.complete("agent", HELLO)

    assert response.message.tool_calls == (
        ToolCallRequest(id="c1", name="f", arguments='{"a": 1}'),
    )
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (5, 0)
    assert (response.model, response.finish_reason) == ("m", "tool_calls")


async def test_a_connection_closed_by_the_server_is_a_transient_llm_error(
    make_llm: MakeLLM,
) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        llm = make_llm(base_url=f"http://127.0.0.1:{port}/v1")
        with pytest.raises(LLMError, match="connection failed") as caught:
            await llm.complete("agent", HELLO)
    finally:
        server.close()
        await server.wait_closed()

    assert type(caught.value) is LLMError
    assert caught.value.transient


async def test_a_redirect_is_not_followed(make_llm: MakeLLM) -> None:
    class Redirecting(_RawEndpoint):
        async def _answer(self, request: web.Request) -> web.Response:
            raise web.HTTPTemporaryRedirect("http://127.0.0.1:1/elsewhere")

    async with Redirecting(b"") as endpoint:
        llm = make_llm(base_url=f"{endpoint.base_url}/v1")
        with pytest.raises(LLMError) as caught:
            await llm.complete("agent", HELLO)

    assert (caught.value.status, caught.value.reason) == (307, "HTTP 307")


async def test_the_openai_organization_and_project_variables_become_headers(
    fake_llm: FakeLLM, make_llm: MakeLLM
) -> None:
    environ = {"OPENAI_ORG_ID": "org-1", "OPENAI_PROJECT_ID": "proj-1"}
    await make_llm(base_url=fake_llm.base_url, environ=environ).complete("agent", HELLO)
    await make_llm(base_url=fake_llm.base_url).complete("agent", HELLO)

    with_ids, without = (r.headers for r in fake_llm.requests)
    assert (with_ids["OpenAI-Organization"], with_ids["OpenAI-Project"]) == ("org-1", "proj-1")
    assert "OpenAI-Organization" not in without
    assert with_ids["Content-Type"] == "application/json"
