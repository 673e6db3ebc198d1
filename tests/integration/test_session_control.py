"""SessionControl.turn end to end: the guard, the continuity classifier, the enterprise
router, the domain agents with their tools on the real Redis ledger, and the global
handoff and end-session nodes — the real openai client against the fake chat-completions
server. Each profile has its own model name, so "the router was not called" and "no
domain agent ran" are observed at the HTTP level.

The spec's four-message table, its fail-safe branches, its contracts and its telemetry
each have a test here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import date
from typing import Any

import pytest

from agent.ledger import Ledger, NewExpense
from agent.llm import OpenAICompatibleLLM, Usage
from agent.messages import ChatMessage
from agent.profiles import LLMProfiles
from agent.prompts import ASSISTANT_UNAVAILABLE, INVOICE_AGENT_FOCUS
from agent.routing import (
    ContinuityClassifier,
    RouteState,
    SessionControl,
    SessionControlConfig,
    TurnResult,
    build_domain_agents,
    build_session_control,
)
from agent.routing.router import EnterpriseRouter
from guard import (
    GUARD_RESPONSE_FRUSTRATED,
    GUARD_RESPONSE_HUMAN_REQUEST,
    GUARD_RESPONSE_LOOP,
    ConversationGuard,
    GuardInput,
)
from tests.fakes.llm import FakeLLM, Scripted, error, hang, text, tool_call
from tests.integration.conftest import NOW
from tests.integration.test_routing_models import ByModel, decision, route, routing_profiles

THREAD = "twilio:+14155238886:+5511999990000"
SENDER = "+5511999990000"
HANDOFF_MESSAGE = "Vou encaminhar seu atendimento para uma pessoa."
END_MESSAGE = "Atendimento encerrado. Obrigado pelo contato."
ROLE_OF_MODEL = {
    "agent-model": "agent",
    "router-model": "router",
    "continuity-model": "route_continuity",
}

BUDGET_STATE = RouteState("budget_agent", "month_total", "budget")
INVOICE_STATE = RouteState("invoice_agent", "invoice_summary", "card_invoice")


def user(content: str) -> ChatMessage:
    return ChatMessage(role="user", content=content)


def bot(content: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=content)


PLAN = [user("qual é o meu orçamento do mês?"), bot("O orçamento do mês é R$ 3.000,00.")]


def calls(fake: FakeLLM) -> dict[str, int]:
    """LLM calls received, by profile (every profile listed, zeros included)."""
    counted = Counter(ROLE_OF_MODEL[str(body["model"])] for body in fake.calls)
    return {role: counted[role] for role in ("route_continuity", "router", "agent")}


def event_types(result: TurnResult) -> list[str]:
    return [e.TYPE for e in result.events]


def published(result: TurnResult) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The turn's events as (type, data), as the gateway publishes them."""
    return tuple((e.TYPE, e.data()) for e in result.events)


def route_of(result: TurnResult) -> dict[str, Any] | None:
    """The turn's route decision in the spec's shape."""
    return result.route_decision.as_dict() if result.route_decision is not None else None


def event(result: TurnResult, name: str) -> dict[str, Any]:
    [data] = [e.data() for e in result.events if name == e.TYPE]
    return data


@pytest.fixture
def script(fake_llm: FakeLLM) -> ByModel:
    responder = ByModel()
    fake_llm.responder = responder
    return responder


MakeControl = Callable[..., SessionControl]


@pytest.fixture
def make_control(
    fake_llm: FakeLLM, make_llm: Callable[..., OpenAICompatibleLLM], ledger: Ledger
) -> MakeControl:
    """``make_control(enabled=True, with_llm=True, profiles=..., **settings)``."""

    def make(
        *,
        enabled: bool = True,
        with_llm: bool = True,
        profiles: LLMProfiles | None = None,
        **settings: Any,
    ) -> SessionControl:
        llm = (
            make_llm(base_url=fake_llm.base_url, profiles=profiles or routing_profiles())
            if with_llm
            else None
        )
        config = SessionControlConfig(enabled=enabled, **settings)
        return build_session_control(llm, ledger, config, clock=lambda: NOW)

    return make


# -- the spec's table, row 1: continuity --------------------------------------------------------


