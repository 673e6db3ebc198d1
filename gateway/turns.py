"""One turn: from a stored inbound message and its thread's state to a commit request.

Pure of Redis: it reads the loaded state, asks the agent, and says what to write.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from agent import LLM_FAILURE_REPLY, AskResult, ChatMessage
from channels import InboundMessage
from gateway.metrics import Metrics
from gateway.store import CommitRequest, LoadedThread, NewEvent, utc_now_iso

__all__ = ["Asker", "TurnRunner", "counter_after", "new_session_id"]

log = structlog.get_logger("gateway.turns")


class Asker(Protocol):
    """The agent port: ``agent.AgentChat`` is one."""

    async def ask(
        self,
        messages: list[ChatMessage],
        past_turns_without_tool_call: int | None = None,
        *,
        thread_id: str | None = None,
        household_id: str | None = None,
    ) -> AskResult: ...


def new_session_id() -> str:
    """Time-ordered, unique: ``s_<unix ms hex>_<random>``."""
    return f"s_{int(time.time() * 1000):x}_{uuid.uuid4().hex[:12]}"


def counter_after(previous: int, result: AskResult) -> int:
    """``pastTurnsWithoutToolCall`` after a turn.

    Reset to 0 when a tool ran; +1 after an agent turn with no tool call; unchanged by a
    guard preempt (the agent did not try), and unchanged when the LLM was unavailable or
    failed (the agent could not try either).
    """
    if result.outcome != "agent" and result.outcome != "tool_limit":
        return previous
    if result.ran_tools:
        return 0
    return previous + 1


@dataclass(frozen=True, slots=True)
class TurnOutput:
    commit: CommitRequest
    outcome: str


class TurnRunner:
    def __init__(self, agent: Asker, metrics: Metrics | None = None) -> None:
        self.agent = agent
        self.metrics = metrics

    async def run(self, thread: LoadedThread, msg: InboundMessage, received_at: str) -> TurnOutput:
        state = thread.state
        now = utc_now_iso()
        events: list[NewEvent] = []
        updates: dict[str, str] = {
            "channel": msg.channel,
            "business_number": msg.business_number,
            "user_number": msg.user_number,
            "last_message_at": now,
            "last_user_at": msg.timestamp.astimezone(UTC).isoformat(),
        }
        session_id = state.get("session_id", "")
        if not session_id:
            session_id = new_session_id()
            updates["session_id"] = session_id
            updates["session_started_at"] = now
            events.append(NewEvent("session.started", {"channel": msg.channel}))
        events.append(NewEvent("message.received", _received_data(msg, received_at)))

        mode = state.get("mode", "bot")
        if not msg.answerable:
            return TurnOutput(self._commit(msg, session_id, updates, [], events, None), "ignored")
        if mode == "human":
            return TurnOutput(self._commit(msg, session_id, updates, [], events, None), "muted")

        user = ChatMessage(role="user", content=msg.agent_text())
        history = [ChatMessage.model_validate_json(h) for h in thread.history]
        previous = int(state.get("counter", "0") or 0)
        result = await self.agent.ask([*history, user], previous, thread_id=msg.thread_id)
        updates["counter"] = str(counter_after(previous, result))
        reply = result.reply.content
        outcome: str = result.outcome
        if result.verdict is not None and result.verdict.preempt:
            outcome = f"preempt:{result.verdict.kind}"
            events.append(NewEvent("guard.preempted", {"kind": result.verdict.kind}))
        events.append(NewEvent(*_agent_event(result, msg)))
        if self.metrics is not None:
            self.metrics.turns.labels(outcome).inc()
        new_history = [
            user.model_dump_json(),
            ChatMessage(role="assistant", content=reply).model_dump_json(),
        ]
        return TurnOutput(
            self._commit(msg, session_id, updates, new_history, events, reply), outcome
        )

    def failed(self, thread: LoadedThread, msg: InboundMessage, error: BaseException) -> TurnOutput:
        """A turn that raised: answer with the PT-BR failure reply rather than retry forever.

        The history keeps the user's message so the next turn has the context.
        """
        session_id = thread.state.get("session_id", "") or new_session_id()
        updates = {"session_id": session_id, "last_message_at": utc_now_iso()}
        events = [
            NewEvent("message.received", _received_data(msg, "")),
            NewEvent(
                "agent.failed",
                {
                    "in_reply_to": msg.provider_message_id,
                    "outcome": "error",
                    "error": f"{type(error).__name__}: {error}",
                },
            ),
        ]
        if self.metrics is not None:
            self.metrics.turns.labels("error").inc()
        user = ChatMessage(role="user", content=msg.agent_text())
        history = [
            user.model_dump_json(),
            ChatMessage(role="assistant", content=LLM_FAILURE_REPLY).model_dump_json(),
        ]
        commit = self._commit(msg, session_id, updates, history, events, LLM_FAILURE_REPLY)
        return TurnOutput(commit, "error")

    @staticmethod
    def _commit(
        msg: InboundMessage,
        session_id: str,
        updates: dict[str, str],
        history: list[str],
        events: list[NewEvent],
        reply: str | None,
    ) -> CommitRequest:
        return CommitRequest(
            thread_id=msg.thread_id,
            message_id=msg.provider_message_id,
            session_id=session_id,
            state=updates,
            history=history,
            events=events,
            reply_text=reply or None,
            reply_to=msg.user_number,
            channel=msg.channel,
        )


def _received_data(msg: InboundMessage, received_at: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "message_id": msg.provider_message_id,
        "channel": msg.channel,
        "kind": msg.kind,
        "text": msg.agent_text(),
        "received_at": received_at,
        "provider_timestamp": msg.timestamp.astimezone(UTC).isoformat(),
    }
    if msg.profile_name:
        data["profile_name"] = msg.profile_name
    if msg.media:
        data["media"] = [m.model_dump(exclude_none=True) for m in msg.media]
    if msg.location:
        data["location"] = msg.location.model_dump(exclude_none=True)
    if msg.payload:
        data["payload"] = msg.payload
    if msg.reaction:
        data["reaction"] = msg.reaction
    if msg.reply_to:
        data["reply_to"] = msg.reply_to
    return data


def _agent_event(result: AskResult, msg: InboundMessage) -> tuple[str, dict[str, Any]]:
    data: dict[str, Any] = {
        "in_reply_to": msg.provider_message_id,
        "outcome": result.outcome,
        "text": result.reply.content,
        "tool_calls": [
            {"name": c.name, "arguments": c.arguments, "error": c.error} for c in result.tool_calls
        ],
        "llm_calls": result.llm_calls,
        "usage": {
            "prompt_tokens": result.usage.prompt_tokens,
            "completion_tokens": result.usage.completion_tokens,
            "cost_micro_usd": result.usage.cost_micro_usd,
        },
    }
    kind = "agent.failed" if result.outcome == "error" else "agent.replied"
    return kind, data


def parse_received_at(value: str) -> float:
    """Unix seconds of an ISO timestamp (for latency metrics)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
