"""Domain agents, their capability descriptions, the routing context and the settings:
everything of session control that needs no LLM and no Redis."""

from __future__ import annotations

import ast
import inspect
import json
from dataclasses import replace
from datetime import datetime

import pytest

from agent import routing
from agent.dates import SAO_PAULO
from agent.messages import ChatMessage, ToolCallRequest
from agent.prompts import CONTINUITY_SYSTEM_PROMPT, ROUTER_SYSTEM_PROMPT, build_system_prompt
from agent.routing import (
    BUDGET_AGENT,
    INVOICE_AGENT,
    SAVINGS_AGENT,
    AgentSpec,
    ContinuityAnswer,
    ContinuityClassifier,
    DomainAgents,
    EnterpriseRouter,
    Intent,
    RouteState,
    SessionControlConfig,
    build_domain_agents,
    describe_capabilities,
)
from agent.routing import continuity as continuity_module
from agent.routing import session_control as session_control_module
from agent.routing._context import (
    MAX_HISTORY_CHARS,
    current_message,
    parse_json_object,
    recent_messages,
    recent_turns,
)
from agent.tools import default_registry
from agent.tools.finance import registry_for

NOW = datetime(2026, 6, 15, 10, 30, tzinfo=SAO_PAULO)


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def bot(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


# -- the agents -------------------------------------------------------------------------------


def test_the_three_domain_agents_have_their_own_tools() -> None:
    agents = build_domain_agents(None, None)

    assert agents.names == ["budget_agent", "savings_agent", "invoice_agent"]
    assert agents.default.name == "budget_agent"
    assert sorted(agents["budget_agent"].tools.names) == sorted(
        ["budgetTotal", "spendingByCategory", "recordExpense", "setBudget", "budgetStatus"]
    )
    assert agents["savings_agent"].tools.names == [
        "savingsGoalProgress",
        "contributeToGoal",
        "createSavingsGoal",
    ]
    assert agents["invoice_agent"].tools.names == [
        "cardInvoice",
        "recordExpense",
        "spendingByCategory",
    ]
    assert [agent.domain for agent in agents] == ["budget", "savings", "card_invoice"]
    assert all(agent.profile == "agent" for agent in agents)


def test_the_default_registry_keeps_its_eight_tools_and_the_card_tool_is_the_invoice_agents() -> (
    None
):
    assert len(default_registry()) == 8
    assert "cardInvoice" not in default_registry()
    with pytest.raises(ValueError, match="unknown tools"):
        registry_for(["budgetTotal", "noSuchTool"])


def test_the_capability_description_is_derived_from_the_intents() -> None:
    spec = AgentSpec(
        "x_agent",
        "x",
        (Intent("a", "fazer a coisa A"), Intent("b", "fazer a coisa B")),
        ("budgetTotal",),
        "- foco",
    )

    assert spec.capability_description == "fazer a coisa A (a); fazer a coisa B (b)"
    more = replace(spec, intents=(*spec.intents, Intent("c", "fazer a coisa C")))
    assert more.capability_description.endswith("; fazer a coisa C (c)")
    for agent_spec in (BUDGET_AGENT, SAVINGS_AGENT, INVOICE_AGENT):
        assert agent_spec.capability_description == describe_capabilities(agent_spec.intents)
        for intent in agent_spec.intents:
            assert intent.description in agent_spec.capability_description


def test_an_agent_needs_intents_and_unique_names() -> None:
    with pytest.raises(ValueError, match="at least one intent"):
        AgentSpec("x", "x", (), (), "")
    with pytest.raises(ValueError, match="duplicate intents"):
        AgentSpec("x", "x", (Intent("a", "1"), Intent("a", "2")), (), "")
    agents = build_domain_agents(None, None)
    with pytest.raises(ValueError, match="defined twice"):
        DomainAgents([agents["budget_agent"], agents["budget_agent"]])
    with pytest.raises(ValueError, match="default agent"):
        DomainAgents([agents["savings_agent"]])


def test_each_agent_prompt_is_mels_with_its_focus_and_todays_date() -> None:
    agents = build_domain_agents(None, None, clock=lambda: NOW)

    for agent in agents:
        prompt = agent.system_prompt()
        assert prompt.startswith(build_system_prompt(NOW))
        assert agent.spec.focus in prompt
        assert agent.capability_description in prompt
        chat = agent.chat
        assert chat.system_message(NOW).content == prompt
        assert (chat.profile, chat.tools) == ("agent", agent.tools)
    assert "fatura do cartão" in agents["invoice_agent"].system_prompt()
    assert "metas de economia" in agents["savings_agent"].system_prompt()


# -- what the routing models read -----------------------------------------------------------

CONVERSATION = [
    user("qual o total do mês?"),
    ChatMessage(
        role="assistant",
        tool_calls=(ToolCallRequest(id="c1", name="budgetTotal", arguments="{}"),),
    ),
    ChatMessage(role="tool", tool_call_id="c1", content='{"spent": "R$ 999,99"}'),
    bot("Vocês gastaram R$ 999,99."),
    user("e por categoria?"),
    bot("Mercado R$ 500,00."),
    user("e o aluguel?"),
    bot("Aluguel R$ 400,00."),
    user("o que está incluso?"),
]


def test_recent_turns_pair_user_and_reply_and_leave_out_tools() -> None:
    assert recent_turns(CONVERSATION, 2) == [
        {"user": "e por categoria?", "assistant": "Mercado R$ 500,00."},
        {"user": "e o aluguel?", "assistant": "Aluguel R$ 400,00."},
    ]
    turns = recent_turns(CONVERSATION, 10)
    assert turns[0] == {"user": "qual o total do mês?", "assistant": "Vocês gastaram R$ 999,99."}
    assert len(turns) == 3
    assert recent_turns(CONVERSATION, 0) == []
    assert current_message(CONVERSATION) == "o que está incluso?"
    assert recent_messages(CONVERSATION, 2) == [
        {"role": "user", "content": "e o aluguel?"},
        {"role": "assistant", "content": "Aluguel R$ 400,00."},
    ]


def test_long_history_messages_are_cut() -> None:
    turns = recent_turns([user("x" * 5000), bot("y"), user("agora")], 2)

    assert len(turns[0]["user"]) == MAX_HISTORY_CHARS
    assert turns[0]["user"].endswith("…")


def test_the_classifier_reads_only_what_the_spec_lists() -> None:
    agents = build_domain_agents(None, None)
    classifier = ContinuityClassifier(None, SessionControlConfig(history_turns=1))  # type: ignore[arg-type]

    system, request = classifier.request(
        CONVERSATION,
        agents=agents,
        active_agent="budget_agent",
        previous_intent="month_total",
        previous_domain="budget",
    )

    assert system.content == CONTINUITY_SYSTEM_PROMPT
    payload = json.loads(request.content)
    assert payload == {
        "active_agent": "budget_agent",
        "agents": [
            {
                "agent": agent.name,
                "domain": agent.domain,
                "capabilities": agent.capability_description,
            }
            for agent in agents
        ],
        "previous_intent": "month_total",
        "previous_domain": "budget",
        "recent_turns": [{"user": "e o aluguel?", "assistant": "Aluguel R$ 400,00."}],
        "current_message": "o que está incluso?",
    }
    # no agent prompt, no tool results, no tool schemas
    assert "R$ 999,99" not in request.content
    assert "Você é a mel" not in request.content


def test_the_router_reads_the_agents_intents_and_the_recent_messages() -> None:
    agents = build_domain_agents(None, None)
    router = EnterpriseRouter(None, agents, history_messages=2)

    system, request = router.request(CONVERSATION)

    assert system.content == ROUTER_SYSTEM_PROMPT
    payload = json.loads(request.content)
    assert [card["agent"] for card in payload["agents"]] == agents.names
    assert payload["agents"][2]["intents"][2] == {
        "name": "dispute_charge",
        "description": "dúvida ou contestação de uma cobrança da fatura do cartão",
    }
    assert payload["recent_messages"] == recent_messages(CONVERSATION, 2)
    assert payload["current_message"] == "o que está incluso?"


def test_the_prompts_define_a_task_and_no_phrases() -> None:
    for prompt in (CONTINUITY_SYSTEM_PROMPT, ROUTER_SYSTEM_PROMPT):
        assert '"' in prompt  # the JSON output format
        for example in ('pessoa"', "obrigad", 'encerrar"', "tchau", "incluso", "contestar"):
            assert example not in prompt
    for decision in ("CONTINUE", "ROUTE", "HUMAN_HANDOFF", "END_SESSION"):
        assert decision in CONTINUITY_SYSTEM_PROMPT


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"decision": "CONTINUE", "confidence": 0.97}',
            {"decision": "CONTINUE", "confidence": 0.97},
        ),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("  {}  ", {}),
        ("[1, 2]", None),
        ("CONTINUE", None),
        ("", None),
        ('{"decision": "CONTINUE"', None),
    ],
)
def test_json_answers_are_read_strictly(text: str, expected: object) -> None:
    assert parse_json_object(text) == expected


