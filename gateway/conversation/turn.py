"""One turn: from a stored message and its thread's state to what the store writes.

Pure of Redis: it reads the loaded thread, asks the session-controlled agents, and says
what to commit. Sessions open on the first message and close on END_SESSION here; the
other closes (idle, support, errors) are in ``conversation.sessions``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from agent import LLM_FAILURE_REPLY, ChatMessage, Outcome
from agent.routing import RouteState, SupportStatus, TurnResult
from channels import InboundMessage
from events import (
    AgentFailed,
    AgentReplied,
    MessageParked,
    MessageReceived,
    Payload,
    SessionStarted,
)
from gateway.clock import now_ms, parse_iso, utc_now_iso
from gateway.conversation.changes import Reply, TurnCommit
from gateway.conversation.sessions import close_event
from gateway.conversation.thread import StoredMessage, ThreadState
from gateway.media import MediaInput

__all__ = ["Conversation", "TurnRunner", "counter_after", "new_session_id"]

log = structlog.get_logger("gateway.conversation.turn")


class Conversation(Protocol):
    """The agent port: ``agent.SessionControl`` is one."""

    async def turn(
        self,
        messages: Sequence[ChatMessage],
        state: RouteState | None = None,
        past_turns_without_tool_call: int | None = None,
        *,
        thread_id: str | None = None,
        household_id: str | None = None,
        support: SupportStatus = "none",
        last_preempt: str | None = None,
    ) -> TurnResult: ...


def new_session_id() -> str:
    """Time-ordered, unique: ``s_<unix ms hex>_<random>``."""
    return f"s_{int(time.time() * 1000):x}_{uuid.uuid4().hex[:12]}"


def counter_after(previous: int, result: TurnResult) -> int:
    """``pastTurnsWithoutToolCall`` after a turn.

    Reset to 0 when a tool ran; +1 after a domain-agent turn with no tool call; unchanged
    by a guard preempt or a handoff/end node (no agent tried), and unchanged when the LLM
    was unavailable or failed (the agent could not try either). The loop reply starts a
    new count: the couple's next rephrasing reaches the agent, and the loop can be
    called again only after the agent failed anew.
    """
    if result.outcome is Outcome.PREEMPT_LOOP:
        return 0
    if not result.outcome.agent_tried:
        return previous
    return 0 if result.ran_tools else previous + 1


RETRY_DELAYS = (5.0, 10.0, 20.0, 40.0, 60.0)
"""Seconds before each new try of a message parked by an outage (then every 60 s)."""


@dataclass(frozen=True, slots=True)
class TurnOutput:
    commit: TurnCommit
    outcome: Outcome


class TurnRunner:
    """Turns a stored message into a commit. ``support_status`` says whether a person can
    take a handoff now; an outage of the model parks the message (the couple is told once)
    for up to ``outage_window`` seconds, then it gets the failure reply."""

    def __init__(
        self,
        conversation: Conversation,
        *,
        support_status: Callable[[], SupportStatus] = lambda: "none",
        outage_window: float = 900.0,
        holding_message: str = "",
        media: MediaPort | None = None,
        served: Callable[[InboundMessage], bool] = lambda msg: True,
        welcome_message: str = "",
    ) -> None:
        self.conversation = conversation
        self.support_status = support_status
        self.outage_window = outage_window
        self.holding_message = holding_message
        self.media = media
        self.served = served
        self.welcome_message = welcome_message

    async def run(
        self, state: ThreadState, history: Sequence[str], stored: StoredMessage
    ) -> TurnOutput:
        msg = stored.message
        now = utc_now_iso()
        before = state
        state = replace(
            state,
            channel=msg.channel,
            business_number=msg.business_number,
            user_number=msg.user_number,
            reply_from=msg.reply_from,
            last_message_at=now,
            last_user_at=msg.timestamp.astimezone(UTC).isoformat(),
        )
        events: list[Payload] = []
        if not state.session_id:
            state = state.opened(new_session_id(), now)
            events.append(SessionStarted(channel=msg.channel))
        session_id = state.session_id  # the session this turn belongs to, even if it ends
        served = self.served(msg)
        listening = msg.answerable and served
        answering = listening and not state.with_person
        media = (  # with a person attending, a voice note is still transcribed for them
            await self.media.read(msg, images=answering)
            if self.media is not None and msg.media and listening else None
        )  # fmt: skip
        if not before.outage_since:  # a parked message was recorded on its first try
            events.append(received_event(stored, media, not_answered=not served))

        if not answering:
            outcome = Outcome.MUTED if listening else Outcome.IGNORED
            commit = _commit(msg, state.changes_from(before), session_id, [], events, ())
            return TurnOutput(commit, outcome)

        text = media.text if media is not None else _with_edit(msg, history)
        user = ChatMessage(
            role="user", content=text, images=media.images if media is not None else ()
        )
        direct = self.welcome_message if msg.kind == "welcome" else None
        if media is not None and media.reply:
            direct = media.reply
        if direct:  # answered without the model: the greeting, or "please type it"
            outcome = Outcome.WELCOME if msg.kind == "welcome" else Outcome.MEDIA_UNUSABLE
            entries = [_user_entry(user, msg), _assistant_entry(direct)]
            commit = _commit(
                msg, state.changes_from(before), session_id, entries, events, (direct,)
            )
            return TurnOutput(commit, outcome)

        past = [ChatMessage.model_validate_json(h) for h in history]
        support = self.support_status()
        result = await self.conversation.turn(
            [*past, user],
            state.route,
            state.counter,
            thread_id=msg.thread_id,
            support=support,
            last_preempt=state.last_preempt or None,
        )
        if result.outcome is Outcome.OUTAGE and not self._outage_over(state, now):
            return self._park(state, before, msg, session_id, events)
        events.extend(result.events)
        events.append(agent_event(result, msg))
        route = result.route_decision
        state = replace(
            state.recovered(),
            counter=counter_after(state.counter, result),
            active_agent=result.state.active_agent or "",
            previous_intent=result.state.previous_intent or "",
            previous_domain=result.state.previous_domain or "",
            route_bypassed=route.route_bypassed if route is not None else False,
            route_method=route.method if route is not None else "",
            continuity_signal=_json(result.continuity_signal),
            last_preempt=result.verdict.kind or "" if result.verdict is not None else "",
        )
        handoff_open: bool | None = None
        waiting_open: bool | None = None
        if result.human_handoff_requested:
            if support == "available":
                state = state.handed_off(now)
                handoff_open = True
                waiting_open = False if before.waiting_for_person else None
            else:  # nobody can take it now: queued for support, the bot stays
                state = state.queued(now)
                waiting_open = True
        session_open: bool | None = True
        if result.session_ended:
            events.append(close_event(state, "user_ended"))
            state = state.closed()
            session_open, handoff_open = False, False
            waiting_open = False if before.waiting_for_person else waiting_open
        replies = (result.reply.content, *result.extra_replies)
        new_history = [_user_entry(user, msg), *(_assistant_entry(r) for r in replies)]
        commit = _commit(msg, state.changes_from(before), session_id, new_history, events, replies)
        return TurnOutput(
            replace(
                commit,
                session_open=session_open,
                handoff_open=handoff_open,
                waiting_open=waiting_open,
            ),
            result.outcome,
        )

    def _outage_over(self, state: ThreadState, now: str) -> bool:
        """The model has been unreachable for this message longer than the window."""
        if not state.outage_since:
            return False
        waited = parse_iso(now) - parse_iso(state.outage_since)
        return waited.total_seconds() >= self.outage_window

    def _park(
        self,
        state: ThreadState,
        before: ThreadState,
        msg: InboundMessage,
        session_id: str,
        events: list[Payload],
    ) -> TurnOutput:
        """The model is down: the message waits at the head of the inbox, retried with
        backoff; the couple is told once per outage."""
        now = utc_now_iso()
        delay = RETRY_DELAYS[min(state.outage_retries, len(RETRY_DELAYS) - 1)]
        due = now_ms() + int(delay * 1000)
        parked = state.parked(now, due)
        events.append(
            MessageParked(
                message_id=msg.provider_message_id,
                attempt=parked.outage_retries,
                retry_at=datetime.fromtimestamp(due / 1000, UTC).isoformat(),
                outage_since=parked.outage_since,
            )
        )
        commit = _commit(msg, parked.changes_from(before), session_id, [], events, ())
        if not state.outage_since and self.holding_message:
            holding = Reply(
                id=f"{msg.provider_message_id}:holding",
                text=self.holding_message,
                to=msg.user_number,
                channel=msg.channel,
                from_=msg.reply_from,
            )
            commit = replace(commit, replies=[holding])
        return TurnOutput(replace(commit, park_until_ms=due), Outcome.OUTAGE)

    def failed(self, state: ThreadState, stored: StoredMessage, error: BaseException) -> TurnOutput:
        """A turn that raised: answer with the PT-BR failure reply rather than retry forever,
        and close the session abnormally (``error: …``) so it gets analysed."""
        msg = stored.message
        session_id = state.session_id or new_session_id()
        reason = f"error: {type(error).__name__}: {error}"[:500]
        events: list[Payload] = [
            received_event(stored),
            AgentFailed(in_reply_to=msg.provider_message_id, outcome=Outcome.ERROR, error=reason),
            close_event(state, reason),
        ]
        user = ChatMessage(role="user", content=msg.agent_text())
        history = [
            user.model_dump_json(),
            ChatMessage(role="assistant", content=LLM_FAILURE_REPLY).model_dump_json(),
        ]
        after = replace(state.closed().recovered(), last_message_at=utc_now_iso())
        commit = _commit(
            msg, after.changes_from(state), session_id, history, events, (LLM_FAILURE_REPLY,)
        )
        return TurnOutput(
            replace(commit, session_open=False, handoff_open=False, waiting_open=False),
            Outcome.ERROR,
        )


class MediaPort(Protocol):
    """Reads a message's media for the agent (``gateway.media.MediaReader``)."""

    async def read(self, msg: InboundMessage, *, images: bool = True) -> MediaInput: ...


