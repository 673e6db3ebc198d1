"""The couple's journeys (issue 11): no dead ends, driven as WhatsApp and support would.

Each test plays one numbered journey end to end (webhook in → reply out → events →
support view) and prints the transcript it observed (``pytest -s`` shows it). They talk
to the service through HTTP and the fakes only, so the same file runs against older
trees. The outage journey (7) is in ``test_journeys_outage.py`` (it waits for retries).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import time
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import structlog

from gateway.settings import Settings
from guard import (
    GUARD_RESPONSE_FRUSTRATED,
    GUARD_RESPONSE_HUMAN_REQUEST,
    GUARD_RESPONSE_LOOP,
)
from tests.e2e.conftest import BUSINESS, Gateway, agent_calls
from tests.fakes.llm import FakeLLM, tool_call
from tests.fakes.twilio_api import FakeTwilioAPI

TOKEN = "support-journeys-token"
USER = "+5511999990000"  # Ana
PARTNER = "+5511988887777"  # Bia
THREAD = f"twilio:{BUSINESS}:{USER}"
CLASSIFIER_MODEL = "route-continuity-model"
HANDOFF_MESSAGE = "Vou encaminhar seu atendimento para uma pessoa."
RELEASE_MESSAGE = "Voltei eu, a mel. Se precisar do orçamento, é só chamar."
CLOSE_MESSAGE = "Encerramos este atendimento. Obrigada pelo contato!"
EXPIRED_MESSAGE = "Ninguém do time conseguiu assumir agora. Sigo eu (mel) por aqui."
NOT_RESOLVED = "Hmm, pode explicar melhor?"  # an agent answer without a tool call

STICKINESS = pytest.mark.parametrize(
    "sticky", [False, True], ids=["stickiness-off", "stickiness-on"]
)


# --- helpers ------------------------------------------------------------------------------


def classifier_says(fake: FakeLLM, decide: Any) -> None:
    """The continuity classifier answers ``decide(last user text)`` (or a fixed decision)."""

    def answer(request: dict[str, Any]) -> str:
        last = json.dumps(request.get("messages", [])[-1:], ensure_ascii=False)
        decision = decide(last) if callable(decide) else decide
        return json.dumps({"decision": decision, "confidence": 0.97})

    fake.by_model[CLASSIFIER_MODEL] = answer


async def open_gateway(
    start_gateway: Any, fake_llm: FakeLLM, sticky: bool, **overrides: Any
) -> Gateway:
    gw: Gateway = await start_gateway(enable_route_stickiness=sticky, **overrides)
    if sticky:  # the classifier sees an ordinary conversation: stay with the agent
        classifier_says(fake_llm, "CONTINUE")
    return gw


async def say(
    gw: Gateway, twilio: FakeTwilioAPI, text: str, *, expect: int = 1, user: str = USER
) -> list[str]:
    """The couple sends ``text``; the messages that reached them because of it."""
    before = len(twilio.messages)
    assert (await gw.twilio(text, user=user)).status == 200
    if expect:
        await twilio.wait_for_messages(before + expect, timeout=10)
    await gw.idle()
    return [m["Body"] for m in twilio.messages[before:]]


async def support(gw: Gateway, method: str, path: str, **kw: Any) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with gw.session.request(method, gw.url(f"/support{path}"), headers=headers, **kw) as r:
        body = await r.json() if r.content_type == "application/json" else await r.text()
        return r.status, body


def hours_excluding_now() -> str:
    """A ``SUPPORT_HOURS`` window (São Paulo time) that does not contain this moment."""
    hour = datetime.now(UTC).astimezone(ZoneInfo("America/Sao_Paulo")).hour
    return f"{(hour + 2) % 24:02d}:00-{(hour + 4) % 24:02d}:00"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def stickiness_unset() -> dict[str, Any]:
    """The settings that leave ENABLE_ROUTE_STICKINESS unset in this tree: the e2e
    ``make_settings`` pins it to False where the setting can be unset (None)."""
    field = Settings.model_fields["enable_route_stickiness"]
    return {"enable_route_stickiness": None} if field.default is None else {}


def _summary(kind: str, data: dict[str, Any]) -> str | None:
    """The key events of a journey, in a few words (None: not shown)."""
    shown: dict[str, str] = {
        "guard.preempted": f"kind={data.get('kind')}",
        "session.human_handoff.requested": (
            f"source={data.get('source')} support={data.get('support')}"
        ),
        "session.human_handoff.expired": "",
        "session.end.requested": f"source={data.get('source')}",
        "session.closed": f"reason={data.get('reason')}",
        "support.released": f"reason={data.get('reason')}",
        "support.queue_opened": f"waiting={data.get('thread_ids')}",
        "message.parked": f"attempt={data.get('attempt')} retry_at={data.get('retry_at')}",
    }
    return shown.get(kind)


async def transcript(gw: Gateway, title: str) -> str:
    """What the couple, mel and support said, with the key events, in order (printed)."""
    lines = [f"--- {title}"]
    for event in await gw.events():
        kind, data = event["type"], event["data"]
        who = str(event.get("thread_id") or "").rsplit(":", 1)[-1][-4:]
        if kind == "message.received":
            lines.append(f"couple[{who}]: {data.get('text')}")
        elif kind == "message.sent":
            author = str(data.get("author") or "bot")
            lines.append(f"{'mel' if author == 'bot' else author} → [{who}]: {data.get('text')}")
        elif kind == "agent.replied" and data.get("tool_calls"):
            names = ", ".join(c["name"] for c in data["tool_calls"])
            lines.append(f"    (agent ran {names})")
        elif (summary := _summary(kind, data)) is not None:
            lines.append(f"    [{kind} {summary}]".replace(" ]", "]"))
    text = "\n".join(lines)
    print(text)
    return text


# --- 1. loop exit ---------------------------------------------------------------------------


@STICKINESS
async def test_journey1_a_rephrasing_after_the_loop_reply_reaches_the_agent(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, sticky: bool
) -> None:
    gw = await open_gateway(start_gateway, fake_llm, sticky)
    fake_llm.responder = lambda req: NOT_RESOLVED  # the agent never resolves it
    assert await say(gw, fake_twilio, "qual o saldo?") == [NOT_RESOLVED]
    assert await say(gw, fake_twilio, "saldo?") == [NOT_RESOLVED]
    assert await say(gw, fake_twilio, "saldo mesmo?") == [GUARD_RESPONSE_LOOP]
    assert len(agent_calls(fake_llm)) == 2

    # the rephrasing right after the loop reply gets a new chance with the agent
    assert await say(gw, fake_twilio, "e o saldo, quanto tá?") == [NOT_RESOLVED]
    assert len(agent_calls(fake_llm)) == 3
    # … and the loop may fire again only once the agent has failed anew
    assert await say(gw, fake_twilio, "saldo, por favor?") == [NOT_RESOLVED]
    assert await say(gw, fake_twilio, "me diz o saldo") == [GUARD_RESPONSE_LOOP]
    assert len(agent_calls(fake_llm)) == 4
    loops = [e for e in await gw.events("guard.preempted") if e["data"]["kind"] == "loop"]
    assert len(loops) == 2
    await transcript(gw, f"journey 1 (stickiness {'on' if sticky else 'off'})")


# --- 2. accepting the loop offer ------------------------------------------------------------


@pytest.mark.parametrize(
    ("sticky", "yes", "support_on"),
    [
        (False, "sim", False),
        (False, "pode ser", True),
        (True, "prefiro esperar", True),
        (True, "pode chamar", False),
    ],
    ids=["off-sim-nosupport", "off-pode-ser-support", "on-prefiro-esperar-support",
         "on-pode-chamar-nosupport"],
)  # fmt: skip
async def test_journey2_a_yes_to_the_loop_offer_opens_a_handoff_without_the_model(
    start_gateway: Any,
    fake_llm: FakeLLM,
    fake_twilio: FakeTwilioAPI,
    sticky: bool,
    yes: str,
    support_on: bool,
) -> None:
    overrides = {"support_token": TOKEN} if support_on else {}
    gw = await open_gateway(start_gateway, fake_llm, sticky, **overrides)
    fake_llm.responder = lambda req: NOT_RESOLVED
    for text in ("qual o saldo?", "saldo?"):
        await say(gw, fake_twilio, text)
    assert await say(gw, fake_twilio, "saldo mesmo?") == [GUARD_RESPONSE_LOOP]
    calls = fake_llm.call_count

    replies = await say(gw, fake_twilio, yes)
    assert replies == [HANDOFF_MESSAGE if support_on else GUARD_RESPONSE_HUMAN_REQUEST]
    assert fake_llm.call_count == calls  # deterministic: no model (no classifier, no agent)
    requested = await gw.wait_events("session.human_handoff.requested", 1)
    assert len(requested) == 1
    assert requested[0]["data"]["source"] == "loop_offer"
    assert requested[0]["thread_id"] == THREAD
    if support_on:  # exactly like a request for a person: the thread is a person's now
        _, body = await support(gw, "GET", f"/threads/{THREAD}")
        assert body["state"]["mode"] == "human"
        _, body = await support(gw, "GET", "/handoffs")
        assert [h["thread_id"] for h in body["handoffs"]] == [THREAD]
    await transcript(gw, f"journey 2 ({'on' if sticky else 'off'}, {yes!r})")


async def test_journey2_a_no_or_a_new_question_after_the_loop_reply_opens_no_handoff(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw = await open_gateway(start_gateway, fake_llm, False)
    fake_llm.responder = lambda req: NOT_RESOLVED
    for text in ("qual o saldo?", "saldo?", "saldo mesmo?"):
        await say(gw, fake_twilio, text)
    assert await say(gw, fake_twilio, "não, vou reformular") == [NOT_RESOLVED]
    assert await gw.events("session.human_handoff.requested") == []


@pytest.mark.parametrize(
    "again", ["quero falar com um atendente de novo", "me passa pra uma pessoa de novo"]
)
async def test_found_asking_for_a_person_de_novo_is_still_a_request(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, again: str
) -> None:
    """After a release the couple asks again, "de novo": that is a request for a person,
    not the agent's business (the couple would be stuck with the bot)."""
    gw = await open_gateway(start_gateway, fake_llm, False, support_token=TOKEN)
    assert await say(gw, fake_twilio, again) == [HANDOFF_MESSAGE]
    assert agent_calls(fake_llm) == []
    requested = await gw.wait_events("session.human_handoff.requested", 1)
    assert requested[0]["data"]["source"] == "guard"


