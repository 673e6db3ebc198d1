"""The support API (``/support/``): the live event feed, open handoffs, a thread's state
and transcript, and the actions a person takes: reply, release to the bot, close. The
psychologist's insights (``gateway.http.insights``) are served here too, behind the same token."""

from __future__ import annotations

import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import structlog
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.clock import parse_iso
from gateway.conversation.sessions import close_action, release_action, support_reply_action
from gateway.conversation.thread import ThreadState
from gateway.errors import BadRequest, Conflict, NotFound
from gateway.households import household_of, link, unlink
from gateway.http.feed import events
from gateway.http.insights import routes as insights_routes
from gateway.http.keys import COMPONENTS, SETTINGS, STORE
from gateway.store import Store

__all__ = [
    "check_window",
    "close_thread",
    "create_support_app",
    "handoff_queue",
    "parse_body",
    "release_thread",
    "reply",
    "thread_state",
    "window_closes_at",
]

log = structlog.get_logger("gateway.http.support")
routes = web.RouteTableDef()

WINDOW = timedelta(hours=24)
_Model = TypeVar("_Model", bound=BaseModel)


def _store(request: web.Request) -> Store:
    return request.config_dict[STORE]


@web.middleware
async def bearer_auth(request: web.Request, handler: Any) -> web.StreamResponse:
    token = request.config_dict[SETTINGS].support_token
    if not token:
        return web.json_response(
            {"error": "support API disabled: set SUPPORT_TOKEN to enable it"}, status=404
        )
    # a header with bytes that are not UTF-8 arrives surrogate-escaped: compare bytes
    given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
    expected = f"Bearer {token}".encode()
    if not hmac.compare_digest(given, expected):
        return web.json_response(
            {"error": "missing or wrong bearer token"},
            status=401,
            headers={"WWW-Authenticate": 'Bearer realm="mel-support"'},
        )
    return await handler(request)  # type: ignore[no-any-return]


@routes.get("/handoffs")
async def handoffs(request: web.Request) -> web.Response:
    return web.json_response({"handoffs": await handoff_queue(_store(request))})


async def handoff_queue(store: Store) -> list[dict[str, Any]]:
    """Open handoffs and queued requests for a person, oldest first, with how long each has
    waited: ``status`` is ``waiting`` (asked while nobody could take it; the bot still
    answers), ``open`` (the bot is silent, nobody took it yet) or ``taken`` (by
    ``taken_by``). Shared by the support API and the console."""
    threads = store.threads
    now = datetime.now(UTC)
    items: list[dict[str, Any]] = []
    for kind, found in (
        ("open", await threads.open_handoffs()),
        ("waiting", await threads.waiting_requests()),
    ):
        for thread_id, score in found:
            state = await threads.state(thread_id) or ThreadState()
            asked = (
                state.handoff_requested_at if kind == "open" else state.handoff_waiting_since
            ) or datetime.fromtimestamp(score / 1000, UTC).isoformat()
            status = "taken" if kind == "open" and state.handoff_taken_at else kind
            items.append(
                {
                    "thread_id": thread_id,
                    "status": status,
                    "requested_at": asked,
                    "waited_seconds": round((now - parse_iso(asked)).total_seconds()),
                    "taken_at": state.handoff_taken_at or None,
                    "taken_by": state.handoff_taken_by or None,
                    "session_id": state.session_id or None,
                    "channel": state.channel or None,
                    "last_user_at": state.last_user_at or None,
                }
            )
    items.sort(key=lambda item: str(item["requested_at"]))
    return items


async def _thread(request: web.Request) -> tuple[str, ThreadState]:
    thread_id = request.match_info["thread_id"]
    return thread_id, await thread_state(_store(request), thread_id)


async def thread_state(store: Store, thread_id: str) -> ThreadState:
    """The thread's state; ``NotFound`` for a thread never seen."""
    state = await store.threads.state(thread_id)
    if state is None:
        raise NotFound(f"unknown thread {thread_id!r}")
    return state


@routes.get("/threads/{thread_id}")
async def thread(request: web.Request) -> web.Response:
    thread_id, state = await _thread(request)
    transcript = [json.loads(h) for h in await _store(request).threads.history(thread_id)]
    return web.json_response(
        {
            "thread_id": thread_id,
            "state": state.shown(),
            "transcript": [{"role": m["role"], "content": m["content"]} for m in transcript],
        }
    )


