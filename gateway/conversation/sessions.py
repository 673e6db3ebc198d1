"""Session and handoff rules outside a turn: close a session, hand a thread back to the
bot, a support person's message — each as a ``ThreadAction`` the store applies only if
the thread has not changed since (its ``require``)."""

from __future__ import annotations

import uuid

from events import (
    HumanHandoffExpired,
    Payload,
    SessionClosed,
    SessionClosedAbnormally,
    SupportReleased,
    SupportReplied,
)
from gateway.clock import utc_now_iso
from gateway.conversation.changes import Reply, ThreadAction
from gateway.conversation.thread import ThreadState

__all__ = [
    "ABNORMAL_PREFIXES",
    "close_action",
    "close_event",
    "expire_handoff_action",
    "release_action",
    "support_reply_action",
]

ABNORMAL_PREFIXES = ("error", "worker_lost")
"""Close reasons that make a session end abnormally (for the psychologist, a fact)."""


def close_event(state: ThreadState, reason: str) -> SessionClosed | SessionClosedAbnormally:
    """``session.closed`` or, for an error or a lost worker, ``session.closed_abnormally``."""
    kind = SessionClosedAbnormally if reason.startswith(ABNORMAL_PREFIXES) else SessionClosed
    return kind(reason=reason, started_at=state.session_started_at or None, closed_at=utc_now_iso())


def close_action(state: ThreadState, reason: str, *, idle: bool = False) -> ThreadAction:
    """Close the thread's open session (support close, idle timeout)."""
    events: list[Payload] = [close_event(state, reason)]
    if state.with_person:
        events.insert(0, SupportReleased(reason=reason))
    return ThreadAction(
        session_id=state.session_id,
        events=events,
        state=state.closed().changes_from(state),
        require={"session_id": state.session_id, "last_message_at": state.last_message_at},
        idle=idle,
        session_open=False,
        handoff_open=False,
    )


def release_action(state: ThreadState, *, reason: str) -> ThreadAction:
    """Hand a thread that is with a person back to the bot."""
    return ThreadAction(
        session_id=state.session_id,
        events=[SupportReleased(reason=reason)],
        state=state.released().changes_from(state),
        require={"mode": "human", "handoff_requested_at": state.handoff_requested_at},
        handoff_open=False,
    )


def expire_handoff_action(state: ThreadState, message: str) -> ThreadAction:
    """Nobody took the handoff in time: back to the bot, and the couple is told."""
    released = release_action(state, reason="handoff_timeout")
    return ThreadAction(
        session_id=released.session_id,
        events=[HumanHandoffExpired(), *released.events],
        state=released.state,
        require=released.require,
        handoff_open=False,
        reply=Reply(
            id=f"handoff-expired-{uuid.uuid4().hex}",
            text=message,
            to=state.user_number,
            channel=state.channel,
        ),
    )


def support_reply_action(state: ThreadState, text: str, author: str) -> ThreadAction:
    """A support person's message to the couple, delivered by the workers."""
    reply_id = f"support-{uuid.uuid4().hex}"
    return ThreadAction(
        session_id=state.session_id,
        events=[SupportReplied(reply_id=reply_id, text=text, by=author)],
        state=state.taken(utc_now_iso()).changes_from(state),
        reply=Reply(
            id=reply_id,
            text=text,
            to=state.user_number,
            channel=state.channel,
            author=f"support:{author}",
        ),
    )