async def test_a_follow_up_stays_with_the_active_agent_and_the_router_is_not_called(
    make_control: MakeControl, script: ByModel, fake_llm: FakeLLM
) -> None:
    script.on("route_continuity", decision("CONTINUE", 0.97))
    script.on("agent", "O orçamento inclui todas as categorias do mês. Quer ver por categoria?")
    control = make_control()

    result = await control.turn(
        [*PLAN, user("o que está incluso?")], BUDGET_STATE, 0, thread_id=THREAD
    )

    assert calls(fake_llm) == {"route_continuity": 1, "router": 0, "agent": 1}
    assert result.outcome == "agent"
    assert result.reply.content.startswith("O orçamento inclui")
    # the spec's expected result, and the rest of our route_decision
    assert route_of(result) == {
        "route": "budget_agent",
        "intent": "month_total",
        "domain": "budget",
        "method": "continuity",
        "route_bypassed": True,
        "metadata": {"confidence": 0.97},
    }
    assert result.route_bypassed
    assert event_types(result) == ["router.continuity"]
    telemetry = event(result, "router.continuity")
    assert {key: telemetry[key] for key in ("decision", "confidence", "active_agent")} == {
        "decision": "CONTINUE",
        "confidence": 0.97,
        "active_agent": "budget_agent",
    }
    assert (telemetry["route_bypassed"], telemetry["profile_name"]) == (True, "route_continuity")
    assert result.continuity_signal == telemetry
    assert result.state == BUDGET_STATE
    assert (result.session_control, result.next_state) == (None, None)
    assert not result.human_handoff_requested
    assert not result.session_ended
    # the classifier read the state; the agent got its own prompt and tools
    classifier_call, agent_call = fake_llm.calls
    payload = json.loads(classifier_call["messages"][1]["content"])
    assert (payload["active_agent"], payload["previous_intent"], payload["previous_domain"]) == (
        "budget_agent",
        "month_total",
        "budget",
    )
    assert [t["function"]["name"] for t in agent_call["tools"]] == (
        control.agents["budget_agent"].tools.names
    )
    # the cost of the turn, by profile
    assert set(result.usage_by_profile) == {"route_continuity", "agent"}
    assert result.usage == sum(result.usage_by_profile.values(), Usage())
    assert (result.llm_calls, result.usage.calls) == (2, 2)


# -- row 2: change of subject --------------------------------------------------------------------


async def test_a_change_of_subject_goes_through_the_router_to_another_agent(
    make_control: MakeControl, script: ByModel, fake_llm: FakeLLM
) -> None:
    script.on("route_continuity", decision("ROUTE", 0.96))
    script.on("router", route("invoice_agent", "dispute_charge", 0.94))
    script.on("agent", "Claro! Qual cobrança da fatura vocês querem contestar?")
    control = make_control()

    result = await control.turn(
        [*PLAN, user("agora quero contestar uma cobrança")], BUDGET_STATE, 0, thread_id=THREAD
    )

    assert calls(fake_llm) == {"route_continuity": 1, "router": 1, "agent": 1}
    assert event_types(result) == ["router.continuity", "router.routed"]
    assert event(result, "router.continuity")["route_bypassed"] is False
    routed = event(result, "router.routed")
    assert {key: routed[key] for key in ("route", "intent", "domain", "method")} == {
        "route": "invoice_agent",
        "intent": "dispute_charge",
        "domain": "card_invoice",
        "method": "router",
    }
    assert result.route_decision is not None
    assert (result.route_decision.method, result.route_decision.route_bypassed) == (
        "router",
        False,
    )
    assert result.state == RouteState("invoice_agent", "dispute_charge", "card_invoice")
    agent_call = fake_llm.calls[2]
    assert INVOICE_AGENT_FOCUS in agent_call["messages"][0]["content"]
    assert [t["function"]["name"] for t in agent_call["tools"]] == [
        "cardInvoice",
        "recordExpense",
        "spendingByCategory",
    ]
    assert set(result.usage_by_profile) == {"route_continuity", "router", "agent"}
    assert all(usage.total_tokens > 0 for usage in result.usage_by_profile.values())
    assert result.llm_calls == 3