# --- 3. frustration with a request for a person --------------------------------------------


@STICKINESS
async def test_journey3_frustration_with_a_request_calms_first_then_hands_off(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, sticky: bool
) -> None:
    gw = await open_gateway(start_gateway, fake_llm, sticky, support_token=TOKEN)
    replies = await say(gw, fake_twilio, "QUE LIXO, QUERO FALAR COM UM ATENDENTE", expect=2)
    assert replies == [GUARD_RESPONSE_FRUSTRATED, HANDOFF_MESSAGE]  # calm first, then a person
    assert fake_llm.call_count == 0
    requested = await gw.wait_events("session.human_handoff.requested", 1)
    assert requested[0]["data"]["source"] == "frustrated"
    status, body = await support(gw, "GET", f"/threads/{THREAD}")
    assert body["state"]["mode"] == "human"
    status, body = await support(gw, "GET", "/handoffs")
    assert [(h["thread_id"], h["status"]) for h in body["handoffs"]] == [(THREAD, "open")]
    # the bot is silent now; a person answers
    assert await say(gw, fake_twilio, "alô??", expect=0) == []
    status, _ = await support(
        gw, "POST", f"/threads/{THREAD}/messages", json={"text": "Oi, aqui é a Bia, do time."}
    )
    assert status == 202
    sent = await fake_twilio.wait_for_messages(3)
    assert sent[-1]["Body"] == "Oi, aqui é a Bia, do time."
    await gw.idle()
    await transcript(gw, f"journey 3 (stickiness {'on' if sticky else 'off'})")


