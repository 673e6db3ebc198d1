"""LLM cassettes: record once, replay without the model, misses named clearly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agent import (
    LLM_FAILURE_REPLY,
    AgentChat,
    ChatMessage,
    LLMError,
    LLMResponse,
    ToolCallRequest,
    Usage,
    build_system_prompt,
    default_registry,
)
from agent.cassette import (
    CassetteError,
    CassetteLLM,
    CassetteMiss,
    canonical_request,
    mask_dates,
    request_key,
)
from agent.dates import SAO_PAULO


class ScriptedLLM:
    """An in-process LLMClient: answers ``reply-<n>`` (or a tool call) and counts calls."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[tuple[str, list[ChatMessage]]] = []
        self.delay = delay
        self.closed = False

    async def complete(
        self, profile: str, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> LLMResponse:
        self.calls.append((profile, list(messages)))
        n = len(self.calls)
        if self.delay:
            await asyncio.sleep(self.delay / n)  # later calls finish first
        if messages[-1].content == "use a tool":
            message = ChatMessage(
                role="assistant",
                tool_calls=(ToolCallRequest(id="call_1", name="budgetTotal", arguments="{}"),),
            )
        else:
            message = ChatMessage(role="assistant", content=f"reply-{n}")
        return LLMResponse(message, Usage(10, n, 7, 1), "fake-model", profile, "stop")

    async def aclose(self) -> None:
        self.closed = True


def conversation(text: str, day: int = 15) -> list[ChatMessage]:
    now = datetime(2026, 6, day, 10, 0, tzinfo=SAO_PAULO)
    return [
        ChatMessage(role="system", content=build_system_prompt(now)),
        ChatMessage(role="user", content=text),
    ]


async def test_record_then_replay_without_calling_the_model(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    inner = ScriptedLLM()
    recorder = CassetteLLM(inner, path, "record")
    first = await recorder.complete("agent", conversation("oi"), max_tokens=50)
    tool = await recorder.complete("agent", conversation("use a tool"))
    assert len(inner.calls) == 2
    await recorder.aclose()
    assert inner.closed

    replayer = CassetteLLM(None, path, "replay")
    assert replayer.recorded == 2
    again = await replayer.complete("agent", conversation("oi"), max_tokens=50)
    assert again == first  # message, usage, model, profile, finish_reason
    tool_again = await replayer.complete("agent", conversation("use a tool"))
    assert tool_again.message.tool_calls == tool.message.tool_calls
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["n"] for line in lines] == [0, 0]
    assert lines[0]["request"]["max_tokens"] == 50
    assert lines[0]["response"]["message"]["content"] == "reply-1"


async def test_identical_requests_get_their_responses_in_order(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    recorder = CassetteLLM(ScriptedLLM(), path, "record")
    recorded = [await recorder.complete("agent", conversation("oi")) for _ in range(3)]
    replayer = CassetteLLM(None, path, "replay")
    replayed = [await replayer.complete("agent", conversation("oi")) for _ in range(4)]
    texts = [r.message.content for r in replayed]
    assert texts[:3] == [r.message.content for r in recorded] == ["reply-1", "reply-2", "reply-3"]
    assert texts[3] == "reply-3"  # past the recording: the last one again


async def test_concurrent_recording_writes_whole_lines_in_occurrence_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.jsonl"
    recorder = CassetteLLM(ScriptedLLM(delay=0.2), path, "record")
    answers = await asyncio.gather(
        *(recorder.complete("agent", conversation("oi")) for _ in range(5)),
        *(recorder.complete("router", conversation(f"x{i}")) for i in range(5)),
    )
    lines = path.read_text().splitlines()
    assert len(lines) == 10
    assert all(json.loads(line)["key"] for line in lines)  # no torn line
    replayer = CassetteLLM(None, path, "replay")
    again = [await replayer.complete("agent", conversation("oi")) for _ in range(5)]
    # the n-th call made gets the n-th response, even though they finished in reverse
    assert [a.message.content for a in again] == [a.message.content for a in answers[:5]]


async def test_keys_are_stable_across_days_but_not_across_user_text(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    await CassetteLLM(ScriptedLLM(), path, "record").complete("agent", conversation("oi", day=1))
    replayer = CassetteLLM(None, path, "replay")
    tomorrow = await replayer.complete("agent", conversation("oi", day=2))
    assert tomorrow.message.content == "reply-1"
    with pytest.raises(CassetteMiss):
        await replayer.complete("agent", conversation("olá", day=1))
    strict = CassetteLLM(None, path, "replay", normalise=None)
    with pytest.raises(CassetteMiss):  # without normalisation the date is part of the key
        await strict.complete("agent", conversation("oi", day=2))


def test_mask_dates_touches_system_messages_only() -> None:
    request = canonical_request(
        "agent",
        [
            ChatMessage(
                role="system", content="Hoje é terça-feira, 2 de junho de 2026. Mês 2026-06."
            ),
            ChatMessage(role="user", content="gastos de 2026-05-10?"),
        ],
    )
    masked = mask_dates(request)
    assert masked["messages"][0]["content"] == "Hoje é <date>. Mês <month>."
    assert masked["messages"][1]["content"] == "gastos de 2026-05-10?"


def test_the_key_covers_tools_and_options_and_is_order_independent() -> None:
    msgs = conversation("oi")
    base = request_key(canonical_request("agent", msgs))
    assert base == request_key(canonical_request("agent", list(msgs)))
    assert base != request_key(canonical_request("router", msgs))
    assert base != request_key(canonical_request("agent", msgs, max_tokens=10))
    assert base != request_key(canonical_request("agent", msgs, tool_choice="auto"))
    assert base != request_key(canonical_request("agent", msgs, tools=[{"type": "function"}]))
    assert base != request_key(
        canonical_request("agent", msgs, response_format={"type": "json_object"})
    )
    a = canonical_request("agent", msgs, tools=[{"a": 1, "b": 2}])
    b = canonical_request("agent", msgs, tools=[{"b": 2, "a": 1}])
    assert request_key(a) == request_key(b)


async def test_a_miss_names_the_profile_key_and_last_user_message(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    await CassetteLLM(ScriptedLLM(), path, "record").complete("agent", conversation("oi"))
    replayer = CassetteLLM(None, path, "replay")
    msgs = [*conversation("oi"), ChatMessage(role="assistant", content="reply-1"),
            ChatMessage(role="user", content="quanto gastamos em mercado este mês?")]  # fmt: skip
    with pytest.raises(CassetteMiss) as caught:
        await replayer.complete("agent", msgs)
    err = caught.value
    assert isinstance(err, LLMError)
    assert err.profile == "agent"
    key, _request = replayer.key_of("agent", msgs)
    assert err.key == key
    assert key[:16] in str(err)
    assert "quanto gastamos em mercado" in str(err)
    assert "differs after message 1" in str(err) or "at message 2" in str(err)
    with pytest.raises(CassetteMiss, match="no request of profile 'router'"):
        await replayer.complete("router", msgs)


async def test_agent_chat_turns_a_miss_into_its_failure_reply(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("")
    chat = AgentChat(CassetteLLM(None, path, "replay"), default_registry(), None)
    result = await chat.ask([ChatMessage(role="user", content="qual o total do mês?")], 0)
    assert result.outcome == "error"
    assert result.reply.content == LLM_FAILURE_REPLY


async def test_agent_chat_replays_a_recorded_turn(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    inner = ScriptedLLM()
    fixed = lambda: datetime(2026, 6, 15, 10, 0, tzinfo=SAO_PAULO)  # noqa: E731
    recorder = AgentChat(CassetteLLM(inner, path, "record"), default_registry(), None, clock=fixed)
    first = await recorder.ask([ChatMessage(role="user", content="oi")], 0)
    tomorrow = lambda: datetime(2026, 6, 16, 9, 0, tzinfo=SAO_PAULO)  # noqa: E731
    replayer = AgentChat(
        CassetteLLM(None, path, "replay"), default_registry(), None, clock=tomorrow
    )
    again = await replayer.ask([ChatMessage(role="user", content="oi")], 0)
    assert again.reply.content == first.reply.content == "reply-1"
    assert len(inner.calls) == 1


def test_bad_setups_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="no such file to replay"):
        CassetteLLM(None, tmp_path / "missing.jsonl", "replay")
    with pytest.raises(CassetteError, match="record mode needs a configured LLM"):
        CassetteLLM(None, tmp_path / "c.jsonl", "record")
    with pytest.raises(CassetteError, match="mode must be"):
        CassetteLLM(None, tmp_path / "c.jsonl", "rewind")  # type: ignore[arg-type]


async def test_a_torn_last_line_is_skipped_and_recording_continues(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    recorder = CassetteLLM(ScriptedLLM(), path, "record")
    await recorder.complete("agent", conversation("oi"))
    with path.open("a") as fh:
        fh.write('{"v":1,"key":"abc","n":0,"resp')  # a crash mid-write
    again = CassetteLLM(ScriptedLLM(), path, "record")  # a restart: appends after the old
    assert again.recorded == 1
    await again.complete("agent", conversation("oi"))
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert [json.loads(lines[i])["n"] for i in (0, 2)] == [0, 1]
    assert CassetteLLM(None, path, "replay").recorded == 2