# -- row 3: "quero falar com uma pessoa" -------------------------------------------------------


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("state", [RouteState(), INVOICE_STATE])
@pytest.mark.parametrize(
    ("support", "reply"), [(True, HANDOFF_MESSAGE), (False, GUARD_RESPONSE_HUMAN_REQUEST)]
)
async def test_the_guard_catches_a_request_for_a_person_and_the_handoff_node_runs(
    make_control: MakeControl,
    script: ByModel,
    fake_llm: FakeLLM,
    enabled: bool,
    state: RouteState,
    support: bool,
    reply: str,
) -> None:
    control = make_control(enabled=enabled)

    result = await control.turn(
        [*PLAN, user("quero falar com uma pessoa")],
        state,
        0,
        support="available" if support else "none",
    )

    assert fake_llm.call_count == 0  # the guard costs no tokens, the node none either
    assert result.reply.content == reply
    assert result.outcome == "preempt:human-request"
    assert result.verdict is not None
    assert result.verdict.kind == "human-request"
    assert (result.session_control, result.human_handoff_requested) == ("HUMAN_HANDOFF", True)
    assert (result.session_ended, result.next_state) == (False, "HUMAN_HANDOFF_REQUESTED")
    assert published(result) == (
        ("guard.preempted", {"kind": "human-request"}),
        (
            "session.human_handoff.requested",
            {
                "source": "guard",
                **state.as_dict(),
                "support_available": support,
                "support": "available" if support else "none",
                "reply": "human_handoff_message" if support else "no_support_available",
                "guard_kind": "human-request",
            },
        ),
    )
    assert route_of(result) == {
        "route": "human_handoff",
        "intent": "human_handoff",
        "domain": None,
        "method": "guard",
        "route_bypassed": True,
        "handoff": True,
        "metadata": {"session_control": "HUMAN_HANDOFF", "route_bypassed": True},
    }
    assert result.state == state
    assert (result.ask, result.tool_calls, result.llm_calls) == (None, (), 0)


HANDOFF_UNSEEN_BY_THE_GUARD = "quero ser transferido"


@pytest.mark.parametrize("state", [RouteState(), INVOICE_STATE])
async def test_the_classifier_recognises_a_handoff_with_or_without_an_active_agent(
    make_control: MakeControl, script: ByModel, fake_llm: FakeLLM, state: RouteState
) -> None:
    message = user(HANDOFF_UNSEEN_BY_THE_GUARD)
    assert not ConversationGuard.evaluate(GuardInput([message])).preempt
    script.on("route_continuity", decision("HUMAN_HANDOFF", 0.95))
    control = make_control()

    result = await control.turn([*PLAN, message], state, 0, support="available")

    assert calls(fake_llm) == {"route_continuity": 1, "router": 0, "agent": 0}
    assert result.reply.content == HANDOFF_MESSAGE
    assert result.outcome == "human_handoff"
    # the spec's contract, exactly, plus our two common keys
    assert route_of(result) == {
        "route": "human_handoff",
        "intent": "human_handoff",
        "method": "continuity",
        "handoff": True,
        "metadata": {"session_control": "HUMAN_HANDOFF", "route_bypassed": True},
        "domain": None,
        "route_bypassed": True,
    }
    assert (result.session_control, result.human_handoff_requested) == ("HUMAN_HANDOFF", True)
    assert (result.session_ended, result.next_state) == (False, "HUMAN_HANDOFF_REQUESTED")
    assert event_types(result) == ["router.continuity", "session.human_handoff.requested"]
    assert event(result, "router.continuity")["decision"] == "HUMAN_HANDOFF"
    assert event(result, "router.continuity")["route_bypassed"] is True
    handoff = event(result, "session.human_handoff.requested")
    assert (handoff["source"], handoff["active_agent"], handoff["confidence"]) == (
        "continuity",
        state.active_agent,
        0.95,
    )
    assert (result.ask, result.tool_calls, result.verdict) == (None, (), None)
    assert result.state == state  # kept for when support hands the thread back
    assert set(result.usage_by_profile) == {"route_continuity"}


