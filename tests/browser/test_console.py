"""The support console in Chromium, as support uses it: log in, see a handoff arrive
live, claim it (and a second agent hear who has it), answer the couple, release, close,
the 24-hour window, the psychologist's insights, and a couple's HTML shown as text."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.browser.chromium import SKIP_REASON

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

from playwright.async_api import expect

from agent.llm import Usage
from agent.psychologist import AnalysisOutcome, HypothesisIn, classify_termination
from gateway.conversation.sessions import close_action
from gateway.store.psychologist import PsychologistStore
from tests.browser.conftest import PHONE, Console
from tests.e2e.conftest import Gateway
from tests.e2e.console import THREAD, ConsoleClient
from tests.fakes.twilio_api import FakeTwilioAPI

HANDOFF_MESSAGE = "Vou encaminhar seu atendimento para uma pessoa."


async def ask_for_a_person(gw: Gateway, fake_twilio: FakeTwilioAPI, n: int = 1) -> None:
    await gw.twilio("quero falar com uma pessoa, não com bot")
    sent = await fake_twilio.wait_for_messages(n)
    assert sent[-1]["Body"] == HANDOFF_MESSAGE
    await gw.idle()


async def test_login_refuses_a_wrong_password_then_limits_attempts(
    start: Any, console: Any, shot: Any
) -> None:
    gw: Gateway = await start("ana", console_login_max_per_name=2)
    view: Console = await console(gw)
    page = view.page
    await expect(page.get_by_test_id("login-submit")).to_be_visible()
    await shot(page, "login")

    await view.login("ana", "senha-errada")
    await expect(page.get_by_role("alert")).to_have_text("Nome ou senha incorretos.")
    await expect(page.get_by_test_id("logout")).to_be_hidden()
    await view.login("ana", "senha-errada")
    await expect(page.get_by_role("alert")).to_have_text("Nome ou senha incorretos.")
    await view.login("ana")  # right, but too late
    await expect(page.get_by_role("alert")).to_contain_text("muitas tentativas")
    await expect(page.get_by_test_id("logout")).to_be_hidden()
    assert view.dialogs == []


async def test_a_handoff_arrives_live_and_only_one_agent_can_claim_it(
    start: Any, console: Any, fake_twilio: FakeTwilioAPI, shot: Any
) -> None:
    gw: Gateway = await start("ana", "bia")
    ana: Console = await console(gw)
    bia: Console = await console(gw)
    await ana.login("ana")
    await bia.login("bia")
    await expect(ana.page.get_by_test_id("logout")).to_be_visible()
    await expect(bia.page.get_by_text("Ninguém pediu uma pessoa agora.")).to_be_visible()

    await ask_for_a_person(gw, fake_twilio)  # no reload: the feed brings it
    await expect(ana.item(THREAD)).to_be_visible()
    await expect(bia.item(THREAD)).to_be_visible()
    await expect(ana.item(THREAD)).to_contain_text("esperando há")
    await expect(ana.item(THREAD)).to_have_attribute("data-status", "open")

    await ana.item(THREAD).get_by_test_id("claim").click()
    await expect(ana.item(THREAD).get_by_test_id("assignee")).to_have_text("ana")
    await expect(bia.item(THREAD).get_by_test_id("assignee")).to_have_text("ana")  # live
    await bia.item(THREAD).get_by_test_id("claim").click()
    await expect(bia.page.get_by_role("alert")).to_have_text("já está com ana")
    await ana.page.get_by_test_id("transcript").wait_for()
    await shot(bia.page, "queue", toast=True)
    claimed = await gw.events("support.claimed")
    assert [e["data"]["by"] for e in claimed] == ["ana"]


async def test_support_answers_the_couple_then_releases_and_closes(
    start: Any, console: Any, fake_twilio: FakeTwilioAPI, shot: Any
) -> None:
    gw: Gateway = await start("ana")
    await ask_for_a_person(gw, fake_twilio)
    ana: Console = await console(gw)
    await ana.login("ana")
    page = ana.page
    await ana.item(THREAD).click()
    transcript = page.get_by_test_id("transcript")
    couple = transcript.locator('[data-testid="transcript-message"][data-author="couple"]')
    await expect(couple).to_have_count(1)
    await expect(couple).to_contain_text("quero falar com uma pessoa")
    mel = transcript.locator('[data-testid="transcript-message"][data-author="mel"]')
    await expect(mel).to_contain_text(HANDOFF_MESSAGE)
    await expect(transcript).to_contain_text("guard: human-request")  # the decision between
    await expect(page.get_by_test_id("window-remaining")).to_contain_text(
        re.compile(r"faltam 2[34] h")
    )

    await page.get_by_test_id("reply-input").fill("Oi! Aqui é a Ana, do time da mel.")
    await page.get_by_test_id("reply-send").click()
    support = transcript.locator('[data-testid="transcript-message"][data-author="support"]')
    await expect(support).to_contain_text("Oi! Aqui é a Ana, do time da mel.")
    sent = await fake_twilio.wait_for_messages(2)
    assert sent[-1]["Body"] == "Oi! Aqui é a Ana, do time da mel."
    assert sent[-1]["To"] == "whatsapp:+5511999990000"
    assert (await gw.wait_events("support.replied", 1))[0]["data"]["by"] == "ana"
    await expect(support).to_contain_text("entregue")
    await expect(page.get_by_test_id("thread-assignee")).to_have_text("com você")

    await gw.twilio("obrigada, Ana!")  # the couple answers: it shows up live
    await expect(couple).to_have_count(2)
    await shot(page, "conversation")

    await page.get_by_test_id("release").click()
    await expect(transcript).to_contain_text("devolvido à mel (support) por ana")
    await expect(page.get_by_test_id("release")).to_be_disabled()
    sent = await fake_twilio.wait_for_messages(3)
    assert sent[-1]["Body"] == gw.settings.support_release_message

    await page.get_by_test_id("close").click()
    await expect(transcript).to_contain_text("sessão encerrada (support_closed) por ana")
    await expect(page.get_by_test_id("close")).to_be_disabled()
    sent = await fake_twilio.wait_for_messages(4)
    assert sent[-1]["Body"] == gw.settings.support_close_message
    await expect(ana.item(THREAD)).to_have_count(0)  # gone from the queue
    assert ana.errors == []


async def test_outside_the_24_hour_window_the_send_button_says_why(
    start: Any, console: Any, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start("ana")
    await ask_for_a_person(gw, fake_twilio)
    old = (datetime.now(UTC) - timedelta(hours=25)).isoformat()
    await gw.store.redis.hset(gw.store.keys.thread(THREAD, "state"), "last_user_at", old)
    ana: Console = await console(gw)
    await ana.login("ana")
    await ana.item(THREAD).click()
    page = ana.page
    await expect(page.get_by_test_id("window-remaining")).to_contain_text("fechada")
    send = page.get_by_test_id("reply-send")
    await expect(send).to_be_disabled()
    await expect(send).to_have_attribute("title", re.compile("Fora da janela de 24 horas"))
    await expect(page.get_by_text(re.compile("Só modelos aprovados"))).to_be_visible()


async def test_a_couples_html_is_shown_as_text_and_never_runs(
    start: Any, console: Any, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start("ana")
    await ask_for_a_person(gw, fake_twilio)
    attack = "<img src=x onerror=alert(1)>"
    await gw.twilio(attack)
    await gw.idle()
    ana: Console = await console(gw)
    await ana.login("ana")
    await ana.item(THREAD).click()
    page = ana.page
    couple = page.locator('[data-testid="transcript-message"][data-author="couple"]')
    await expect(couple.last).to_contain_text(attack)
    assert await couple.last.locator(".msg-text").text_content() == attack
    assert await page.get_by_test_id("transcript").locator("img").count() == 0
    await page.wait_for_timeout(300)  # a broken image's onerror would have fired by now
    assert ana.dialogs == []
    assert ana.errors == []


async def test_insights_open_their_evidence_and_are_accepted_or_dismissed(
    start: Any, console: Any, fake_twilio: FakeTwilioAPI, shot: Any
) -> None:
    gw: Gateway = await start("ana")
    ids = await analysed_session(gw, fake_twilio)

    page, items = await open_insights(console, gw, "ana")
    await expect(page.get_by_role("heading", name="budget_agent (1)")).to_be_visible()
    await expect(page.get_by_role("heading", name="router (1)")).to_be_visible()
    await shot(page, "insights")

    first = items.filter(has_text="Total sem ferramenta")
    await first.get_by_test_id("evidence").first.click()  # opens the cited event
    cited = page.get_by_test_id("transcript").locator(f'[data-event-id="{ids[1]}"]')
    await expect(cited).to_have_class(re.compile("cited"))
    await expect(cited).to_have_attribute("data-author", "couple")

    await page.get_by_test_id("tab-insights").click()
    await first.get_by_test_id("hypothesis-anamnese").check()
    await first.get_by_test_id("hypothesis-accept").click()
    await expect(first).to_have_attribute("data-status", "accepted")
    await expect(first).to_contain_text("aceita por ana (para anamnese)")
    second = items.filter(has_text="Roteou errado")
    await second.get_by_test_id("hypothesis-note").fill("o casal mudou de assunto")
    await second.get_by_test_id("hypothesis-dismiss").click()
    await expect(second).to_have_attribute("data-status", "dismissed")
    await expect(second).to_contain_text("o casal mudou de assunto")

    accepted = await gw.events("psychologist.hypothesis_accepted_for_anamnese")
    assert [e["data"]["by"] for e in accepted] == ["ana"]
    dismissed = await gw.events("psychologist.hypothesis_dismissed")
    assert dismissed[0]["data"]["by"] == "ana"
    assert dismissed[0]["data"]["note"] == "o casal mudou de assunto"

    await second.get_by_test_id("reanalyze").click()
    await expect(page.get_by_role("status")).to_contain_text("Reanálise pedida")
    requested = await gw.wait_events("psychologist.reanalysis_requested", 1)
    assert requested[0]["data"]["requested_by"] == "ana"


async def test_on_a_phone_the_conversation_takes_the_screen(
    start: Any, console: Any, fake_twilio: FakeTwilioAPI, shot: Any
) -> None:
    gw: Gateway = await start("ana")
    await ask_for_a_person(gw, fake_twilio)
    ana: Console = await console(gw, viewport=PHONE)
    await ana.login("ana")
    page = ana.page
    await ana.item(THREAD).get_by_test_id("claim").click()
    await expect(page.get_by_test_id("transcript")).to_be_visible()
    await expect(page.locator("#queue-panel")).to_be_hidden()  # one column
    await expect(page.get_by_test_id("reply-send")).to_be_visible()
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"]  # nothing wider than the screen
    await shot(page, "conversation-phone")
    await page.get_by_role("button", name="Voltar à fila").click()
    await expect(ana.item(THREAD)).to_be_visible()
    await shot(page, "queue-phone")

    await page.get_by_test_id("logout").click()
    await expect(page.get_by_test_id("login-submit")).to_be_visible()
    response = await page.request.get(gw.url("/console/api/me"))
    assert response.status == 401


async def test_a_note_being_typed_survives_a_live_update_of_the_insights(
    start: Any, console: Any, fake_twilio: FakeTwilioAPI
) -> None:
    """Another agent's decision redraws the list live; Ana's half-typed note stays."""
    gw: Gateway = await start("ana", "bia")
    await analysed_session(gw, fake_twilio)

    _, items = await open_insights(console, gw, "ana")
    second = items.filter(has_text="Roteou errado")
    await second.get_by_test_id("hypothesis-note").fill("o casal mudou de assunto")
    await second.get_by_test_id("hypothesis-anamnese").check()

    bia = ConsoleClient(gw)  # meanwhile, in another browser
    try:
        assert (await bia.login("bia")).status == 200
        first_id = await items.filter(has_text="Total sem ferramenta").get_attribute(
            "data-hypothesis-id"
        )
        status, _ = await bia.call("POST", f"hypotheses/{first_id}/accept")
        assert status == 200
    finally:
        await bia.close()

    first = items.filter(has_text="Total sem ferramenta")
    await expect(first).to_contain_text("aceita por bia")  # the list was redrawn live
    await expect(second.get_by_test_id("hypothesis-note")).to_have_value("o casal mudou de assunto")
    await expect(second.get_by_test_id("hypothesis-anamnese")).to_be_checked()


async def open_insights(console: Any, gw: Gateway, name: str) -> tuple[Any, Any]:
    """``name`` logged in, on the insights tab with the analysis's two hypotheses shown;
    the page and the hypothesis items."""
    agent: Console = await console(gw)
    await agent.login(name)
    page = agent.page
    await page.get_by_test_id("tab-insights").click()
    items = page.get_by_test_id("hypothesis-item")
    await expect(items).to_have_count(2)
    return page, items


async def analysed_session(gw: Gateway, fake_twilio: FakeTwilioAPI) -> list[str]:
    """One turn, the session closed by the couple and its analysis stored (two
    hypotheses); the session's event ids."""
    await gw.twilio("qual o total do mês?")
    await fake_twilio.wait_for_messages(1)
    await gw.idle()
    state = await gw.store.threads.state(THREAD)
    assert state is not None
    await gw.store.threads.act(THREAD, close_action(state, "user_ended"))
    db = PsychologistStore(gw.store)
    session = await db.session_log(state.session_id)
    await seed_analysis(db, session, session.event_ids)
    await db.ensure_group()
    return session.event_ids


async def seed_analysis(db: PsychologistStore, session: Any, ids: list[str]) -> None:
    """A current analysis of the session with two hypotheses for two agents, citing its
    events (as the psychologist would store one)."""
    outcome = AnalysisOutcome(
        ok=True,
        hypotheses=[
            HypothesisIn(
                target_agent="budget_agent",
                title="Total sem ferramenta",
                description="A mel respondeu o total sem chamar budgetTotal.",
                confidence=80,
                evidence_event_ids=[ids[1], ids[-1]],
            ),
            HypothesisIn(
                target_agent="router",
                title="Roteou errado",
                description="A pergunta era de fatura, não de orçamento.",
                confidence=55,
                evidence_event_ids=[ids[1]],
            ),
        ],
        failure=None,
        tier="light",
        profile="psychologist_light",
        model="m-light",
        iterations=1,
        usage=Usage(1_000, 200, 1_200, 1),
        rejected_batches=0,
        budget_micro_usd=50_000,
        max_iterations=4,
    )
    await db.save_analysis(
        session=session,
        outcome=outcome,
        termination=classify_termination("user_ended", "session.closed"),
        trigger="session_closed",
        trigger_event_id=ids[-1],
    )
