"""One turn: from a stored inbound message and its thread's state to a commit request.

Pure of Redis: it reads the loaded state, asks the session-controlled agents, and says
what to write. Sessions open on the first message and close on END_SESSION here; the
other closes (idle, support, errors) are in ``gateway.conversation.sessions``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from agent import LLM_FAILURE_REPLY, ChatMessage
from agent.routing import RouteState, TurnResult
from channels import InboundMessage
from gateway.conversation.sessions import close_events, close_state
from gateway.metrics import Metrics
from gateway.store.threads import CommitRequest, LoadedThread, NewEvent, utc_now_iso

__all__ = ["Conversation", "TurnOutput", "TurnRunner", "counter_after", "new_session_id"]

log = structlog.get_logger("gateway.conversation.turn")


class Conversation(Protocol):
    """The agent port: ``agent.SessionControl`` is one."""

    async def turn(
        self,
        messages: list[ChatMessage],
        state: RouteState,
        past_turns_without_tool_call: int | None = None,
        *,
        thread_id: str | None = None,
        household_id: str | None = None,
        support_available: bool = False,
    ) -> TurnResult: ...


def new_session_id() -> str:
    """Time-ordered, unique: ``s_<unix ms hex>_<random>``."""
    return f"s_{int(time.time() * 1000):x}_{uuid.uuid4().hex[:12]}"


def counter_after(previous: int, result: TurnResult) -> int:
    """``pastTurnsWithoutToolCall`` after a turn.

    Reset to 0 when a tool ran; +1 after a domain-agent turn with no tool call; unchanged
    by a guard preempt or a handoff/end node (no agent tried), and unchanged when the LLM
    was unavailable or failed (the agent could not try either).
    """
    if result.outcome not in ("agent", "tool_limit"):
        return previous
    return 0 if result.ran_tools else previous + 1


@dataclass(frozen=True, slots=True)
class TurnOutput:
    commit: CommitRequest
    outcome: str


class TurnRunner:
    def __init__(
        self,
        conversation: Conversation,
        metrics: Metrics | None = None,
        *,
        support_available: Any = None,
    ) -> None:
        self.conversation = conversation
        self.metrics = metrics
        self.support_available = support_available or (lambda: False)

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

        if not msg.answerable or state.get("mode") == "human":
            outcome = "muted" if msg.answerable else "ignored"
            self._count(outcome)
            return TurnOutput(self._commit(msg, session_id, updates, [], events, None), outcome)

        user = ChatMessage(role="user", content=msg.agent_text())
        history = [ChatMessage.model_validate_json(h) for h in thread.history]
        previous = int(state.get("counter", "0") or 0)
        route = RouteState(
            active_agent=state.get("active_agent") or None,
            previous_intent=state.get("previous_intent") or None,
            previous_domain=state.get("previous_domain") or None,
        )
        support = bool(self.support_available())
        result = await self.conversation.turn(
            [*history, user], route, previous, thread_id=msg.thread_id, support_available=support
        )
        reply = result.reply.content
        events.extend(NewEvent(kind, data) for kind, data in result.events)
        events.append(NewEvent(*_agent_event(result, msg)))
        updates["counter"] = str(counter_after(previous, result))
        updates.update(_route_fields(result))
        handoff_open: bool | None = None
        if result.human_handoff_requested and support:  # nobody to take it: the bot stays
            updates.update(mode="human", handoff_requested_at=now, handoff_taken_at="")
            handoff_open = True
        new_history = [
            user.model_dump_json(),
            ChatMessage(role="assistant", content=reply).model_dump_json(),
        ]
        session_open: bool | None = True
        if result.session_ended:
            events.extend(close_events({**state, **updates}, "user_ended"))
            updates.update(close_state())
            session_open, handoff_open = False, False
        self._count(result.outcome)
        commit = self._commit(msg, session_id, updates, new_history, events, reply)
        return TurnOutput(
            replace(commit, session_open=session_open, handoff_open=handoff_open), result.outcome
        )

    def failed(self, thread: LoadedThread, msg: InboundMessage, error: BaseException) -> TurnOutput:
        """A turn that raised: answer with the PT-BR failure reply rather than retry forever,
        and close the session abnormally (``error: …``) so it gets analysed."""
        state = thread.state
        session_id = state.get("session_id", "") or new_session_id()
        reason = f"error: {type(error).__name__}: {error}"[:500]
        events = [
            NewEvent("message.received", _received_data(msg, "")),
            NewEvent(
                "agent.failed",
                {"in_reply_to": msg.provider_message_id, "outcome": "error", "error": reason},
            ),
            *close_events(state, reason),
        ]
        self._count("error")
        user = ChatMessage(role="user", content=msg.agent_text())
        history = [
            user.model_dump_json(),
            ChatMessage(role="assistant", content=LLM_FAILURE_REPLY).model_dump_json(),
        ]
        updates = {**close_state(), "last_message_at": utc_now_iso()}
        commit = self._commit(msg, session_id, updates, history, events, LLM_FAILURE_REPLY)
        return TurnOutput(replace(commit, session_open=False, handoff_open=False), "error")

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.turns.labels(outcome).inc()

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
            session_open=True,
        )


def _route_fields(result: TurnResult) -> dict[str, str]:
    """The turn state the spec asks for: active agent, route_bypassed, continuity signal."""
    decision = result.route_decision or {}
    return {
        "active_agent": result.state.active_agent or "",
        "previous_intent": result.state.previous_intent or "",
        "previous_domain": result.state.previous_domain or "",
        "route_bypassed": "1" if decision.get("route_bypassed") else "",
        "route_method": str(decision.get("method") or ""),
        "continuity_signal": json.dumps(result.continuity_signal)
        if result.continuity_signal
        else "",
    }


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


def _agent_event(result: TurnResult, msg: InboundMessage) -> tuple[str, dict[str, Any]]:
    data: dict[str, Any] = {
        "in_reply_to": msg.provider_message_id,
        "outcome": result.outcome,
        "text": result.reply.content,
        "agent": result.state.active_agent,
        "route_decision": result.route_decision,
        "tool_calls": [
            {"name": c.name, "arguments": c.arguments, "error": c.error} for c in result.tool_calls
        ],
        "llm_calls": result.llm_calls,
        "usage": {
            profile: {
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "cost_micro_usd": u.cost_micro_usd,
            }
            for profile, u in result.usage_by_profile.items()
        },
    }
    kind = "agent.failed" if result.outcome == "error" else "agent.replied"
    return kind, data


def parse_received_at(value: str) -> float:
    """Unix seconds of an ISO timestamp (for latency metrics)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