async def test_without_support_the_handoff_node_does_not_promise_a_person(
    make_control: MakeControl, script: ByModel, fake_llm: FakeLLM
) -> None:
    script.on("route_continuity", decision("HUMAN_HANDOFF", 0.99))

    result = await make_control().turn([user(HANDOFF_UNSEEN_BY_THE_GUARD)], RouteState())

    assert result.reply.content == GUARD_RESPONSE_HUMAN_REQUEST
    assert result.human_handoff_requested
    assert event(result, "session.human_handoff.requested")["support_available"] is False
    assert calls(fake_llm)["agent"] == 0


async def test_the_handoff_reply_is_configurable(
    make_control: MakeControl, script: ByModel
) -> None:
    script.on("route_continuity", decision("HUMAN_HANDOFF", 0.99))
    control = make_control(human_handoff_message="Já chamei alguém da equipe.")

    result = await control.turn([user(HANDOFF_UNSEEN_BY_THE_GUARD)], support="available")

    assert result.reply.content == "Já chamei alguém da equipe."


# -- row 4: "obrigado, pode encerrar" ----------------------------------------------------------


@pytest.mark.parametrize("state", [RouteState(), INVOICE_STATE])
async def test_end_session_runs_the_end_node_with_or_without_an_active_agent(
    make_control: MakeControl, script: ByModel, fake_llm: FakeLLM, state: RouteState
) -> None:
    script.on("route_continuity", decision("END_SESSION", 0.98))
    control = make_control()

    result = await control.turn([*PLAN, user("obrigado, pode encerrar")], state, 0)

    assert calls(fake_llm) == {"route_continuity": 1, "router": 0, "agent": 0}
    assert result.reply.content == END_MESSAGE
    assert result.outcome == "end_session"
    assert route_of(result) == {
        "route": "end_session",
        "intent": "end_session",
        "method": "continuity",
        "metadata": {"session_control": "END_SESSION", "route_bypassed": True},
        "domain": None,
        "route_bypassed": True,
    }
    assert "handoff" not in (route_of(result) or {})
    assert (result.session_control, result.session_ended) == ("END_SESSION", True)
    assert (result.human_handoff_requested, result.next_state) == (False, "SESSION_ENDED")
    assert event_types(result) == ["router.continuity", "session.end.requested"]
    assert event(result, "session.end.requested") == {
        "source": "continuity",
        **state.as_dict(),
        "confidence": 0.98,
    }
    assert result.state == RouteState()  # cleared
    assert (result.ask, result.tool_calls) == (None, ())


async def test_the_end_reply_is_configurable(make_control: MakeControl, script: ByModel) -> None:
    script.on("route_continuity", decision("END_SESSION", 0.98))

    result = await make_control(end_session_message="Até logo!").turn([user("tchau")])

    assert result.reply.content == "Até logo!"


# -- fail-safe: doubt and failure always reach the router ----------------------------------------


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (decision("CONTINUE", 0.6), "confidence 0.6 not above threshold 0.9"),
        (decision("END_SESSION", 0.8), "confidence 0.8 not above threshold 0.9"),
        (decision("HUMAN_HANDOFF", 0.89), "confidence 0.89 not above threshold 0.9"),
        ("CONTINUE", "invalid JSON"),
        (json.dumps({"decision": "CONTINUE", "confidence": "alta"}), "invalid answer"),
        (error(500), "LLMError: HTTP 500"),
        (hang(), "LLMTimeout"),
    ],
)
async def test_below_threshold_invalid_json_errors_and_timeouts_reach_the_router(
    make_control: MakeControl,
    script: ByModel,
    fake_llm: FakeLLM,
    answer: Scripted,
    reason: str,
) -> None:
    script.on("route_continuity", answer)
    script.on("router", route("budget_agent", "budget_status"))
    script.on("agent", "Vocês usaram 40% do orçamento.")
    control = make_control(profiles=routing_profiles(route_continuity={"timeout_seconds": 0.2}))

    result = await control.turn([*PLAN, user("o que está incluso?")], BUDGET_STATE, 0)

    assert calls(fake_llm) == {"route_continuity": 1, "router": 1, "agent": 1}
    assert result.outcome == "agent"
    assert result.reply.content == "Vocês usaram 40% do orçamento."
    continuity = event(result, "router.continuity")
    assert (continuity["decision"], continuity["route_bypassed"]) == ("ROUTE", False)
    assert (continuity["accepted"], continuity["active_agent"]) == (False, "budget_agent")
    assert continuity["reason"].startswith(reason)
    assert result.route_decision is not None
    assert (route_of(result) or {})["method"] == "router"
    assert not result.route_bypassed
    assert (result.session_control, result.session_ended) == (None, False)
    assert result.state == RouteState("budget_agent", "budget_status", "budget")