class HouseholdLink(BaseModel):
    model_config = ConfigDict(extra="forbid")

    numbers: list[str] = Field(min_length=1, max_length=10)
    household: str | None = Field(None, min_length=1, max_length=128)


@routes.get("/households/{number}")
async def household_show(request: web.Request) -> web.Response:
    """A number's household (or a household by id) and its members."""
    ledger = request.config_dict[COMPONENTS].ledger
    found = await household_of(ledger, request.match_info["number"])
    return web.json_response(found.as_json())


@routes.post("/households")
async def household_link(request: web.Request) -> web.Response:
    """``{"numbers": ["+55…", "+55…"], "household": optional}``: one ledger for both."""
    body = parse_body(HouseholdLink, await request.read())
    ledger = request.config_dict[COMPONENTS].ledger
    found = await link(ledger, body.numbers, body.household)
    log.info("support.household_linked", members=len(found.members))
    return web.json_response(found.as_json())


@routes.delete("/households/members/{number}")
async def household_unlink(request: web.Request) -> web.Response:
    ledger = request.config_dict[COMPONENTS].ledger
    left = await unlink(ledger, request.match_info["number"])
    if left is None:
        raise NotFound("that number is in no household")
    return web.json_response({"left": left})


def parse_body(model: type[_Model], raw: bytes) -> _Model:
    """The JSON body as ``model``; ``BadRequest`` with the reasons."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        reason = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise BadRequest(f"bad request: {reason}") from None


class SupportMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=4096)
    author: str = Field("support", min_length=1, max_length=80)


def window_closes_at(state: ThreadState) -> datetime | None:
    """When WhatsApp's 24-hour customer-service window closes (None: the couple never
    wrote): free-form messages only until then."""
    return parse_iso(state.last_user_at) + WINDOW if state.last_user_at else None


def check_window(state: ThreadState) -> None:
    """``Conflict`` outside the 24-hour window."""
    closes = window_closes_at(state)
    if closes is None or datetime.now(UTC) > closes:
        raise Conflict(
            "outside WhatsApp's 24-hour customer-service window (the couple last wrote at "
            f"{state.last_user_at or 'never'}): only approved templates may be sent now"
        )


async def reply(
    store: Store, thread_id: str, state: ThreadState, text: str, by: str, *, exclusive: bool = False
) -> list[str]:
    """Queue a support message to the couple (inside the window); the event ids."""
    check_window(state)
    ids = await store.threads.act(
        thread_id, support_reply_action(state, text, by, exclusive=exclusive)
    )
    log.info("support.reply_queued", by=by)
    return ids


async def release_thread(
    request: web.Request, thread_id: str, state: ThreadState, by: str | None = None
) -> list[str]:
    """Back to the bot (``SUPPORT_RELEASE_MESSAGE`` tells the couple); the event ids."""
    if not state.with_person:
        raise Conflict("the thread is not with a person: nothing to release")
    message = request.config_dict[SETTINGS].support_release_message
    return await _store(request).threads.act(
        thread_id, release_action(state, reason="support", message=message, by=by)
    )


async def close_thread(
    request: web.Request, thread_id: str, state: ThreadState, by: str | None = None
) -> list[str]:
    """Close the open session (``SUPPORT_CLOSE_MESSAGE`` tells the couple); the event ids."""
    if not state.session_id:
        raise Conflict("the thread has no open session")
    message = request.config_dict[SETTINGS].support_close_message
    return await _store(request).threads.act(
        thread_id, close_action(state, "support_closed", message=message, by=by)
    )


@routes.post("/threads/{thread_id}/messages")
async def send_message(request: web.Request) -> web.Response:
    thread_id, state = await _thread(request)
    body = parse_body(SupportMessage, await request.read())
    ids = await reply(_store(request), thread_id, state, body.text, body.author)
    return web.json_response({"status": "queued", "event_ids": ids}, status=202)


@routes.post("/threads/{thread_id}/release")
async def release(request: web.Request) -> web.Response:
    thread_id, state = await _thread(request)
    ids = await release_thread(request, thread_id, state)
    return web.json_response({"status": "released", "event_ids": ids})


@routes.post("/threads/{thread_id}/close")
async def close(request: web.Request) -> web.Response:
    thread_id, state = await _thread(request)
    ids = await close_thread(request, thread_id, state)
    return web.json_response({"status": "closed", "event_ids": ids})


def create_support_app() -> web.Application:
    app = web.Application(middlewares=[bearer_auth])
    app.router.add_get("/events", events)
    app.router.add_routes(routes)
    app.router.add_routes(insights_routes)
    return app