async def test_journey3_without_support_the_request_is_kept_and_said_honestly(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw = await open_gateway(start_gateway, fake_llm, False)
    replies = await say(gw, fake_twilio, "QUE LIXO, QUERO FALAR COM UM ATENDENTE", expect=2)
    assert replies == [GUARD_RESPONSE_FRUSTRATED, GUARD_RESPONSE_HUMAN_REQUEST]
    requested = await gw.wait_events("session.human_handoff.requested", 1)
    assert requested[0]["data"]["source"] == "frustrated"


# --- 4. repeated frustration ----------------------------------------------------------------


@pytest.mark.parametrize("support_on", [True, False], ids=["support", "out-of-hours"])
@STICKINESS
async def test_journey4_a_second_frustration_in_a_row_escalates_to_a_person(
    start_gateway: Any,
    fake_llm: FakeLLM,
    fake_twilio: FakeTwilioAPI,
    sticky: bool,
    support_on: bool,
) -> None:
    overrides: dict[str, Any] = {"support_token": TOKEN}
    if not support_on:
        overrides["support_hours"] = hours_excluding_now()
    gw = await open_gateway(start_gateway, fake_llm, sticky, **overrides)
    first = await say(gw, fake_twilio, "esse bot é uma porra, não funciona nada")
    assert first == [GUARD_RESPONSE_FRUSTRATED]
    assert await gw.events("session.human_handoff.requested") == []

    second = await say(gw, fake_twilio, "que porcaria, não resolve nada", expect=2)
    if support_on:
        assert second == [GUARD_RESPONSE_FRUSTRATED, HANDOFF_MESSAGE]
    else:  # the honest out-of-hours reply, and the request is queued
        assert second == [GUARD_RESPONSE_FRUSTRATED, GUARD_RESPONSE_HUMAN_REQUEST]
    assert fake_llm.call_count == 0
    requested = await gw.wait_events("session.human_handoff.requested", 1)
    assert [e["data"]["source"] for e in requested] == ["repeated_frustration"]
    status, body = await support(gw, "GET", "/handoffs")
    assert status == 200
    assert [(h["thread_id"], h["status"]) for h in body["handoffs"]] == [
        (THREAD, "open" if support_on else "waiting")
    ]
    status, thread = await support(gw, "GET", f"/threads/{THREAD}")
    assert thread["state"].get("mode") == ("human" if support_on else "bot")
    await transcript(
        gw, f"journey 4 ({'on' if sticky else 'off'}, {'support' if support_on else 'closed'})"
    )


async def test_journey4_frustration_after_a_normal_turn_does_not_escalate(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw = await open_gateway(start_gateway, fake_llm, False, support_token=TOKEN)
    fake_llm.responder = lambda req: "Vocês gastaram R$ 0,00."
    assert await say(gw, fake_twilio, "esse bot é uma porra, não funciona nada") == [
        GUARD_RESPONSE_FRUSTRATED
    ]
    assert await say(gw, fake_twilio, "quanto gastamos esse mês?") == ["Vocês gastaram R$ 0,00."]
    assert await say(gw, fake_twilio, "que porcaria, não resolve nada") == [
        GUARD_RESPONSE_FRUSTRATED
    ]  # not in a row: calm down, no person yet
    assert await gw.events("session.human_handoff.requested") == []


# --- 5. "anoto o pedido" must be true --------------------------------------------------------


async def test_journey5_out_of_hours_the_request_waits_for_support_and_the_bot_helps(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw = await open_gateway(
        start_gateway, fake_llm, False, support_token=TOKEN, support_hours=hours_excluding_now()
    )
    assert await say(gw, fake_twilio, "quero falar com uma pessoa") == [
        GUARD_RESPONSE_HUMAN_REQUEST
    ]
    requested = await gw.wait_events("session.human_handoff.requested", 1)
    assert requested[0]["data"]["source"] == "guard"
    status, body = await support(gw, "GET", "/handoffs")
    assert status == 200
    assert len(body["handoffs"]) == 1, body  # the request is queued, not lost
    [waiting] = body["handoffs"]
    assert waiting["thread_id"] == THREAD
    assert waiting["status"] == "waiting"
    asked = datetime.fromisoformat(waiting["requested_at"])
    assert abs((datetime.now(UTC) - asked).total_seconds()) < 30
    assert isinstance(waiting["waited_seconds"], int)
    assert waiting["waited_seconds"] >= 0

    # meanwhile the bot keeps helping
    fake_llm.responder = lambda req: "Este mês vocês gastaram R$ 0,00."
    assert await say(gw, fake_twilio, "e quanto gastamos esse mês?") == [
        "Este mês vocês gastaram R$ 0,00."
    ]
    assert len(agent_calls(fake_llm)) == 1

    # support hours begin: the waiting requests are published again, once
    from gateway.workers.support_queue import SupportQueue

    opening = SupportQueue(gw.store, lambda: "available")
    assert await opening.check() is True
    assert await opening.check() is False
    opened = await gw.wait_events("support.queue_opened", 1)
    assert len(opened) == 1
    assert opened[0]["data"]["thread_ids"] == [THREAD]
    assert opened[0]["data"]["waiting"] == 1

    # support starts with it: answering takes the thread
    status, _ = await support(
        gw, "POST", f"/threads/{THREAD}/messages", json={"text": "Bom dia! Sou a Bia, do time."}
    )
    assert status == 202
    sent = await fake_twilio.wait_for_messages(3)
    assert sent[-1]["Body"] == "Bom dia! Sou a Bia, do time."
    await gw.idle()
    status, body = await support(gw, "GET", "/handoffs")
    assert [(h["thread_id"], h["status"]) for h in body["handoffs"]] == [(THREAD, "taken")]
    await transcript(gw, "journey 5 (out of hours → support opens)")


async def test_journey5_no_support_configured_says_so_and_keeps_the_record(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw = await open_gateway(start_gateway, fake_llm, False)
    assert await say(gw, fake_twilio, "quero falar com uma pessoa") == [
        GUARD_RESPONSE_HUMAN_REQUEST
    ]
    requested = await gw.wait_events("session.human_handoff.requested", 1)
    data = requested[0]["data"]
    assert data["support_available"] is False
    assert data.get("support") == "none"  # not "outside SUPPORT_HOURS": none at all
    # the record for the operator: the thread says since when a person is wanted
    prefix = gw.settings.mel_redis_prefix
    stored = await gw.store.redis.hgetall(f"{prefix}:t:{{{THREAD}}}:state")
    state = {_text(k): _text(v) for k, v in stored.items()}
    assert state.get("handoff_waiting_since"), state
    assert state.get("mode", "bot") == "bot"  # the bot stays
    fake_llm.responder = lambda req: "Claro, vamos ver o orçamento."
    assert await say(gw, fake_twilio, "ok, me mostra o orçamento") == [
        "Claro, vamos ver o orçamento."
    ]
    await transcript(gw, "journey 5 (no support configured)")


# --- 6. "pode encerrar" works by default ------------------------------------------------------


async def test_journey6_pode_encerrar_ends_the_session_with_stickiness_left_unset(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(**stickiness_unset())
    classifier_says(fake_llm, lambda last: "END_SESSION" if "encerrar" in last else "CONTINUE")
    fake_llm.responder = lambda req: "Vocês gastaram R$ 0,00 este mês."
    assert await say(gw, fake_twilio, "quanto gastamos esse mês?") == [
        "Vocês gastaram R$ 0,00 este mês."
    ]
    agent_before = len(agent_calls(fake_llm))
    assert await say(gw, fake_twilio, "obrigado, pode encerrar") == [
        "Atendimento encerrado. Obrigado pelo contato."
    ]
    assert len(agent_calls(fake_llm)) == agent_before  # no agent for the end
    assert len(fake_llm.calls_for(CLASSIFIER_MODEL)) == 2  # the classifier ran: it is on
    assert [e["data"]["source"] for e in await gw.events("session.end.requested")] == ["continuity"]
    closed = await gw.wait_events("session.closed", 1)
    assert closed[0]["data"]["reason"] == "user_ended"
    await transcript(gw, "journey 6 (ENABLE_ROUTE_STICKINESS unset)")


async def test_journey6_a_classifier_handoff_is_reachable_with_stickiness_left_unset(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN, **stickiness_unset())
    classifier_says(fake_llm, "HUMAN_HANDOFF")
    assert await say(gw, fake_twilio, "acho que esse caso precisa de um olhar de vocês") == [
        HANDOFF_MESSAGE
    ]
    requested = await gw.wait_events("session.human_handoff.requested", 1)
    assert requested[0]["data"]["source"] == "continuity"
    assert agent_calls(fake_llm) == []


# --- 8. no LLM configured -----------------------------------------------------------------------


async def test_journey8_without_an_llm_one_honest_reply_no_greeting_no_try_again(
    start_gateway: Any, fake_twilio: FakeTwilioAPI
) -> None:
    from agent.prompts import ASSISTANT_UNAVAILABLE

    gw: Gateway = await start_gateway(llm_base_url=None)
    first = await say(gw, fake_twilio, "oi, quanto gastamos esse mês?")
    second = await say(gw, fake_twilio, "e com mercado?")
    assert first == second == [ASSISTANT_UNAVAILABLE]
    reply = ASSISTANT_UNAVAILABLE.lower()
    assert not reply.startswith("oi")  # no greeting on every message
    assert "tenta de novo" not in reply  # the condition is permanent
    assert "daqui a pouco" not in reply
    assert "pessoa" in reply  # says what works
    assert "import" in reply
    # what works does work: a person can be asked for without the model
    assert await say(gw, fake_twilio, "quero falar com uma pessoa") == [
        GUARD_RESPONSE_HUMAN_REQUEST
    ]
    await transcript(gw, "journey 8 (no LLM)")


# --- 9. a couple is two people -----------------------------------------------------------------


def _cli(argv: list[str]) -> int:
    """``mel-gateway …`` in-process (an unknown command is argparse's exit 2)."""
    from gateway.cli import main

    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _tool_result(fake: FakeLLM) -> dict[str, Any]:
    [message] = fake.tool_messages(-1)
    result: dict[str, Any] = json.loads(message["content"])
    return result


async def _ledger_conversation(gw: Gateway, fake_llm: FakeLLM, twilio: FakeTwilioAPI) -> None:
    """Ana records, Bia records, each reads the month: one ledger, ``paid_by`` the writer."""
    fake_llm.script(
        tool_call("recordExpense", {"amount": "50.00", "category": "mercado"}),
        "Anotei R$ 50,00 de mercado.",
    )
    assert await say(gw, twilio, "gastei 50 no mercado", user=USER) == [
        "Anotei R$ 50,00 de mercado."
    ]
    ana = _tool_result(fake_llm)
    assert ana["expense"]["paid_by"] == USER

    fake_llm.script(
        tool_call("recordExpense", {"amount": "30.00", "category": "farmácia"}),
        "Anotei R$ 30,00 de farmácia.",
    )
    await say(gw, twilio, "paguei 30 na farmácia", user=PARTNER)
    bia = _tool_result(fake_llm)
    assert bia["expense"]["paid_by"] == PARTNER

    for who in (PARTNER, USER):  # each partner reads what both wrote
        fake_llm.script(tool_call("spendingByCategory", {}), "Vocês gastaram R$ 80,00.")
        await say(gw, twilio, "quanto gastamos por categoria esse mês?", user=who)
        month = _tool_result(fake_llm)
        assert month["total_cents"] == 8000, (who, month)
        assert month["expense_count"] == 2
        assert len(month["categories"]) == 2
    assert {m["To"] for m in twilio.messages} == {f"whatsapp:{USER}", f"whatsapp:{PARTNER}"}


async def test_journey9_household_link_cli_puts_both_partners_on_one_ledger(
    start_gateway: Any,
    fake_llm: FakeLLM,
    fake_twilio: FakeTwilioAPI,
    redis_url: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    gw: Gateway = await start_gateway()
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("MEL_DATA_DIR", str(tmp_path / "cli"))
    try:
        code = await asyncio.to_thread(_cli, ["household", "link", USER, PARTNER])
        out = capsys.readouterr()
        assert code == 0, out.err
        assert USER in out.out
        assert PARTNER in out.out
        code = await asyncio.to_thread(_cli, ["household", "show", PARTNER, "--json"])
        shown = json.loads(capsys.readouterr().out)
        assert code == 0
        assert sorted(shown["members"]) == sorted([USER, PARTNER])
    finally:
        structlog.reset_defaults()
    await _ledger_conversation(gw, fake_llm, fake_twilio)
    print(f"$ mel-gateway household link {USER} {PARTNER}\n{out.out.strip()}")
    await transcript(gw, "journey 9 (household link, CLI)")


async def test_journey9_household_link_support_api_puts_both_partners_on_one_ledger(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN)
    status, body = await support(gw, "POST", "/households", json={"numbers": [USER, PARTNER]})
    assert status == 200, body
    assert sorted(body["members"]) == sorted([USER, PARTNER])
    status, shown = await support(gw, "GET", f"/households/{PARTNER}")
    assert status == 200
    assert shown["household"] == body["household"]
    await _ledger_conversation(gw, fake_llm, fake_twilio)
    print(f"POST /support/households → {body}")
    await transcript(gw, "journey 9 (household link, support API)")


# --- 10. what support does, the couple sees ------------------------------------------------------


async def test_journey10_release_and_close_tell_the_couple(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(
        support_token=TOKEN,
        support_release_message=RELEASE_MESSAGE,
        support_close_message=CLOSE_MESSAGE,
    )
    assert await say(gw, fake_twilio, "quero falar com uma pessoa") == [HANDOFF_MESSAGE]
    await support(gw, "POST", f"/threads/{THREAD}/messages", json={"text": "Oi! Sou a Bia."})
    await fake_twilio.wait_for_messages(2)
    status, _ = await support(gw, "POST", f"/threads/{THREAD}/release")
    assert status == 200
    sent = await fake_twilio.wait_for_messages(3)
    assert sent[-1]["Body"] == RELEASE_MESSAGE

    assert await say(gw, fake_twilio, "quero falar com um atendente novamente") == [HANDOFF_MESSAGE]
    status, _ = await support(gw, "POST", f"/threads/{THREAD}/close")
    assert status == 200
    sent = await fake_twilio.wait_for_messages(5)
    assert sent[-1]["Body"] == CLOSE_MESSAGE
    assert sent[-1]["To"] == f"whatsapp:{USER}"
    await gw.idle()
    assert len(fake_twilio.messages) == 5
    await transcript(gw, "journey 10 (release, close)")


async def test_journey10_empty_release_and_close_messages_say_nothing(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(
        support_token=TOKEN, support_release_message="", support_close_message=""
    )
    await say(gw, fake_twilio, "quero falar com uma pessoa")
    assert (await support(gw, "POST", f"/threads/{THREAD}/release"))[0] == 200
    await say(gw, fake_twilio, "quero falar com um atendente")
    assert (await support(gw, "POST", f"/threads/{THREAD}/close"))[0] == 200
    await gw.wait_events("session.closed", 1)
    await gw.idle()
    await asyncio.sleep(0.3)
    assert [m["Body"] for m in fake_twilio.messages] == [HANDOFF_MESSAGE, HANDOFF_MESSAGE]


async def test_journey10_chat_shows_support_and_expiry_and_never_blocks_typing(
    start_gateway: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        from gateway.cli.chat import run_chat
    except ImportError:  # an older tree
        from gateway.chat_client import run_chat  # type: ignore[import-not-found,no-redef]

    chat_user = "+5511955554444"
    thread = f"twilio:{BUSINESS}:{chat_user}"
    gw: Gateway = await start_gateway(
        meta_app_secret=None,
        twilio_auth_token=None,
        twilio_account_sid=None,
        llm_base_url=None,
        support_token=TOKEN,
        handoff_timeout=1.0,
        handoff_expired_message=EXPIRED_MESSAGE,
        support_release_message=RELEASE_MESSAGE,
    )
    typed: queue.Queue[str | None] = queue.Queue()
    asked_at: list[float] = []  # when the chat was ready for the next line

    def fake_input(prompt: str = "") -> str:
        asked_at.append(time.monotonic())
        line = typed.get(timeout=60)
        if line is None:
            raise EOFError
        return line

    monkeypatch.setattr("builtins.input", fake_input)
    args = argparse.Namespace(url=gw.url("").rstrip("/"), user=chat_user, name="Ana", timeout=3)
    chat = asyncio.create_task(run_chat(gw.settings, args))
    screen: list[str] = []

    async def on_screen(text: str, count: int = 1, timeout: float = 10.0) -> str:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            screen.append(capsys.readouterr().out)
            shown = "".join(screen)
            if shown.count(text) >= count:
                return shown
            if asyncio.get_running_loop().time() > deadline or chat.done():
                raise AssertionError(f"{text!r} not shown ×{count}; the screen:\n{shown}")
            await asyncio.sleep(0.05)

    try:
        typed.put("quero falar com uma pessoa")
        await on_screen(f"mel: {HANDOFF_MESSAGE}")
        await on_screen(f"mel: {EXPIRED_MESSAGE}")  # nobody took it: not a reply to a line
        typed.put("quero falar com um atendente")
        await on_screen(f"mel: {HANDOFF_MESSAGE}", count=2)
        status, _ = await support(
            gw,
            "POST",
            f"/threads/{thread}/messages",
            json={"text": "Oi, sou a Bia", "author": "Bia"},
        )
        assert status == 202
        await on_screen("Oi, sou a Bia")  # a person's words, unasked
        n = len(asked_at)
        sent_at = time.monotonic()
        typed.put("ok, obrigada")  # muted: no reply will come, typing goes on
        for _ in range(100):
            if len(asked_at) > n:
                break
            await asyncio.sleep(0.02)
        assert len(asked_at) > n, "typing blocked"
        assert asked_at[n] - sent_at < 2.0, "typing blocked"
        assert (await support(gw, "POST", f"/threads/{thread}/release"))[0] == 200
        shown = await on_screen(RELEASE_MESSAGE)
    finally:
        typed.put(None)
        typed.put(None)
        code = await asyncio.wait_for(chat, 20)
    assert code == 0
    order = [shown.index(t) for t in (EXPIRED_MESSAGE, "Oi, sou a Bia", RELEASE_MESSAGE)]
    assert order == sorted(order)
    print("--- journey 10 (mel-gateway chat screen)\n" + shown)