async def test_the_first_turn_runs_the_classifier_but_continue_cannot_skip_the_router(
    make_control: MakeControl, script: ByModel, fake_llm: FakeLLM
) -> None:
    script.on("route_continuity", decision("CONTINUE", 0.99))
    script.on("router", route("savings_agent", "goal_progress"))
    script.on("agent", "Vocês já guardaram R$ 1.000,00 da meta viagem.")
    control = make_control()

    result = await control.turn([user("o que está incluso?")], RouteState(), None)

    assert calls(fake_llm) == {"route_continuity": 1, "router": 1, "agent": 1}
    continuity = event(result, "router.continuity")
    assert (continuity["decision"], continuity["model_decision"]) == ("ROUTE", "CONTINUE")
    assert continuity["reason"] == "CONTINUE without an active agent"
    assert continuity["active_agent"] is None
    assert result.route_decision is not None
    assert (route_of(result) or {})["method"] == "router"
    assert result.state == RouteState("savings_agent", "goal_progress", "savings")


async def test_a_stale_active_agent_counts_as_none(
    make_control: MakeControl, script: ByModel, fake_llm: FakeLLM
) -> None:
    script.on("route_continuity", decision("CONTINUE", 0.99))
    script.on("router", route("budget_agent", "month_total"))
    script.on("agent", "ok")

    result = await make_control().turn([user("e aí?")], RouteState("retired_agent"))

    assert calls(fake_llm)["router"] == 1
    assert event(result, "router.continuity")["active_agent"] is None


async def test_a_router_failure_falls_back_to_the_default_agent(
    make_control: MakeControl, script: ByModel, fake_llm: FakeLLM
) -> None:
    script.on("route_continuity", decision("ROUTE", 0.99))
    script.on("router", "não sei")
    script.on("agent", "Posso te mostrar o total do mês.")

    result = await make_control().turn([*PLAN, user("me ajuda com uma coisa")], INVOICE_STATE)

    assert calls(fake_llm) == {"route_continuity": 1, "router": 1, "agent": 1}
    routed = event(result, "router.routed")
    assert (routed["route"], routed["method"], routed["reason"]) == (
        "budget_agent",
        "default",
        "invalid JSON",
    )
    assert result.route_decision is not None
    assert (route_of(result) or {})["metadata"] == {"reason": "invalid JSON"}
    assert result.state == RouteState("budget_agent", None, "budget")


# -- disabled: as before the feature -----------------------------------------------------------


async def test_disabled_the_classifier_is_never_called_and_the_router_runs_every_turn(
    make_control: MakeControl, script: ByModel, fake_llm: FakeLLM
) -> None:
    script.on(
        "router",
        route("budget_agent", "month_total"),
        route("budget_agent", "budget_status"),
        route("budget_agent", "month_total"),
    )
    script.on("agent", "Orçamento: R$ 3.000,00.", "Inclui tudo.", "Por nada!")
    control = make_control(enabled=False)
    history: list[ChatMessage] = []
    state = RouteState()
    results = []

    for said in ("qual é o meu orçamento?", "o que está incluso?", "obrigado, pode encerrar"):
        history.append(user(said))
        result = await control.turn(history, state, 0)
        history.append(result.reply)
        state = result.state
        results.append(result)

    assert calls(fake_llm) == {"route_continuity": 0, "router": 3, "agent": 3}
    for result in results:
        assert event_types(result) == ["router.routed"]
        assert result.continuity_signal is None
        assert result.route_decision is not None
        assert (route_of(result) or {})["method"] == "router"
        assert not result.route_bypassed
        assert (result.session_control, result.session_ended) == (None, False)
    assert results[-1].reply.content == "Por nada!"


