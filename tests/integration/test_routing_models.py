"""The continuity classifier and the enterprise router on their own, through the real
openai client against the fake chat-completions server. Each profile gets its own model
name, so every call is attributed at the HTTP level."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

import pytest

from agent.llm import OpenAICompatibleLLM
from agent.messages import ChatMessage
from agent.profiles import LLMProfiles
from agent.routing import (
    ContinuityClassifier,
    DomainAgents,
    EnterpriseRouter,
    SessionControlConfig,
    build_domain_agents,
)
from tests.fakes.llm import FakeLLM, Scripted, error, hang, no_choices
from tests.integration.conftest import profiles_with

MODELS = {
    "agent": "agent-model",
    "router": "router-model",
    "route_continuity": "continuity-model",
    "psychologist_light": "light-model",
}


def routing_profiles(**changes: dict[str, Any]) -> LLMProfiles:
    """The packaged profiles, one distinct model name per role, plus ``changes``."""
    updates: dict[str, dict[str, Any]] = {name: {"model": model} for name, model in MODELS.items()}
    for name, change in changes.items():
        updates.setdefault(name, {}).update(change)
    return profiles_with(**updates)


class ByModel:
    """Answers each request from its model's queue; an unscripted call is a 500."""

    def __init__(self) -> None:
        self.queues: dict[str, deque[Scripted]] = defaultdict(deque)

    def on(self, role: str, *answers: Scripted) -> ByModel:
        self.queues[MODELS[role]].extend(answers)
        return self

    def __call__(self, body: dict[str, Any]) -> Scripted:
        queue = self.queues.get(str(body.get("model")))
        return queue.popleft() if queue else error(500, f"unscripted call to {body.get('model')}")


def decision(name: str, confidence: float = 0.97, **extra: Any) -> str:
    return json.dumps({"decision": name, "confidence": confidence, **extra})


def route(agent: str, intent: str | None = None, confidence: float = 0.93) -> str:
    return json.dumps({"route": agent, "intent": intent, "confidence": confidence})


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def bot(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


PLAN = [user("qual é o meu orçamento do mês?"), bot("O orçamento do mês é R$ 3.000,00.")]


@pytest.fixture
def script(fake_llm: FakeLLM) -> ByModel:
    responder = ByModel()
    fake_llm.responder = responder
    return responder


@pytest.fixture
def llm_for(
    fake_llm: FakeLLM, make_llm: Callable[..., OpenAICompatibleLLM]
) -> Callable[..., OpenAICompatibleLLM]:
    def make(**changes: dict[str, Any]) -> OpenAICompatibleLLM:
        return make_llm(base_url=fake_llm.base_url, profiles=routing_profiles(**changes))

    return make


@pytest.fixture
def agents() -> DomainAgents:
    return build_domain_agents(None, None)


# -- the continuity classifier ----------------------------------------------------------------


async def test_continue_with_an_active_agent_is_accepted(
    llm_for: Callable[..., OpenAICompatibleLLM],
    script: ByModel,
    fake_llm: FakeLLM,
    agents: DomainAgents,
) -> None:
    script.on("route_continuity", decision("CONTINUE", 0.97))
    classifier = ContinuityClassifier(llm_for(), SessionControlConfig(enabled=True))

    signal = await classifier.classify(
        [*PLAN, user("o que está incluso?")],
        agents=agents,
        active_agent="budget_agent",
        previous_intent="month_total",
        previous_domain="budget",
    )

    assert (signal.decision, signal.confidence, signal.accepted) == ("CONTINUE", 0.97, True)
    assert (signal.model_decision, signal.reason, signal.route_bypassed) == ("CONTINUE", None, True)
    assert signal.profile_name == "route_continuity"
    assert signal.usage.calls == 1
    assert signal.usage.total_tokens > 0
    [call] = fake_llm.calls
    assert call["model"] == "continuity-model"
    assert call["max_tokens"] == 80
    assert call["response_format"] == {"type": "json_object"}
    assert "tools" not in call
    payload = json.loads(call["messages"][1]["content"])
    assert set(payload) == {
        "active_agent",
        "agents",
        "previous_intent",
        "previous_domain",
        "recent_turns",
        "current_message",
    }
    assert payload["current_message"] == "o que está incluso?"


async def test_the_profile_and_the_token_limit_come_from_the_settings(
    llm_for: Callable[..., OpenAICompatibleLLM],
    script: ByModel,
    fake_llm: FakeLLM,
    agents: DomainAgents,
) -> None:
    script.on("psychologist_light", decision("ROUTE", 0.99))
    config = SessionControlConfig(enabled=True, profile="psychologist_light", max_tokens=24)

    signal = await ContinuityClassifier(llm_for(), config).classify([user("oi")], agents=agents)

    assert (signal.decision, signal.accepted, signal.profile_name) == (
        "ROUTE",
        True,
        "psychologist_light",
    )
    assert [(c["model"], c["max_tokens"]) for c in fake_llm.calls] == [("light-model", 24)]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (decision("CONTINUE", 0.89), "confidence 0.89 not above threshold 0.9"),
        (decision("HUMAN_HANDOFF", 0.5), "confidence 0.5 not above threshold 0.9"),
        (decision("END_SESSION", 0.1), "confidence 0.1 not above threshold 0.9"),
        ("CONTINUE", "invalid JSON"),
        ('{"decision": "CONTINUE", "confidence": 0.97', "invalid JSON"),
        (json.dumps({"decision": "STAY", "confidence": 0.99}), "invalid answer: decision"),
        (json.dumps({"decision": "CONTINUE", "confidence": 1.2}), "invalid answer: confidence"),
        (json.dumps({"decision": "CONTINUE"}), "invalid answer: confidence"),
        (error(500), "LLMError: HTTP 500"),
        (error(429), "LLMError: HTTP 429"),
        (no_choices(), "LLMBadResponse"),
    ],
)
async def test_every_doubt_and_every_failure_means_route(
    llm_for: Callable[..., OpenAICompatibleLLM],
    script: ByModel,
    agents: DomainAgents,
    answer: Scripted,
    reason: str,
) -> None:
    script.on("route_continuity", answer)
    classifier = ContinuityClassifier(llm_for(), SessionControlConfig(enabled=True))

    signal = await classifier.classify(
        [*PLAN, user("o que está incluso?")], agents=agents, active_agent="budget_agent"
    )

    assert (signal.decision, signal.accepted, signal.route_bypassed) == ("ROUTE", False, False)
    assert signal.reason is not None
    assert signal.reason.startswith(reason)
    assert signal.event_data()["decision"] == "ROUTE"


