"""Human takeover, the support API and feed, session ends, the signed support webhook."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.conversation.thread import ThreadState
from guard import GUARD_RESPONSE_HUMAN_REQUEST
from tests.e2e.conftest import BUSINESS, Gateway, agent_calls
from tests.fakes.llm import FakeLLM
from tests.fakes.twilio_api import FakeTwilioAPI

TOKEN = "support-secret-token"
USER = "+5511999990000"
THREAD = f"twilio:{BUSINESS}:{USER}"
HANDOFF_MESSAGE = "Vou encaminhar seu atendimento para uma pessoa."


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def support(
    gw: Gateway, method: str, path: str, token: str = TOKEN, **kw: Any
) -> tuple[int, Any]:
    async with gw.session.request(
        method, gw.url(f"/support{path}"), headers=auth(token), **kw
    ) as r:
        body = await r.json() if r.content_type == "application/json" else await r.text()
        return r.status, body


async def test_support_api_is_disabled_without_token_and_closed_to_strangers(
    start_gateway: Any,
) -> None:
    off: Gateway = await start_gateway()
    status, body = await support(off, "GET", "/handoffs")
    assert status == 404
    assert "SUPPORT_TOKEN" in body["error"]
    on: Gateway = await start_gateway(support_token=TOKEN)
    assert (await support(on, "GET", "/handoffs", token="wrong"))[0] == 401
    async with on.session.get(on.url("/support/handoffs")) as r:
        assert r.status == 401
    assert (await support(on, "GET", "/handoffs"))[0] == 200


async def test_handoff_mutes_the_bot_support_answers_then_releases(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN)
    await gw.twilio("quero falar com uma pessoa, não com bot")
    sent = await fake_twilio.wait_for_messages(1)
    assert sent[0]["Body"] == HANDOFF_MESSAGE
    requested = await gw.wait_events("session.human_handoff.requested", 1)
    assert requested[0]["thread_id"] == THREAD
    status, body = await support(gw, "GET", "/handoffs")
    assert [h["thread_id"] for h in body["handoffs"]] == [THREAD]

    # muted: the couple's message is stored and published, the bot says nothing
    await gw.twilio("oi? alguém aí?")
    received = await gw.wait_events("message.received", 2)
    assert received[-1]["data"]["text"] == "oi? alguém aí?"
    await gw.idle()
    assert len(fake_twilio.messages) == 1
    assert len(agent_calls(fake_llm)) == 0

    status, body = await support(
        gw, "POST", f"/threads/{THREAD}/messages", json={"text": "Oi! Aqui é a Ana, do time."}
    )
    assert status == 202
    sent = await fake_twilio.wait_for_messages(2)
    assert sent[-1]["Body"] == "Oi! Aqui é a Ana, do time."
    assert sent[-1]["To"] == f"whatsapp:{USER}"
    assert (await gw.wait_events("support.replied", 1))[0]["data"]["text"].startswith("Oi!")

    status, body = await support(gw, "GET", f"/threads/{THREAD}")
    assert body["state"]["mode"] == "human"
    assert [m["content"] for m in body["transcript"]][:1] == [
        "quero falar com uma pessoa, não com bot"
    ]

    status, _ = await support(gw, "POST", f"/threads/{THREAD}/release")
    assert status == 200
    assert await gw.wait_events("support.released", 1)
    assert (await support(gw, "GET", "/handoffs"))[1]["handoffs"] == []
    sent = await fake_twilio.wait_for_messages(3)  # the couple is told mel is back
    assert sent[-1]["Body"] == gw.settings.support_release_message
    fake_llm.responder = lambda req: "De volta com a mel!"
    await gw.twilio("qual o total do mês?")
    sent = await fake_twilio.wait_for_messages(4)
    assert sent[-1]["Body"] == "De volta com a mel!"
    assert len(agent_calls(fake_llm)) >= 1


async def test_without_support_the_guard_reply_is_the_spec_023_one_and_bot_stays(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway()
    await gw.twilio("quero falar com uma pessoa, não com bot")
    sent = await fake_twilio.wait_for_messages(1)
    assert sent[0]["Body"] == GUARD_RESPONSE_HUMAN_REQUEST
    assert await gw.wait_events("session.human_handoff.requested", 1)  # support still hears
    fake_llm.responder = lambda req: "Claro, vamos ver o orçamento."
    await gw.twilio("ok, então me mostra o orçamento")
    sent = await fake_twilio.wait_for_messages(2)
    assert sent[-1]["Body"] == "Claro, vamos ver o orçamento."


async def test_support_reply_outside_the_24h_window_is_refused(
    start_gateway: Any, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN)
    await gw.twilio("quero falar com uma pessoa")
    await fake_twilio.wait_for_messages(1)
    await gw.idle()
    old = (datetime.now(UTC) - timedelta(hours=25)).isoformat()
    await gw.store.redis.hset(gw.store.keys.thread(THREAD, "state"), "last_user_at", old)
    status, body = await support(gw, "POST", f"/threads/{THREAD}/messages", json={"text": "oi"})
    assert status == 409
    assert "24-hour" in body["error"]
    status, body = await support(gw, "POST", f"/threads/{THREAD}/messages", json={"txt": "oi"})
    assert status == 400


async def test_unclaimed_handoff_returns_to_the_bot_and_tells_the_couple(
    start_gateway: Any, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN, handoff_timeout=0.5)
    await gw.twilio("quero falar com um atendente")
    await fake_twilio.wait_for_messages(1)
    sent = await fake_twilio.wait_for_messages(2, timeout=10)
    assert sent[-1]["Body"] == gw.settings.handoff_expired_message
    assert await gw.wait_events("session.human_handoff.expired", 1)
    state = await gw.store.threads.state(THREAD)
    assert state is not None
    assert state.mode == "bot"


async def test_a_taken_handoff_does_not_expire(
    start_gateway: Any, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN, handoff_timeout=1.0)
    await gw.twilio("quero falar com um atendente")
    await fake_twilio.wait_for_messages(1)
    await gw.idle()
    await support(gw, "POST", f"/threads/{THREAD}/messages", json={"text": "Oi, sou a Bia"})
    await asyncio.sleep(2.0)
    assert await gw.events("session.human_handoff.expired") == []
    assert (await gw.store.threads.state(THREAD) or ThreadState()).mode == "human"


async def test_idle_session_is_closed_and_the_next_message_opens_a_new_one(
    start_gateway: Any, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(session_idle_timeout=0.5)
    await gw.twilio("oi")
    await fake_twilio.wait_for_messages(1)
    closed = await gw.wait_events("session.closed", 1, timeout=10)
    assert closed[0]["data"]["reason"] == "idle_timeout"
    first_session = closed[0]["session_id"]
    await gw.twilio("voltei")
    await fake_twilio.wait_for_messages(2)
    started = await gw.events("session.started")
    assert len(started) == 2
    assert started[-1]["session_id"] != first_session
    ids = await gw.store.events.session_ids(first_session)
    types = [e["type"] for e in await gw.store.events.by_id(ids)]
    assert types[0] == "session.started"
    assert types[-1] == "session.closed"
    assert "message.sent" in types


async def test_support_closes_a_session(start_gateway: Any, fake_twilio: FakeTwilioAPI) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN)
    await gw.twilio("oi")
    await fake_twilio.wait_for_messages(1)
    await gw.idle()
    status, _ = await support(gw, "POST", f"/threads/{THREAD}/close")
    assert status == 200
    closed = await gw.wait_events("session.closed", 1)
    assert closed[0]["data"]["reason"] == "support_closed"
    assert (await support(gw, "POST", f"/threads/{THREAD}/close"))[0] == 409


async def _sse(gw: Gateway, *, last_id: str | None = None, types: str | None = None) -> Any:
    headers = auth()
    if last_id:
        headers["Last-Event-ID"] = last_id
    params = {"types": types} if types else {}
    return await gw.session.get(gw.url("/support/events"), headers=headers, params=params)


async def _collect(resp: aiohttp.ClientResponse, n: int) -> list[dict[str, str]]:
    from gateway.cli.watch import read_sse

    out: list[dict[str, str]] = []
    async with asyncio.timeout(10):
        async for event in read_sse(resp):
            out.append(event)
            if len(out) >= n:
                break
    return out


async def test_sse_feed_streams_live_resumes_and_filters(
    start_gateway: Any, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN)
    resp = await _sse(gw)
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    await gw.twilio("oi")
    await fake_twilio.wait_for_messages(1)
    live = await _collect(resp, 3)
    resp.close()
    assert [e["event"] for e in live][:2] == ["session.started", "message.received"]
    assert json.loads(live[1]["data"])["id"] == live[1]["id"]

    # resume after the first event: the second one comes next
    resumed = await _sse(gw, last_id=live[0]["id"])
    again = await _collect(resumed, 1)
    resumed.close()
    assert again[0]["id"] == live[1]["id"]

    filtered = await _sse(gw, last_id="0-0", types="message.sent")
    only = await _collect(filtered, 1)
    filtered.close()
    assert only[0]["event"] == "message.sent"

    async with gw.session.get(gw.url("/support/events")) as r:
        assert r.status == 401


async def test_watch_prints_readable_lines(start_gateway: Any, fake_twilio: FakeTwilioAPI) -> None:
    import argparse

    from gateway.cli.watch import run_watch

    gw: Gateway = await start_gateway(support_token=TOKEN)
    await gw.twilio("quero falar com uma pessoa")
    await fake_twilio.wait_for_messages(1)
    out = io.StringIO()
    args = argparse.Namespace(
        url=gw.url("").rstrip("/"), token=TOKEN, types="session.*", thread=None,
        after="0-0", json=False,
    )  # fmt: skip
    task = asyncio.create_task(run_watch(gw.settings, args, out=out))
    for _ in range(100):
        if "session.human_handoff.requested" in out.getvalue():
            break
        await asyncio.sleep(0.05)
    task.cancel()
    lines = out.getvalue().splitlines()
    assert any("session.started" in line for line in lines)
    handoff = next(line for line in lines if "session.human_handoff.requested" in line)
    assert THREAD in handoff.split()  # whole, to copy into --thread (support is authenticated)
    assert not any("message.received" in line for line in lines)  # filtered


@pytest.fixture
async def receiver() -> AsyncIterator[dict[str, Any]]:
    """A support-webhook endpoint that fails twice, then accepts."""
    state: dict[str, Any] = {"hits": [], "fail": 2}

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        state["hits"].append((dict(request.headers), body))
        if state["fail"] > 0:
            state["fail"] -= 1
            return web.Response(status=500)
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    state["url"] = f"http://{host}:{port}/hook"
    yield state
    await runner.cleanup()


async def test_signed_support_webhook_is_retried_and_every_attempt_recorded(
    start_gateway: Any, fake_twilio: FakeTwilioAPI, receiver: dict[str, Any]
) -> None:
    secret = "whsec-test"
    gw: Gateway = await start_gateway(
        support_token=TOKEN,
        support_webhook_url=receiver["url"],
        support_webhook_secret=secret,
        support_webhook_backoff_seconds=0.05,
    )
    await gw.twilio("quero falar com uma pessoa")
    await fake_twilio.wait_for_messages(1)
    for _ in range(200):
        bodies = [json.loads(b) for _, b in receiver["hits"]]
        if (
            any(b["type"] == "session.human_handoff.requested" for b in bodies)
            and receiver["fail"] == 0
            and len(bodies) >= 3
        ):
            break
        await asyncio.sleep(0.05)
    headers, body = receiver["hits"][0]
    t, v1 = (part.split("=", 1)[1] for part in headers["Mel-Signature"].split(","))
    expected = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(v1, expected)
    first = json.loads(body)
    same = [json.loads(b) for _, b in receiver["hits"] if json.loads(b)["id"] == first["id"]]
    assert len(same) == 3  # 500, 500, 204
    attempts = await gw.store.redis.xrange(
        f"{gw.settings.mel_redis_prefix}:support_webhook:attempts"
    )
    statuses = [a[1][b"status"] for a in attempts if a[1][b"event_id"].decode() == first["id"]]
    assert statuses == [b"500", b"500", b"204"]
    types = {json.loads(b)["type"] for _, b in receiver["hits"]}
    assert "message.received" not in types  # only session and support events go out