def _user_entry(user: ChatMessage, msg: InboundMessage) -> str:
    """A history entry for the couple's message; it keeps the provider id (for edits)."""
    return json.dumps(
        {**user.model_dump(mode="json"), "message_id": msg.provider_message_id},
        ensure_ascii=False,
    )


def _assistant_entry(text: str) -> str:
    return ChatMessage(role="assistant", content=text).model_dump_json()


def _with_edit(msg: InboundMessage, history: Sequence[str]) -> str:
    """What the agent reads; an edit names the text it corrects, when it is in history."""
    text = msg.agent_text()
    if msg.kind != "edit" or not msg.edit_of:
        return text
    for raw in reversed(history):
        entry = json.loads(raw)
        if entry.get("message_id") == msg.edit_of:
            return (
                f'[o usuário corrigiu a mensagem "{entry.get("content", "")}"; '
                f'texto corrigido: "{msg.text}"]'
            )
    return text


def _json(value: dict[str, Any] | None) -> str:
    return json.dumps(value) if value else ""


def _commit(
    msg: InboundMessage,
    state: dict[str, str],
    session_id: str,
    history: list[str],
    events: list[Payload],
    replies: Sequence[str],
) -> TurnCommit:
    """The commit of a turn; its replies get ids ``<message id>``, ``<message id>:2``, …"""
    texts = [text for text in replies if text]
    return TurnCommit(
        thread_id=msg.thread_id,
        message_id=msg.provider_message_id,
        session_id=session_id,
        state=state,
        history=history,
        events=events,
        replies=[
            Reply(
                id=msg.provider_message_id if n == 1 else f"{msg.provider_message_id}:{n}",
                text=text,
                to=msg.user_number,
                channel=msg.channel,
                from_=msg.reply_from,
            )
            for n, text in enumerate(texts, start=1)
        ],
    )


