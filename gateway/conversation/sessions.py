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
    SupportClaimed,
    SupportReleased,
    SupportReplied,
)
from gateway.clock import utc_now_iso
from gateway.conversation.changes import Reply, ThreadAction
from gateway.conversation.thread import ThreadState
from gateway.errors import Conflict

__all__ = [
    "ABNORMAL_PREFIXES",
    "NothingToClaim",
    "claim_action",
    "close_action",
    "close_event",
    "expire_handoff_action",
    "release_action",
    "support_reply_action",
]

ABNORMAL_PREFIXES = ("error", "worker_lost")
"""Close reasons that make a session end abnormally (for the psychologist, a fact)."""


def close_event(
    state: ThreadState, reason: str, by: str | None = None
) -> SessionClosed | SessionClosedAbnormally:
    """``session.closed`` or, for an error or a lost worker, ``session.closed_abnormally``."""
    started, closed = state.session_started_at or None, utc_now_iso()
    if reason.startswith(ABNORMAL_PREFIXES):
        return SessionClosedAbnormally(reason=reason, started_at=started, closed_at=closed)
    return SessionClosed(reason=reason, started_at=started, closed_at=closed, by=by)


def _message(state: ThreadState, kind: str, text: str) -> Reply | None:
    """A message to the couple about what support did (``text`` empty: none)."""
    if not text:
        return None
    return Reply(
        id=f"{kind}-{uuid.uuid4().hex}",
        text=text,
        to=state.user_number,
        channel=state.channel,
        from_=state.reply_from,
    )


def close_action(
    state: ThreadState,
    reason: str,
    *,
    idle: bool = False,
    message: str = "",
    by: str | None = None,
) -> ThreadAction:
    """Close the thread's open session (support close, idle timeout); ``message`` tells
    the couple (``SUPPORT_CLOSE_MESSAGE``); ``by``: the person who closed it."""
    events: list[Payload] = [close_event(state, reason, by)]
    if state.with_person:
        events.insert(0, SupportReleased(reason=reason, by=by))
    return ThreadAction(
        session_id=state.session_id,
        events=events,
        state=state.closed().changes_from(state),
        require={"session_id": state.session_id, "last_message_at": state.last_message_at},
        idle=idle,
        session_open=False,
        handoff_open=False,
        waiting_open=False,
        reply=_message(state, "closed", message),
    )


def release_action(
    state: ThreadState, *, reason: str, message: str = "", by: str | None = None
) -> ThreadAction:
    """Hand a thread that is with a person back to the bot; ``message`` tells the couple
    (``SUPPORT_RELEASE_MESSAGE``); ``by``: the person who released it."""
    return ThreadAction(
        session_id=state.session_id,
        events=[SupportReleased(reason=reason, by=by)],
        state=state.released().changes_from(state),
        require={"mode": "human", "handoff_requested_at": state.handoff_requested_at},
        handoff_open=False,
        reply=_message(state, "released", message),
    )


def expire_handoff_action(state: ThreadState, message: str) -> ThreadAction:
    """Nobody took the handoff in time: back to the bot, and the couple is told."""
    released = release_action(state, reason="handoff_timeout", message=message)
    return ThreadAction(
        session_id=released.session_id,
        events=[HumanHandoffExpired(), *released.events],
        state=released.state,
        require=released.require,
        handoff_open=False,
        reply=released.reply,
    )


class NothingToClaim(Conflict):
    """The thread has no open handoff and no waiting request."""


def claim_action(state: ThreadState, by: str) -> ThreadAction:
    """``by`` takes the thread's open handoff or waiting request, exclusively: refused
    (``require``) if anyone took it, or the request changed, since ``state`` was read.
    A waiting request becomes a handoff that person holds (the bot goes silent)."""
    if not (state.with_person or state.waiting_for_person):
        raise NothingToClaim("no open handoff and no waiting request on this thread")
    was_waiting = state.waiting_for_person
    taken = state.taken(utc_now_iso(), by)
    return ThreadAction(
        session_id=state.session_id,
        events=[SupportClaimed(by=by, request="waiting" if was_waiting else "open")],
        state=taken.changes_from(state),
        require={
            "handoff_taken_at": "",
            "handoff_taken_by": "",
            "handoff_requested_at": state.handoff_requested_at,
            "handoff_waiting_since": state.handoff_waiting_since,
        },
        handoff_open=True if was_waiting else None,
        waiting_open=False if was_waiting else None,
    )


def support_reply_action(
    state: ThreadState, text: str, author: str, *, exclusive: bool = False
) -> ThreadAction:
    """A support person's message to the couple, delivered by the workers. Answering a
    queued request for a person takes it: the thread is with that person from now on.
    ``exclusive``: refused if someone else took the thread since ``state`` was read."""
    reply_id = f"support-{uuid.uuid4().hex}"
    taken = state.taken(utc_now_iso(), author)
    was_waiting = state.waiting_for_person
    return ThreadAction(
        session_id=state.session_id,
        events=[SupportReplied(reply_id=reply_id, text=text, by=author)],
        state=taken.changes_from(state),
        require={"handoff_taken_by": state.handoff_taken_by} if exclusive else {},
        handoff_open=True if was_waiting else None,
        waiting_open=False if was_waiting else None,
        reply=Reply(
            id=reply_id,
            text=text,
            to=state.user_number,
            channel=state.channel,
            author=f"support:{author}",
            from_=state.reply_from,
        ),
    )