async def test_a_timeout_means_route(
    llm_for: Callable[..., OpenAICompatibleLLM], script: ByModel, agents: DomainAgents
) -> None:
    script.on("route_continuity", hang())
    llm = llm_for(route_continuity={"timeout_seconds": 0.2})

    signal = await ContinuityClassifier(llm, SessionControlConfig(enabled=True)).classify(
        [*PLAN, user("o que está incluso?")], agents=agents, active_agent="budget_agent"
    )

    assert (signal.decision, signal.accepted, signal.confidence) == ("ROUTE", False, 0.0)
    assert signal.reason is not None
    assert signal.reason.startswith("LLMTimeout")


async def test_a_decision_must_be_above_the_threshold_which_is_configurable(
    llm_for: Callable[..., OpenAICompatibleLLM], script: ByModel, agents: DomainAgents
) -> None:
    script.on(
        "route_continuity",
        decision("CONTINUE", 0.9),
        decision("CONTINUE", 0.91),
        decision("CONTINUE", 0.75),
    )
    llm = llm_for()
    default = ContinuityClassifier(llm, SessionControlConfig(enabled=True))

    at = await default.classify([user("e o resto?")], agents=agents, active_agent="budget_agent")
    above = await default.classify([user("e o resto?")], agents=agents, active_agent="budget_agent")
    low = await ContinuityClassifier(llm, SessionControlConfig(threshold=0.7)).classify(
        [user("e o resto?")], agents=agents, active_agent="budget_agent"
    )

    assert (at.decision, at.accepted, at.reason) == (
        "ROUTE",
        False,
        "confidence 0.9 not above threshold 0.9",
    )
    assert (above.decision, above.accepted) == ("CONTINUE", True)
    assert (low.decision, low.accepted) == ("CONTINUE", True)


async def test_continue_without_an_active_agent_becomes_route(
    llm_for: Callable[..., OpenAICompatibleLLM], script: ByModel, agents: DomainAgents
) -> None:
    script.on("route_continuity", decision("CONTINUE", 0.99), decision("CONTINUE", 0.99))
    classifier = ContinuityClassifier(llm_for(), SessionControlConfig(enabled=True))

    first = await classifier.classify([user("o que está incluso?")], agents=agents)
    gone = await classifier.classify(
        [user("o que está incluso?")], agents=agents, active_agent="retired_agent"
    )

    for signal in (first, gone):
        assert (signal.decision, signal.model_decision, signal.accepted) == (
            "ROUTE",
            "CONTINUE",
            False,
        )
        assert signal.reason == "CONTINUE without an active agent"
        assert signal.active_agent is None