def received_event(
    stored: StoredMessage, media: MediaInput | None = None, *, not_answered: bool = False
) -> MessageReceived:
    msg = stored.message
    return MessageReceived(
        message_id=msg.provider_message_id,
        channel=msg.channel,
        kind=msg.kind,
        text=media.text if media is not None else msg.agent_text(),
        transcript=media.transcript if media is not None else None,
        media_problem=media.problem if media is not None else None,
        not_answered="not_served" if not_answered else None,
        received_at=stored.received_at,
        provider_timestamp=msg.timestamp.astimezone(UTC).isoformat(),
        profile_name=msg.profile_name or None,
        media=[m.model_dump(exclude_none=True) for m in msg.media] or None,
        location=msg.location.model_dump(exclude_none=True) if msg.location else None,
        payload=msg.payload or None,
        reaction=msg.reaction or None,
        reply_to=msg.reply_to or None,
    )


def agent_event(result: TurnResult, msg: InboundMessage) -> AgentReplied | AgentFailed:
    route = result.route_decision.as_dict() if result.route_decision is not None else None
    tool_calls = [
        {"name": c.name, "arguments": c.arguments, "error": c.error} for c in result.tool_calls
    ]
    usage = {
        profile: {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "cost_micro_usd": u.cost_micro_usd,
        }
        for profile, u in result.usage_by_profile.items()
    }
    event = AgentFailed if result.outcome is Outcome.ERROR else AgentReplied
    return event(
        in_reply_to=msg.provider_message_id,
        outcome=result.outcome,
        text=result.reply.content,
        agent=result.state.active_agent,
        route_decision=route,
        tool_calls=tool_calls,
        llm_calls=result.llm_calls,
        usage=usage,
    )
