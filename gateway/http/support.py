"""The support API (``/support/``): the live event feed, open handoffs, a thread's state
and transcript, and the actions a person takes: reply, release to the bot, close. The
psychologist's insights (``gateway.http.insights``) are served here too, behind the same token."""

from __future__ import annotations

import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.conversation.sessions import close_action, release_action, support_reply
from gateway.http.insights import routes as insights_routes
from gateway.http.keys import SETTINGS, STORE
from gateway.store.threads import ActionRefused, Store

__all__ = ["create_support_app", "type_matches"]

log = structlog.get_logger("gateway.http.support")
routes = web.RouteTableDef()

WINDOW = timedelta(hours=24)
HEARTBEAT_SECONDS = 15.0


def _store(request: web.Request) -> Store:
    return request.config_dict[STORE]


@web.middleware
async def bearer_auth(request: web.Request, handler: Any) -> web.StreamResponse:
    token = request.config_dict[SETTINGS].support_token
    if not token:
        return web.json_response(
            {"error": "support API disabled: set SUPPORT_TOKEN to enable it"}, status=404
        )
    given = request.headers.get("Authorization", "")
    expected = f"Bearer {token}"
    if not hmac.compare_digest(given.encode(), expected.encode()):
        return web.json_response(
            {"error": "missing or wrong bearer token"},
            status=401,
            headers={"WWW-Authenticate": 'Bearer realm="mel-support"'},
        )
    return await handler(request)  # type: ignore[no-any-return]


def type_matches(event_type: str, patterns: list[str]) -> bool:
    """``session.*`` matches every session event; an empty list matches everything."""
    return not patterns or any(
        event_type == p or (p.endswith("*") and event_type.startswith(p[:-1])) for p in patterns
    )


@routes.get("/events")
async def events(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: ``id`` = stream id, ``event`` = type, ``data`` = the envelope.

    Resumes after ``Last-Event-ID`` (or ``?after=``); without either, starts live.
    ``?types=a,b.*`` and ``?thread=`` filter.
    """
    store = _store(request)
    patterns = [t for t in request.query.get("types", "").split(",") if t]
    thread = request.query.get("thread")
    cursor = request.headers.get("Last-Event-ID") or request.query.get("after") or "$"
    if cursor == "$":
        last: Any = await store.redis.xrevrange(store.keys.events, count=1)
        cursor = last[0][0].decode() if last else "0-0"
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    await response.write(b": mel support feed\n\n")
    idle = 0.0
    while True:
        batch = await store.read_events(cursor, count=200, block_ms=3000)
        if not batch:
            idle += 3.0
            if idle >= HEARTBEAT_SECONDS:
                await response.write(b": keepalive\n\n")
                idle = 0.0
            continue
        idle = 0.0
        for env in batch:
            cursor = env["id"]
            if not type_matches(env["type"], patterns):
                continue
            if thread and env["thread_id"] != thread:
                continue
            data = json.dumps(env, ensure_ascii=False)
            await response.write(
                f"id: {env['id']}\nevent: {env['type']}\ndata: {data}\n\n".encode()
            )


@routes.get("/handoffs")
async def handoffs(request: web.Request) -> web.Response:
    store = _store(request)
    items: Any = await store.redis.zrange(store.keys.handoffs_open, 0, -1, withscores=True)
    out = []
    for member, score in items:
        thread_id = member.decode()
        state = await store.thread_state(thread_id)
        out.append(
            {
                "thread_id": thread_id,
                "requested_at": state.get("handoff_requested_at")
                or datetime.fromtimestamp(score / 1000, UTC).isoformat(),
                "taken_at": state.get("handoff_taken_at") or None,
                "session_id": state.get("session_id") or None,
                "channel": state.get("channel"),
                "last_user_at": state.get("last_user_at"),
            }
        )
    return web.json_response({"handoffs": out})


async def _thread(request: web.Request) -> tuple[str, dict[str, str]]:
    thread_id = request.match_info["thread_id"]
    state = await _store(request).thread_state(thread_id)
    if not state:
        raise web.HTTPNotFound(
            text=json.dumps({"error": f"unknown thread {thread_id!r}"}),
            content_type="application/json",
        )
    return thread_id, state


@routes.get("/threads/{thread_id}")
async def thread(request: web.Request) -> web.Response:
    thread_id, state = await _thread(request)
    store = _store(request)
    transcript = [json.loads(h) for h in await store.history(thread_id)]
    return web.json_response(
        {
            "thread_id": thread_id,
            "state": state,
            "transcript": [{"role": m["role"], "content": m["content"]} for m in transcript],
        }
    )


class SupportMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=4096)
    author: str = Field("support", min_length=1, max_length=80)


def _conflict(message: str) -> web.Response:
    return web.json_response({"error": message}, status=409)


@routes.post("/threads/{thread_id}/messages")
async def send_message(request: web.Request) -> web.Response:
    thread_id, state = await _thread(request)
    try:
        body = SupportMessage.model_validate_json(await request.read())
    except ValidationError as exc:
        reason = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return web.json_response({"error": f"bad request: {reason}"}, status=400)
    last_user = state.get("last_user_at")
    if not last_user or datetime.now(UTC) - datetime.fromisoformat(last_user) > WINDOW:
        return _conflict(
            "outside WhatsApp's 24-hour customer-service window (the couple last wrote at "
            f"{last_user or 'never'}): only approved templates may be sent now"
        )
    try:
        ids = await _store(request).act(thread_id, support_reply(state, body.text, body.author))
    except ActionRefused as exc:
        return _conflict(f"thread changed, try again ({exc})")
    log.info("support.replied", by=body.author)
    return web.json_response({"status": "queued", "event_ids": ids}, status=202)


@routes.post("/threads/{thread_id}/release")
async def release(request: web.Request) -> web.Response:
    thread_id, state = await _thread(request)
    if state.get("mode") != "human":
        return _conflict("the thread is not with a person: nothing to release")
    try:
        ids = await _store(request).act(thread_id, release_action(state, reason="support"))
    except ActionRefused as exc:
        return _conflict(f"thread changed, try again ({exc})")
    return web.json_response({"status": "released", "event_ids": ids})


@routes.post("/threads/{thread_id}/close")
async def close(request: web.Request) -> web.Response:
    thread_id, state = await _thread(request)
    if not state.get("session_id"):
        return _conflict("the thread has no open session")
    try:
        ids = await _store(request).act(thread_id, close_action(state, "support_closed"))
    except ActionRefused as exc:
        return _conflict(f"thread changed, try again ({exc})")
    return web.json_response({"status": "closed", "event_ids": ids})


def create_support_app() -> web.Application:
    app = web.Application(middlewares=[bearer_auth])
    app.router.add_routes(routes)
    app.router.add_routes(insights_routes)
    return app