def test_enabled_without_a_classifier_is_a_wiring_error() -> None:
    agents = build_domain_agents(None, None)
    llm: Any = object()

    with pytest.raises(ValueError, match="no continuity classifier"):
        SessionControl(
            llm, agents, EnterpriseRouter(llm, agents), None, SessionControlConfig(enabled=True)
        )
    classifier = ContinuityClassifier(llm, SessionControlConfig(enabled=True))
    control = SessionControl(llm, agents, EnterpriseRouter(llm, agents), classifier)
    assert not control.stickiness  # disabled by default


# -- no LLM, and the guard's other preempts ------------------------------------------------------


async def test_without_an_llm_the_default_agent_says_it_is_unavailable(
    make_control: MakeControl, fake_llm: FakeLLM
) -> None:
    result = await make_control(with_llm=False).turn([user("o que está incluso?")], BUDGET_STATE, 0)

    assert fake_llm.call_count == 0
    assert (result.outcome, result.reply.content) == ("unavailable", ASSISTANT_UNAVAILABLE)
    assert event_types(result) == ["router.routed"]
    assert event(result, "router.routed")["reason"] == "no LLM configured"
    assert result.continuity_signal is None
    assert result.llm_calls == 0


@pytest.mark.parametrize("enabled", [True, False])
async def test_frustration_and_loops_are_answered_by_the_guard_without_tokens(
    make_control: MakeControl, fake_llm: FakeLLM, enabled: bool
) -> None:
    control = make_control(enabled=enabled)
    loop = [
        user("qual o saldo?"),
        bot("Posso te ajudar com orçamento e metas."),
        user("saldo?"),
        bot("Quer ver o orçamento do mês?"),
        user("saldo mesmo?"),
    ]

    frustrated = await control.turn(
        [user("esse bot é uma porra, não funciona NADA")], INVOICE_STATE, 0
    )
    looped = await control.turn(loop, INVOICE_STATE, 2)

    assert fake_llm.call_count == 0
    for result, kind, reply in (
        (frustrated, "frustrated", GUARD_RESPONSE_FRUSTRATED),
        (looped, "loop", GUARD_RESPONSE_LOOP),
    ):
        assert (result.outcome, result.reply.content) == (f"preempt:{kind}", reply)
        assert published(result) == (("guard.preempted", {"kind": kind}),)
        assert result.state == INVOICE_STATE
        assert (result.route_decision, result.session_control, result.ask) == (None, None, None)
        assert not result.human_handoff_requested


# -- the domain agents' tools --------------------------------------------------------------------


async def test_the_routed_invoice_agent_reads_the_card_invoice_from_the_ledger(
    make_control: MakeControl, script: ByModel, fake_llm: FakeLLM, ledger: Ledger
) -> None:
    await ledger.record_expense(
        SENDER, NewExpense(date(2026, 6, 3), 89_90, "cartão", "farmácia", "Ana")
    )
    await ledger.record_expense(SENDER, NewExpense(date(2026, 6, 5), 250_00, "cartão nubank"))
    await ledger.record_expense(SENDER, NewExpense(date(2026, 6, 6), 45_00, "mercado"))
    await ledger.record_expense(SENDER, NewExpense(date(2026, 5, 30), 10_00, "cartão"))
    script.on("route_continuity", decision("ROUTE", 0.97))
    script.on("router", route("invoice_agent", "invoice_summary"))
    script.on(
        "agent",
        tool_call("cardInvoice", {"month": "2026-06"}),
        text("A fatura de junho está em R$ 339,90."),
    )

    result = await make_control().turn(
        [*PLAN, user("quanto tá a fatura do cartão?")], BUDGET_STATE, 1, thread_id=THREAD
    )

    assert calls(fake_llm) == {"route_continuity": 1, "router": 1, "agent": 2}
    [call] = result.tool_calls
    assert (call.name, call.error) == ("cardInvoice", None)
    assert (call.result["total"], call.result["charge_count"]) == ("R$ 339,90", 2)
    assert [c["category"] for c in call.result["by_card"]] == ["cartão nubank", "cartão"]
    assert [c["description"] for c in call.result["charges"]] == ["", "farmácia"]
    assert call.result["all_charges_listed"] is True
    assert result.ran_tools
    assert (result.llm_calls, result.usage_by_profile["agent"].calls) == (4, 2)
    assert result.reply.content == "A fatura de junho está em R$ 339,90."
    assert result.state == RouteState("invoice_agent", "invoice_summary", "card_invoice")
