"""The console's API (``/console/api/``, a console login): the support API's operations
(``gateway.http.support``, ``gateway.http.insights``' storage) with the author taken from
the session, plus the claim. Errors are the project's exceptions; the messages a person
reads at the console are PT-BR.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from agent.psychologist import HypothesisStatus
from gateway.conversation.sessions import NothingToClaim, claim_action
from gateway.conversation.thread import ThreadState
from gateway.errors import BadRequest, Conflict
from gateway.http.console.auth import current_login
from gateway.http.console.transcript import transcript
from gateway.http.feed import events
from gateway.http.insights import group_by_agent
from gateway.http.keys import STORE
from gateway.http.support import (
    close_thread,
    handoff_queue,
    parse_body,
    release_thread,
    reply,
    thread_state,
    window_closes_at,
)
from gateway.store import ActionRefused, Store
from gateway.store.console import ConsoleStore
from gateway.store.psychologist import PsychologistStore

__all__ = ["routes"]

routes = web.RouteTableDef()
routes.get("/api/events")(events)


def _store(request: web.Request) -> Store:
    return request.config_dict[STORE]


def _me(request: web.Request) -> str:
    return current_login(request).name


def _taken(state: ThreadState, me: str) -> Conflict:
    who = state.handoff_taken_by or "outra pessoa"
    return Conflict("já está com você" if who == me else f"já está com {who}")


async def _body(request: web.Request, model: type[BaseModel]) -> Any:
    raw = await request.read()
    return parse_body(model, raw) if raw.strip() else model()


def _status(state: ThreadState) -> str:
    if state.handoff_taken_at:
        return "taken"
    if state.with_person:
        return "open"
    return "waiting" if state.waiting_for_person else "bot"


@routes.get("/api/queue")
async def queue(request: web.Request) -> web.Response:
    """The support API's handoff queue (open, waiting, taken; oldest first)."""
    return web.json_response({"handoffs": await handoff_queue(_store(request))})


@routes.get("/api/threads/{thread_id}")
async def thread(request: web.Request) -> web.Response:
    """A thread as the console shows it: state, assignee, the 24-hour window, the
    transcript of its session (the open one, or ``?session=``) and its older sessions."""
    store = _store(request)
    thread_id = request.match_info["thread_id"]
    state = await thread_state(store, thread_id)
    session_id = request.query.get("session") or state.session_id
    shown: list[dict[str, Any]] = []
    if session_id:
        ids = await store.events.session_ids(session_id)
        found = await store.events.by_id(ids) if ids else []
        if any(e["thread_id"] != thread_id for e in found):
            raise BadRequest("that session belongs to another thread")
        shown = transcript(found)
    closes = window_closes_at(state)
    remaining = max(0, round((closes - datetime.now(UTC)).total_seconds())) if closes else 0
    older = await ConsoleStore(store).closed_sessions(thread_id)
    return web.json_response(
        {
            "thread_id": thread_id,
            "user": state.user_number or None,
            "channel": state.channel or None,
            "status": _status(state),
            "assignee": state.handoff_taken_by or None,
            "session_id": session_id or None,
            "session_open": bool(state.session_id) and session_id == state.session_id,
            "window": {
                "last_user_at": state.last_user_at or None,
                "closes_at": closes.isoformat() if closes else None,
                "remaining_seconds": remaining,
                "open": remaining > 0,
            },
            "transcript": shown,
            "sessions": [
                {
                    "session_id": sid,
                    "closed_at": datetime.fromtimestamp(ms / 1000, UTC).isoformat(),
                }
                for sid, ms in older
                if sid != session_id
            ],
        }
    )


@routes.post("/api/threads/{thread_id}/claim")
async def claim(request: web.Request) -> web.Response:
    """Take an open handoff or a waiting request, exclusively: the second agent gets a
    409 "já está com <nome>"."""
    store, me = _store(request), _me(request)
    thread_id = request.match_info["thread_id"]
    state = await thread_state(store, thread_id)
    if state.handoff_taken_at:
        if state.handoff_taken_by == me:
            return web.json_response({"status": "claimed", "assignee": me, "event_ids": []})
        raise _taken(state, me)
    try:
        ids = await store.threads.act(thread_id, claim_action(state, me))
    except NothingToClaim:
        raise Conflict("não há pedido de pessoa nesta conversa") from None
    except ActionRefused:
        now = await thread_state(store, thread_id)
        if now.handoff_taken_at:
            raise _taken(now, me) from None
        raise Conflict("a conversa mudou enquanto você agia: tente de novo") from None
    return web.json_response({"status": "claimed", "assignee": me, "event_ids": ids})


class ReplyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=4096)


@routes.post("/api/threads/{thread_id}/messages")
async def send(request: web.Request) -> web.Response:
    """A message to the couple, signed by the session's agent (202). Refused when another
    agent holds the thread, or outside the 24-hour window."""
    store, me = _store(request), _me(request)
    thread_id = request.match_info["thread_id"]
    state = await thread_state(store, thread_id)
    body = parse_body(ReplyBody, await request.read())
    if state.handoff_taken_by and state.handoff_taken_by != me:
        raise _taken(state, me)
    try:
        ids = await reply(store, thread_id, state, body.text, me, exclusive=True)
    except ActionRefused:
        raise _taken(await thread_state(store, thread_id), me) from None
    return web.json_response({"status": "queued", "event_ids": ids}, status=202)


@routes.post("/api/threads/{thread_id}/release")
async def release(request: web.Request) -> web.Response:
    thread_id = request.match_info["thread_id"]
    state = await thread_state(_store(request), thread_id)
    ids = await release_thread(request, thread_id, state, by=_me(request))
    return web.json_response({"status": "released", "event_ids": ids})


@routes.post("/api/threads/{thread_id}/close")
async def close(request: web.Request) -> web.Response:
    thread_id = request.match_info["thread_id"]
    state = await thread_state(_store(request), thread_id)
    ids = await close_thread(request, thread_id, state, by=_me(request))
    return web.json_response({"status": "closed", "session_id": state.session_id, "event_ids": ids})


@routes.get("/api/sessions/{session_id}")
async def session(request: web.Request) -> web.Response:
    """Any recorded session's transcript (evidence ids open here)."""
    recorded = await PsychologistStore(_store(request)).session_log(
        request.match_info["session_id"]
    )
    return web.json_response(
        {
            "session_id": recorded.session_id,
            "thread_id": recorded.thread_id,
            "transcript": transcript(recorded.events),
        }
    )


# --- insights --------------------------------------------------------------------------


@routes.get("/api/insights")
async def insights(request: web.Request) -> web.Response:
    """Hypotheses of current analyses grouped by agent; ``?status=proposed``,
    ``?thread=`` narrow them."""
    status = request.query.get("status")
    if status and status not in {s.value for s in HypothesisStatus}:
        raise BadRequest(f"unknown status {status!r}")
    thread_id = request.query.get("thread")
    found = await PsychologistStore(_store(request)).current_hypotheses(500)
    shown = [
        h
        for h in found
        if (not status or h["status"] == status) and (not thread_id or h["thread_id"] == thread_id)
    ]
    return web.json_response({"count": len(shown), "agents": group_by_agent(shown)})


class AcceptBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    for_anamnese: bool = False


class DismissBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str | None = Field(None, max_length=2000)


async def _decide(request: web.Request, target: HypothesisStatus, **kwargs: Any) -> web.Response:
    hypothesis, ids = await PsychologistStore(_store(request)).transition(
        request.match_info["hypothesis_id"], target, by=_me(request), **kwargs
    )
    return web.json_response({"hypothesis": hypothesis, "event_ids": ids})


@routes.post("/api/hypotheses/{hypothesis_id}/accept")
async def accept(request: web.Request) -> web.Response:
    body: AcceptBody = await _body(request, AcceptBody)
    return await _decide(request, HypothesisStatus.ACCEPTED, for_anamnese=body.for_anamnese)


@routes.post("/api/hypotheses/{hypothesis_id}/dismiss")
async def dismiss(request: web.Request) -> web.Response:
    body: DismissBody = await _body(request, DismissBody)
    return await _decide(request, HypothesisStatus.DISMISSED, note=body.note or None)


@routes.post("/api/sessions/{session_id}/reanalyze")
async def reanalyze(request: web.Request) -> web.Response:
    session_id = request.match_info["session_id"]
    event_id = await PsychologistStore(_store(request)).request_reanalysis(
        session_id, by=_me(request)
    )
    return web.json_response(
        {"status": "queued", "session_id": session_id, "request_event_id": event_id}, status=202
    )