def test_the_classifiers_answer_schema() -> None:
    assert ContinuityAnswer.model_validate(
        {"decision": " continue ", "confidence": 1}
    ).decision == ("CONTINUE")
    for bad in (
        {"decision": "MAYBE", "confidence": 0.99},
        {"decision": "CONTINUE", "confidence": 1.5},
        {"decision": "CONTINUE", "confidence": -0.1},
        {"decision": "CONTINUE", "confidence": True},
        {"decision": "CONTINUE", "confidence": "0.99"},
        {"decision": "CONTINUE"},
    ):
        with pytest.raises(ValueError, match="validation error"):
            ContinuityAnswer.model_validate(bad)


# -- settings and state -----------------------------------------------------------------------


def test_the_settings_default_to_the_spec_and_reject_nonsense() -> None:
    config = SessionControlConfig()
    assert (config.enabled, config.profile, config.threshold) == (False, "route_continuity", 0.9)
    assert (config.history_turns, config.max_tokens) == (2, 80)
    assert config.human_handoff_message == "Vou encaminhar seu atendimento para uma pessoa."
    assert config.end_session_message == "Atendimento encerrado. Obrigado pelo contato."
    for bad in (
        {"threshold": 1.1},
        {"threshold": -0.1},
        {"history_turns": -1},
        {"max_tokens": 0},
        {"profile": " "},
        {"human_handoff_message": ""},
        {"end_session_message": " "},
    ):
        with pytest.raises(ValueError, match=r"ROUTE_STICKINESS|MESSAGE"):
            SessionControlConfig(**bad)  # type: ignore[arg-type]


def test_route_state_round_trips_through_stored_fields() -> None:
    state = RouteState("invoice_agent", "dispute_charge", "card_invoice")

    assert RouteState.from_mapping(state.as_dict()) == state
    assert RouteState.from_mapping({"active_agent": b"savings_agent", "previous_intent": ""}) == (
        RouteState("savings_agent")
    )
    assert RouteState.from_mapping({}) == RouteState()


def test_the_classifier_and_session_control_hold_no_language_rules() -> None:
    """The spec: no regexes, phrase lists or language rules about the user's text."""
    for module in (continuity_module, session_control_module, routing.router, routing._context):
        tree = ast.parse(inspect.getsource(module))
        imported = {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in (
                node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
            )
        }
        assert not imported & {"re", "regex", "fnmatch", "difflib"}, module.__name__
        assert "guard._" not in inspect.getsource(module)
