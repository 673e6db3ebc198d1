"""The support console's server side over real HTTP: logins (cookie flags, expiry, logout,
rate limits), CSRF, security headers, the exclusive claim, the author taken from the
session, and console agents making support available without ``SUPPORT_TOKEN``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gateway.conversation.sessions import claim_action
from gateway.http.console.auth import SECURITY_HEADERS
from gateway.http.keys import COMPONENTS
from gateway.settings import SAO_PAULO
from gateway.store import ActionRefused
from gateway.store.psychologist import PsychologistStore
from gateway.support_agents import remove_agent
from tests.e2e import console
from tests.e2e.conftest import Gateway
from tests.e2e.console import THREAD, ConsoleClient
from tests.fakes.twilio_api import FakeTwilioAPI

HANDOFF_MESSAGE = "Vou encaminhar seu atendimento para uma pessoa."


start = console.start  # the shared fixture


@pytest.fixture
async def clients() -> AsyncIterator[Callable[[Gateway], ConsoleClient]]:
    made: list[ConsoleClient] = []

    def make(gw: Gateway) -> ConsoleClient:
        client = ConsoleClient(gw)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


async def _handoff(gw: Gateway, fake_twilio: FakeTwilioAPI) -> None:
    await gw.twilio("quero falar com uma pessoa, não com bot")
    sent = await fake_twilio.wait_for_messages(1)
    assert sent[0]["Body"] == HANDOFF_MESSAGE  # support is available: the bot goes quiet
    await gw.idle()


async def test_login_sets_a_strict_cookie_and_logout_ends_the_session(
    start: Callable[..., Any], clients: Callable[[Gateway], ConsoleClient]
) -> None:
    gw: Gateway = await start("Ana", console_session_seconds=600)
    ana = clients(gw)
    assert (await ana.call("GET", "me"))[0] == 401

    resp = await ana.login("ana")  # names are looked up casefolded
    assert resp.status == 200
    cookie = resp.cookies["mel_console"]
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Strict"
    assert cookie["path"] == "/console/"
    assert cookie["max-age"] == "600"
    assert not cookie["secure"]  # plain http here
    status, me = await ana.call("GET", "me")
    assert (status, me["name"]) == (200, "Ana")
    stored = await gw.store.redis.keys(f"{gw.store.keys.prefix}:console:session:*")
    assert len(stored) == 1
    assert cookie.value not in stored[0].decode()  # Redis holds a digest, not the cookie
    assert 0 < await gw.store.redis.ttl(stored[0]) <= 600

    assert (await ana.call("POST", "logout"))[0] == 200
    assert (await ana.call("GET", "me"))[0] == 401
    assert await gw.store.redis.keys(f"{gw.store.keys.prefix}:console:session:*") == []


async def test_the_cookie_is_secure_behind_https(
    start: Callable[..., Any], clients: Callable[[Gateway], ConsoleClient]
) -> None:
    gw: Gateway = await start("ana")
    resp = await clients(gw).login("ana", **{"X-Forwarded-Proto": "https"})
    assert resp.cookies["mel_console"]["secure"] is True
    public: Gateway = await start(public_base_url="https://mel.example.com")
    resp = await clients(public).login("ana")
    assert resp.cookies["mel_console"]["secure"] is True


async def test_a_wrong_password_is_refused_and_attempts_are_rate_limited(
    start: Callable[..., Any], clients: Callable[[Gateway], ConsoleClient]
) -> None:
    gw: Gateway = await start(
        "ana", "bia", console_login_max_per_name=2, console_login_max_per_address=5
    )
    client = clients(gw)
    for _ in range(2):
        resp = await client.login("ana", "errada-errada")
        assert resp.status == 401
        assert (await resp.json())["error"] == "nome ou senha incorretos"
    limited = await client.login("ana")  # the right password, too late: not even checked
    assert limited.status == 429
    assert 0 < int(limited.headers["Retry-After"]) <= 900
    assert "muitas tentativas" in (await limited.json())["error"]
    assert "Set-Cookie" not in limited.headers

    # another name from the same address: allowed until the address's own limit
    assert (await client.login("bia")).status == 200
    assert (await client.login("ninguem", "x" * 10)).status == 401
    assert (await client.login("bia")).status == 429  # the address's 6th attempt

    # an unknown name is refused like a wrong password
    other: Gateway = await start()
    resp = await clients(other).login("fulano", "qualquer-coisa")
    assert resp.status == 401
    assert (await resp.json())["error"] == "nome ou senha incorretos"


async def test_state_changes_need_the_csrf_token_and_our_origin(
    start: Callable[..., Any],
    fake_twilio: FakeTwilioAPI,
    clients: Callable[[Gateway], ConsoleClient],
) -> None:
    gw: Gateway = await start("ana")
    await _handoff(gw, fake_twilio)
    ana = clients(gw)
    await ana.login("ana")

    status, body = await ana.call("POST", f"threads/{THREAD}/claim", csrf=False)
    assert status == 403
    assert "CSRF" in body["error"]
    bad = {"X-CSRF-Token": "forged"}
    assert (await ana.call("POST", f"threads/{THREAD}/claim", csrf=False, headers=bad))[0] == 403
    evil = {"Origin": "https://evil.example"}
    assert (await ana.call("POST", f"threads/{THREAD}/claim", headers=evil))[0] == 403
    state = await gw.store.threads.state(THREAD)
    assert state is not None
    assert not state.handoff_taken_at  # nothing was done

    same = {"Origin": gw.url("").rstrip("/")}
    assert (await ana.call("POST", f"threads/{THREAD}/claim", headers=same))[0] == 200

    # the login takes JSON only (a cross-site form cannot send it)
    async with ana.http.post(
        gw.url("/console/api/login"), data="name=ana&password=senha-boa-123"
    ) as resp:
        assert resp.status == 403


async def test_console_answers_carry_strict_security_headers(
    start: Callable[..., Any], clients: Callable[[Gateway], ConsoleClient]
) -> None:
    gw: Gateway = await start("ana")
    for path in ("/console/", "/console/app.js", "/console/app.css", "/console/api/me"):
        async with gw.session.get(gw.url(path)) as resp:
            for name, value in SECURITY_HEADERS.items():
                assert resp.headers.get(name) == value, (path, name)
    csp = SECURITY_HEADERS["Content-Security-Policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    async with gw.session.get(gw.url("/console/")) as resp:
        page = await resp.text()
        assert resp.content_type == "text/html"
    assert "<script src=" in page
    assert "<script>" not in page
    assert " style=" not in page
    async with gw.session.get(gw.url("/console"), allow_redirects=False) as resp:
        assert resp.status == 308
        assert resp.headers["Location"] == "/console/"

    ana = clients(gw)
    await ana.login("ana")
    async with ana.http.get(gw.url("/console/api/events")) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        assert resp.headers["X-Frame-Options"] == "DENY"


async def test_two_concurrent_claims_one_wins_the_other_hears_who_has_it(
    start: Callable[..., Any],
    fake_twilio: FakeTwilioAPI,
    clients: Callable[[Gateway], ConsoleClient],
) -> None:
    gw: Gateway = await start("ana", "bia")
    await _handoff(gw, fake_twilio)
    ana, bia = clients(gw), clients(gw)
    await ana.login("ana")
    await bia.login("bia")

    results = await asyncio.gather(
        ana.call("POST", f"threads/{THREAD}/claim"), bia.call("POST", f"threads/{THREAD}/claim")
    )
    statuses = sorted(status for status, _ in results)
    assert statuses == [200, 409]
    winner = "ana" if results[0][0] == 200 else "bia"
    loser_body = next(body for status, body in results if status == 409)
    assert loser_body["error"] == f"já está com {winner}"
    claimed = await gw.wait_events("support.claimed", 1)
    assert len(claimed) == 1
    assert claimed[0]["data"] == {"by": winner, "request": "open"}
    assert claimed[0]["session_id"]  # part of the session's transcript

    _, body = await ana.call("GET", "queue")
    item = next(h for h in body["handoffs"] if h["thread_id"] == THREAD)
    assert (item["status"], item["taken_by"]) == ("taken", winner)


async def test_actions_are_signed_by_the_session_never_by_the_body(
    start: Callable[..., Any],
    fake_twilio: FakeTwilioAPI,
    clients: Callable[[Gateway], ConsoleClient],
) -> None:
    gw: Gateway = await start("ana", "bia")
    await _handoff(gw, fake_twilio)
    ana, bia = clients(gw), clients(gw)
    await ana.login("ana")
    await bia.login("bia")
    path = f"threads/{THREAD}/messages"

    status, body = await ana.call("POST", path, json={"text": "Oi", "author": "bia"})
    assert status == 400  # no author in the body: it comes from the session
    status, _ = await ana.call("POST", path, json={"text": "Oi! Aqui é a Ana."})
    assert status == 202
    sent = await fake_twilio.wait_for_messages(2)
    assert sent[-1]["Body"] == "Oi! Aqui é a Ana."
    replied = await gw.wait_events("support.replied", 1)
    assert replied[0]["data"]["by"] == "ana"
    state = await gw.store.threads.state(THREAD)
    assert state is not None
    assert state.handoff_taken_by == "ana"  # answering took it

    status, body = await bia.call("POST", path, json={"text": "Oi, Bia aqui"})
    assert (status, body["error"]) == (409, "já está com ana")

    status, view = await ana.call("GET", f"threads/{THREAD}")
    assert status == 200
    assert view["assignee"] == "ana"
    authors = [(m["author"], m.get("by")) for m in view["transcript"] if m["kind"] == "message"]
    assert authors == [("couple", None), ("mel", None), ("support", "ana")]
    kinds = [m["type"] for m in view["transcript"] if m["kind"] == "decision"]
    assert "guard.preempted" in kinds
    assert "session.human_handoff.requested" in kinds
    assert view["window"]["open"] is True
    assert 86_000 < view["window"]["remaining_seconds"] <= 86_400

    status, _ = await bia.call("POST", f"threads/{THREAD}/release")
    assert status == 200
    released = await gw.wait_events("support.released", 1)
    assert released[0]["data"] == {"reason": "support", "by": "bia"}
    status, _ = await ana.call("POST", f"threads/{THREAD}/close")
    assert status == 200
    closed = await gw.wait_events("session.closed", 1)
    assert closed[0]["data"]["by"] == "ana"
    assert closed[0]["data"]["reason"] == "support_closed"


async def test_removing_an_agent_ends_its_logins(
    start: Callable[..., Any], clients: Callable[[Gateway], ConsoleClient]
) -> None:
    gw: Gateway = await start("ana")
    ana = clients(gw)
    await ana.login("ana")
    assert (await ana.call("GET", "queue"))[0] == 200
    await remove_agent(gw.store, "ANA")
    assert (await ana.call("GET", "queue"))[0] == 401
    assert (await clients(gw).login("ana")).status == 401


async def test_console_agents_make_support_available_without_a_token(
    start: Callable[..., Any], fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start("ana")
    assert gw.settings.support_token is None
    await _handoff(gw, fake_twilio)  # the handoff message, not "no one is there"
    state = await gw.store.threads.state(THREAD)
    assert state is not None
    assert state.mode == "human"

    roster = gw.server.app[COMPONENTS].roster
    await remove_agent(gw.store, "ana")
    assert await roster.refresh(gw.store) is False
    assert roster.support_status() == "none"


async def test_a_request_waiting_out_of_hours_is_claimed_and_the_bot_goes_quiet(
    start: Callable[..., Any],
    fake_twilio: FakeTwilioAPI,
    clients: Callable[[Gateway], ConsoleClient],
) -> None:
    local = datetime.now(UTC).astimezone(SAO_PAULO)
    hours = f"{(local + timedelta(hours=2)):%H:00}-{(local + timedelta(hours=3)):%H:00}"
    gw: Gateway = await start("ana", support_hours=hours)
    await gw.twilio("quero falar com uma pessoa, não com bot")
    await fake_twilio.wait_for_messages(1)
    await gw.idle()
    ana = clients(gw)
    await ana.login("ana")
    _, body = await ana.call("GET", "queue")
    assert [(h["thread_id"], h["status"]) for h in body["handoffs"]] == [(THREAD, "waiting")]

    status, _ = await ana.call("POST", f"threads/{THREAD}/claim")
    assert status == 200
    claimed = await gw.wait_events("support.claimed", 1)
    assert claimed[0]["data"] == {"by": "ana", "request": "waiting"}
    state = await gw.store.threads.state(THREAD)
    assert state is not None
    assert (state.mode, state.handoff_taken_by, state.handoff_waiting_since) == ("human", "ana", "")
    _, body = await ana.call("GET", "queue")
    assert [(h["status"], h["taken_by"]) for h in body["handoffs"]] == [("taken", "ana")]

    await gw.twilio("oi?")  # with a person now: the bot says nothing
    await gw.wait_events("message.received", 2)
    await gw.idle()
    assert len(fake_twilio.messages) == 1
    status, body = await ana.call("POST", f"threads/{THREAD}/claim")
    assert status == 200  # already hers: nothing to do
    assert body["event_ids"] == []


async def test_a_thread_without_a_request_has_nothing_to_claim_and_old_sessions_are_listed(
    start: Callable[..., Any],
    fake_twilio: FakeTwilioAPI,
    clients: Callable[[Gateway], ConsoleClient],
) -> None:
    gw: Gateway = await start("ana")
    await gw.twilio("oi")
    await fake_twilio.wait_for_messages(1)
    await gw.idle()
    ana = clients(gw)
    await ana.login("ana")
    status, body = await ana.call("POST", f"threads/{THREAD}/claim")
    assert (status, body["error"]) == (409, "não há pedido de pessoa nesta conversa")
    assert (await ana.call("GET", "threads/twilio:+1:+2"))[0] == 404

    state = await gw.store.threads.state(THREAD)
    assert state is not None
    first = state.session_id
    status, body = await ana.call("POST", f"threads/{THREAD}/close")
    assert status == 200
    await PsychologistStore(gw.store).note_closed_session(THREAD, first, 1_780_000_000_000)
    await gw.twilio("voltei")
    await fake_twilio.wait_for_messages(3)  # the close message, then mel's answer
    await gw.idle()

    _, view = await ana.call("GET", f"threads/{THREAD}")
    assert view["session_id"] != first
    assert view["session_open"] is True
    assert [s["session_id"] for s in view["sessions"]] == [first]
    _, old = await ana.call("GET", f"threads/{THREAD}", params={"session": first})
    assert old["session_open"] is False
    texts = [m["text"] for m in old["transcript"] if m["kind"] == "message"]
    assert texts[0] == "oi"
    decisions = [m["text"] for m in old["transcript"] if m["kind"] == "decision"]
    assert decisions[-1] == "sessão encerrada (support_closed) por ana"
    assert texts[-1] == gw.settings.support_close_message  # delivered after the close
    _, same = await ana.call("GET", f"sessions/{first}")
    assert same["transcript"] == old["transcript"]


async def test_a_claim_decided_on_a_stale_state_is_refused_by_the_store(
    start: Callable[..., Any], fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start("ana")
    await _handoff(gw, fake_twilio)
    state = await gw.store.threads.state(THREAD)
    assert state is not None
    first, second = claim_action(state, "ana"), claim_action(state, "bia")  # both saw it free
    await gw.store.threads.act(THREAD, first)
    with pytest.raises(ActionRefused):
        await gw.store.threads.act(THREAD, second)
    after = await gw.store.threads.state(THREAD)
    assert after is not None
    assert after.handoff_taken_by == "ana"
    assert len(await gw.events("support.claimed")) == 1


async def test_console_keys_expire_but_the_agents_themselves(
    start: Callable[..., Any], clients: Callable[[Gateway], ConsoleClient]
) -> None:
    gw: Gateway = await start("ana", "bia")
    ana, bia = clients(gw), clients(gw)
    await ana.login("ana")
    await bia.login("bia", "senha-errada")
    await bia.login("bia")
    await bia.call("POST", "logout")
    kept = {}
    async for raw in gw.store.redis.scan_iter(f"{gw.store.keys.prefix}:console:*"):
        if await gw.store.redis.ttl(raw) == -1:
            kept[raw.decode()] = (await gw.store.redis.type(raw)).decode()
    assert kept == {"mel:console:agents": "hash"}  # one entry per agent, removed with it
