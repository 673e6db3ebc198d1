"""Events as the gateway publishes them, for tests that seed a session's log directly."""

from __future__ import annotations

import uuid

from events import (
    AgentReplied,
    MessageReceived,
    SessionClosed,
    SessionClosedAbnormally,
    SessionStarted,
)
from gateway.conversation.sessions import close_event
from gateway.conversation.thread import ThreadState

STARTED_AT = "2026-06-03T12:00:00.000Z"


def started() -> SessionStarted:
    return SessionStarted(channel="twilio")


def received(text: str) -> MessageReceived:
    return MessageReceived(
        message_id="SM" + uuid.uuid4().hex,
        channel="twilio",
        kind="text",
        text=text,
        received_at=STARTED_AT,
        provider_timestamp=STARTED_AT,
    )


def replied(text: str, *, agent: str | None = "budget_agent") -> AgentReplied:
    return AgentReplied(
        in_reply_to="SM" + uuid.uuid4().hex,
        outcome="agent",
        text=text,
        agent=agent,
        route_decision=None,
        tool_calls=[],
        llm_calls=1,
        usage={},
    )


def closed(reason: str) -> SessionClosed | SessionClosedAbnormally:
    """``session.closed`` (or ``…_abnormally``) for a session started at STARTED_AT."""
    return close_event(ThreadState(session_started_at=STARTED_AT), reason)