@pytest.mark.parametrize("active", [None, "invoice_agent"])
@pytest.mark.parametrize("name", ["HUMAN_HANDOFF", "END_SESSION"])
async def test_handoff_and_end_are_accepted_with_or_without_an_active_agent(
    llm_for: Callable[..., OpenAICompatibleLLM],
    script: ByModel,
    agents: DomainAgents,
    name: str,
    active: str | None,
) -> None:
    script.on("route_continuity", decision(name, 0.95))
    classifier = ContinuityClassifier(llm_for(), SessionControlConfig(enabled=True))

    signal = await classifier.classify([user("…")], agents=agents, active_agent=active)

    assert (signal.decision, signal.accepted, signal.route_bypassed) == (name, True, True)
    assert signal.event_data() == {
        "decision": name,
        "confidence": 0.95,
        "active_agent": active,
        "route_bypassed": True,
        "profile_name": "route_continuity",
        "model_decision": name,
        "accepted": True,
        "latency_ms": signal.latency_ms,
    }


# -- the enterprise router --------------------------------------------------------------------


async def test_the_router_picks_agent_and_intent_and_the_domain_is_the_agents(
    llm_for: Callable[..., OpenAICompatibleLLM],
    script: ByModel,
    fake_llm: FakeLLM,
    agents: DomainAgents,
) -> None:
    script.on("router", route("invoice_agent", "dispute_charge", 0.92))

    decision_ = await EnterpriseRouter(llm_for(), agents).route(
        [*PLAN, user("agora quero contestar uma cobrança")]
    )

    assert (decision_.route, decision_.intent, decision_.domain, decision_.method) == (
        "invoice_agent",
        "dispute_charge",
        "card_invoice",
        "router",
    )
    assert (decision_.confidence, decision_.reason, decision_.llm_calls) == (0.92, None, 1)
    assert decision_.usage.calls == 1
    [call] = fake_llm.calls
    assert call["model"] == "router-model"
    assert call["response_format"] == {"type": "json_object"}
    payload = json.loads(call["messages"][1]["content"])
    assert payload["current_message"] == "agora quero contestar uma cobrança"
    assert [a["capabilities"] for a in payload["agents"]] == [
        a.capability_description for a in agents
    ]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (route("lawyer_agent", "sue"), "unknown agent 'lawyer_agent'"),
        ("invoice_agent", "invalid JSON"),
        (json.dumps({"intent": "dispute_charge"}), "invalid answer: route"),
        (json.dumps({"route": "invoice_agent", "confidence": 7}), "invalid answer: confidence"),
        (error(503), "LLMError: HTTP 503"),
        (hang(), "LLMTimeout"),
    ],
)
async def test_anything_unusable_falls_back_to_the_default_agent(
    llm_for: Callable[..., OpenAICompatibleLLM],
    script: ByModel,
    agents: DomainAgents,
    answer: Scripted,
    reason: str,
) -> None:
    script.on("router", answer)
    router = EnterpriseRouter(llm_for(router={"timeout_seconds": 0.2}), agents)

    decision_ = await router.route([user("agora quero contestar uma cobrança")])

    assert (decision_.route, decision_.intent, decision_.domain, decision_.method) == (
        "budget_agent",
        None,
        "budget",
        "default",
    )
    assert decision_.reason is not None
    assert decision_.reason.startswith(reason)
    assert decision_.llm_calls == 1
    assert decision_.event().data()["reason"] == decision_.reason


async def test_an_unknown_intent_keeps_the_agent_and_drops_the_intent(
    llm_for: Callable[..., OpenAICompatibleLLM], script: ByModel, agents: DomainAgents
) -> None:
    script.on("router", route("savings_agent", "buy_a_boat"))

    decision_ = await EnterpriseRouter(llm_for(), agents).route([user("quero guardar")])

    assert (decision_.route, decision_.intent, decision_.method) == (
        "savings_agent",
        None,
        "router",
    )
    assert decision_.reason == "unknown intent 'buy_a_boat' for savings_agent"


async def test_without_an_llm_the_router_picks_the_default_without_a_call(
    agents: DomainAgents, fake_llm: FakeLLM
) -> None:
    decision_ = await EnterpriseRouter(None, agents).route([user("oi")])

    assert (decision_.route, decision_.method, decision_.reason) == (
        "budget_agent",
        "default",
        "no LLM configured",
    )
    assert decision_.llm_calls == 0
    assert fake_llm.call_count == 0
