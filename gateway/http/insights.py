"""The psychologist's insights on the support API (``/support/``, same bearer token).

==========================================  ================================================
``GET /insights``                           hypotheses of current analyses across sessions,
                                            grouped by target agent (``?status=``,
                                            ``?agent=``, ``?limit=``)
``GET /sessions/{id}/analysis``             the current analysis, superseded ones, failures,
                                            with what each cost
``GET /sessions/{id}/events``               the session's event log: what evidence cites
``POST /hypotheses/{id}/accept``            ``{"for_anamnese": true, "by": "ana"}`` optional
``POST /hypotheses/{id}/dismiss``           ``{"by": "ana", "note": "…"}`` optional
``POST /sessions/{id}/reanalyze``           ``{"tier": "heavy", "by": "ana"}`` optional; 202
==========================================  ================================================

A transition out of anything but ``proposed`` is a 409. A reanalysis is enqueued as the
event ``psychologist.reanalysis_requested`` (its id is returned) and run by a psychologist
consumer; its outcome is ``psychologist.analysis_completed`` (``data.trigger_event_id`` =
that id) or ``psychologist.analysis_failed``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.psychologist import HypothesisStatus, InvalidTransition, TierName
from gateway.http.keys import STORE
from gateway.store.psychologist import PsychologistStore

__all__ = ["group_by_agent", "routes"]

routes = web.RouteTableDef()

_Body = TypeVar("_Body", bound=BaseModel)


class AcceptBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    for_anamnese: bool = False
    by: str = Field("support", min_length=1, max_length=80)


class DismissBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    by: str = Field("support", min_length=1, max_length=80)
    note: str | None = Field(None, max_length=2000)


class ReanalyzeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tier: TierName | None = None
    by: str = Field("support", min_length=1, max_length=80)


def _db(request: web.Request) -> PsychologistStore:
    return PsychologistStore(request.config_dict[STORE])


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def _body(request: web.Request, model: type[_Body]) -> _Body:
    """The optional JSON body (empty: the defaults); 400 with the reason when invalid."""
    raw = await request.read()
    try:
        return model.model_validate_json(raw) if raw.strip() else model()
    except ValidationError as exc:
        reason = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"bad request: {reason}"}), content_type="application/json"
        ) from None


def group_by_agent(hypotheses: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``[{"target_agent", "count", "hypotheses"}]`` by agent name; within an agent, the
    most confident first (then the newest)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for h in hypotheses:
        groups[h["target_agent"]].append(h)
    out = []
    for agent in sorted(groups):
        items = sorted(groups[agent], key=lambda h: h["created_at"], reverse=True)
        items.sort(key=lambda h: h["confidence"], reverse=True)
        out.append({"target_agent": agent, "count": len(items), "hypotheses": items})
    return out


def _with_links(h: dict[str, Any]) -> dict[str, Any]:
    return {**h, "events_url": f"/support/sessions/{h['session_id']}/events"}


@routes.get("/insights")
async def insights(request: web.Request) -> web.Response:
    try:
        limit = max(1, min(int(request.query.get("limit", "500")), 5000))
    except ValueError:
        return _error(400, "limit must be an integer")
    statuses = {s for s in request.query.get("status", "").split(",") if s}
    unknown = statuses - {s.value for s in HypothesisStatus}
    if unknown:
        known = ", ".join(s.value for s in HypothesisStatus)
        return _error(400, f"unknown status {sorted(unknown)} (known: {known})")
    agent = request.query.get("agent")
    found = await _db(request).current_hypotheses(limit)
    shown = [
        _with_links(h)
        for h in found
        if (not statuses or h["status"] in statuses) and (not agent or h["target_agent"] == agent)
    ]
    return web.json_response({"count": len(shown), "agents": group_by_agent(shown)})


@routes.get("/sessions/{session_id}/analysis")
async def session_analysis(request: web.Request) -> web.Response:
    db = _db(request)
    session_id = request.match_info["session_id"]
    body = await db.session_analyses(session_id)
    if body["status"] == "not_analysed":
        await db.session_log(session_id)  # 404 for a session nobody recorded
    return web.json_response(body)


@routes.get("/sessions/{session_id}/events")
async def session_events(request: web.Request) -> web.Response:
    recorded = await _db(request).session_log(request.match_info["session_id"])
    return web.json_response(
        {
            "session_id": recorded.session_id,
            "thread_id": recorded.thread_id,
            "events": recorded.events,
        }
    )


async def _decide(
    request: web.Request, target: HypothesisStatus, *, by: str, **kwargs: Any
) -> web.Response:
    try:
        hypothesis, ids = await _db(request).transition(
            request.match_info["hypothesis_id"], target, by=by, **kwargs
        )
    except InvalidTransition as exc:
        return web.json_response({"error": str(exc), "status": exc.current}, status=409)
    return web.json_response({"hypothesis": hypothesis, "event_ids": ids})


@routes.post("/hypotheses/{hypothesis_id}/accept")
async def accept(request: web.Request) -> web.Response:
    body = await _body(request, AcceptBody)
    return await _decide(
        request, HypothesisStatus.ACCEPTED, by=body.by, for_anamnese=body.for_anamnese
    )


@routes.post("/hypotheses/{hypothesis_id}/dismiss")
async def dismiss(request: web.Request) -> web.Response:
    body = await _body(request, DismissBody)
    return await _decide(request, HypothesisStatus.DISMISSED, by=body.by, note=body.note)


@routes.post("/sessions/{session_id}/reanalyze")
async def reanalyze(request: web.Request) -> web.Response:
    body = await _body(request, ReanalyzeBody)
    session_id = request.match_info["session_id"]
    event_id = await _db(request).request_reanalysis(session_id, tier=body.tier, by=body.by)
    return web.json_response(
        {"status": "queued", "session_id": session_id, "request_event_id": event_id},
        status=202,
    )
