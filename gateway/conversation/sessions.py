"""Sessions and handoffs outside a turn: closing, releasing, and the sweeper that finds
idle sessions and handoffs nobody picked up."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping
from typing import Any

import structlog

from gateway.store.threads import Action, ActionRefused, NewEvent, Store, StoreDown, utc_now_iso

__all__ = [
    "ABNORMAL_PREFIXES",
    "SessionSweeper",
    "close_events",
    "close_state",
    "closed_event_type",
    "release_action",
    "support_reply",
]

log = structlog.get_logger("gateway.conversation.sessions")

# Close reasons that make a session end abnormally (psychologist: a fact, not a judgement).
ABNORMAL_PREFIXES = ("error", "worker_lost")

# What a closed session leaves behind in the thread state ('' deletes the field).
_CLEARED = {
    "session_id": "",
    "session_started_at": "",
    "active_agent": "",
    "previous_intent": "",
    "previous_domain": "",
    "route_bypassed": "",
    "continuity_signal": "",
    "counter": "0",
    "mode": "bot",
    "handoff_requested_at": "",
    "handoff_taken_at": "",
}


def closed_event_type(reason: str) -> str:
    return "session.closed_abnormally" if reason.startswith(ABNORMAL_PREFIXES) else "session.closed"


def close_state() -> dict[str, str]:
    return dict(_CLEARED)


def close_events(state: Mapping[str, str], reason: str) -> list[NewEvent]:
    data: dict[str, Any] = {
        "reason": reason,
        "started_at": state.get("session_started_at") or None,
        "closed_at": utc_now_iso(),
    }
    return [NewEvent(closed_event_type(reason), data)]


def close_action(state: Mapping[str, str], reason: str, *, idle: bool = False) -> Action:
    """Close the thread's open session (support close, idle timeout)."""
    session_id = state.get("session_id", "")
    events = close_events(state, reason)
    if state.get("mode") == "human":
        events.insert(0, NewEvent("support.released", {"reason": reason}))
    return Action(
        session_id=session_id,
        events=events,
        state=close_state(),
        require={"session_id": session_id, "last_message_at": state.get("last_message_at", "")},
        idle=idle,
        session_open=False,
        handoff_open=False,
    )


def release_action(
    state: Mapping[str, str], *, reason: str, reply: Mapping[str, str] | None = None
) -> Action:
    """Hand a human-mode thread back to the bot."""
    return Action(
        session_id=state.get("session_id", ""),
        events=[NewEvent("support.released", {"reason": reason})],
        state={"mode": "bot", "handoff_requested_at": "", "handoff_taken_at": ""},
        require={"mode": "human", "handoff_requested_at": state.get("handoff_requested_at", "")},
        handoff_open=False,
        reply=reply,
    )


def support_reply(state: Mapping[str, str], text: str, author: str) -> Action:
    """A support person's message to the couple, delivered by the workers."""
    reply_id = f"support-{uuid.uuid4().hex}"
    return Action(
        session_id=state.get("session_id", ""),
        events=[NewEvent("support.replied", {"reply_id": reply_id, "text": text, "by": author})],
        state={"handoff_taken_at": state.get("handoff_taken_at") or utc_now_iso()},
        reply={
            "id": reply_id,
            "text": text,
            "to": state.get("user_number", ""),
            "channel": state.get("channel", ""),
            "author": f"support:{author}",
        },
    )


class SessionSweeper:
    """Closes idle sessions and returns unclaimed handoffs to the bot, periodically."""

    def __init__(
        self,
        store: Store,
        *,
        idle_timeout: float,
        handoff_timeout: float,
        handoff_expired_message: str,
        interval: float | None = None,
    ) -> None:
        self.store = store
        self.idle_timeout = idle_timeout
        self.handoff_timeout = handoff_timeout
        self.handoff_expired_message = handoff_expired_message
        self.interval = interval or min(30.0, max(0.2, min(idle_timeout, handoff_timeout) / 10))
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(*StoreDown):
                await self.sweep()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval)

    def stop(self) -> None:
        self._stopping.set()

    async def sweep(self) -> tuple[int, int]:
        """One pass: (sessions closed, handoffs expired)."""
        closed = expired = 0
        for thread_id, _ in await self.store.due(
            self.store.keys.handoffs_open, self.handoff_timeout
        ):
            state = await self.store.thread_state(thread_id)
            if state.get("mode") != "human" or state.get("handoff_taken_at"):
                continue  # taken by a person (or already released): not ours to expire
            reply = {
                "id": f"handoff-expired-{uuid.uuid4().hex}",
                "text": self.handoff_expired_message,
                "to": state.get("user_number", ""),
                "channel": state.get("channel", ""),
                "author": "bot",
            }
            action = release_action(state, reason="handoff_timeout", reply=reply)
            action = Action(
                session_id=action.session_id,
                events=[NewEvent("session.human_handoff.expired", {}), *action.events],
                state=action.state,
                require=action.require,
                handoff_open=False,
                reply=reply,
            )
            with contextlib.suppress(ActionRefused):
                await self.store.act(thread_id, action)
                expired += 1
                log.info("handoff.expired", thread=thread_id[-4:])
        for thread_id, _ in await self.store.due(self.store.keys.sessions_open, self.idle_timeout):
            state = await self.store.thread_state(thread_id)
            if not state.get("session_id"):
                await self.store.redis.zrem(self.store.keys.sessions_open, thread_id)
                continue
            with contextlib.suppress(ActionRefused):
                await self.store.act(thread_id, close_action(state, "idle_timeout", idle=True))
                closed += 1
        return closed, expired
