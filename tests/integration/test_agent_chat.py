"""AgentChat.ask end to end: the guard, the real openai client against a fake
chat-completions server on loopback, the finance tools on a real Redis ledger.

"The LLM was (not) called" is observed at the HTTP level: ``fake_llm.call_count``.
"""

from __future__ import annotations

import json
import re
import time
from datetime import date

import pytest
import redis.asyncio as aioredis
from structlog.testing import capture_logs

from agent.chat import AgentChat
from agent.ledger import Ledger, NewExpense
from agent.messages import ChatMessage
from agent.outcomes import Outcome
from agent.prompts import ASSISTANT_UNAVAILABLE, LLM_FAILURE_REPLY, TOOL_LOOP_APOLOGY
from agent.tools import default_registry
from guard import GUARD_RESPONSE_FRUSTRATED, GUARD_RESPONSE_HUMAN_REQUEST, GUARD_RESPONSE_LOOP
from tests.fakes.llm import FakeLLM, error, hang, no_choices, text, tool_call, tool_calls
from tests.integration.conftest import NOW, MakeAgent, profiles_with

THREAD = "twilio:+14155238886:+5511999990000"
SENDER = "+5511999990000"


def user(content: str) -> ChatMessage:
    return ChatMessage(role="user", content=content)


def bot(content: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=content)


# -- spec 023: the five scenarios ---------------------------------------------------------


async def test_frustrated_couple_gets_the_canonical_reply_and_no_llm_call(
    make_agent: MakeAgent, fake_llm: FakeLLM, redis: aioredis.Redis
) -> None:
    agent = await make_agent()

    result = await agent.ask([user("esse bot é uma porra, não funciona NADA")], thread_id=THREAD)

    assert result.verdict is not None
    assert (result.verdict.preempt, result.verdict.kind) == (True, "frustrated")
    assert result.verdict.response == GUARD_RESPONSE_FRUSTRATED
    assert result.reply.role == "assistant"
    assert result.reply.content == GUARD_RESPONSE_FRUSTRATED
    assert re.search(r"entendo|frustrad|bora tentar", result.reply.content, re.IGNORECASE)
    assert result.outcome is Outcome.PREEMPT_FRUSTRATED
    assert fake_llm.call_count == 0
    assert result.tool_calls == []
    assert (result.llm_calls, result.usage.calls, result.usage.cost_micro_usd) == (0, 0, 0)
    assert await redis.dbsize() == 0  # not even the ledger was touched


async def test_a_loop_is_preempted_when_the_caller_counts_two_unresolved_turns(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    agent = await make_agent()
    history = [
        user("qual o saldo?"),
        bot("Posso te ajudar com orçamento e metas."),
        user("saldo?"),
        bot("Quer ver o orçamento do mês?"),
        user("saldo mesmo?"),
    ]

    result = await agent.ask(history, past_turns_without_tool_call=2, thread_id=THREAD)

    assert result.verdict is not None
    assert (result.verdict.preempt, result.verdict.kind) == (True, "loop")
    assert result.reply.content == GUARD_RESPONSE_LOOP
    assert re.search(r"travei|reformul|humano", result.reply.content, re.IGNORECASE)
    assert fake_llm.call_count == 0
    assert result.tool_calls == []


async def test_the_same_messages_reach_the_llm_when_the_caller_passes_no_count(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    agent = await make_agent()
    fake_llm.script("Ainda não tenho o saldo, mas posso mostrar o orçamento do mês.")

    result = await agent.ask([user("qual o saldo?"), user("saldo?"), user("saldo mesmo?")])

    assert result.outcome == "agent"
    assert result.verdict is None
    assert fake_llm.call_count == 1


async def test_a_request_for_a_human_is_answered_transparently(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    agent = await make_agent()

    result = await agent.ask([user("quero falar com uma pessoa, não com bot")])

    assert result.verdict is not None
    assert (result.verdict.preempt, result.verdict.kind) == (True, "human-request")
    assert result.reply.content == GUARD_RESPONSE_HUMAN_REQUEST
    content = result.reply.content
    assert re.search(r"só eu|por enquanto|sem humano|anoto.*pedido", content, re.IGNORECASE)
    assert re.search(r"orçamento|meta|fatura", content, re.IGNORECASE)
    assert fake_llm.call_count == 0
    assert result.tool_calls == []


async def test_a_normal_message_goes_to_the_llm_which_calls_budget_total(
    make_agent: MakeAgent, fake_llm: FakeLLM, ledger: Ledger
) -> None:
    await ledger.record_expense(SENDER, NewExpense(date(2026, 6, 3), 45_90, "mercado"))
    await ledger.record_expense(SENDER, NewExpense(date(2026, 6, 10), 120_000, "aluguel"))
    await ledger.record_expense(SENDER, NewExpense(date(2026, 5, 30), 999, "mercado"))
    await ledger.set_budget(SENDER, "2026-06", 300_000)
    model_text = "Em junho vocês gastaram R$ 1.245,90 de R$ 3.000,00. Quer ver por categoria?"
    fake_llm.script(tool_call("budgetTotal", {"month": "2026-06"}), model_text)
    agent = await make_agent()

    result = await agent.ask([user("qual o total do mês?")], thread_id=THREAD)

    assert result.verdict is None
    assert result.outcome == "agent"
    assert fake_llm.call_count == 2
    assert result.reply == ChatMessage(role="assistant", content=model_text)  # exactly
    [call] = result.tool_calls
    assert (call.name, call.arguments, call.error) == ("budgetTotal", {"month": "2026-06"}, None)
    assert call.result == {
        "month": "2026-06",
        "budget_cents": 300_000,
        "budget": "R$ 3.000,00",
        "spent_cents": 124_590,
        "spent": "R$ 1.245,90",
        "remaining_cents": 175_410,
        "remaining": "R$ 1.754,10",
        "percent_used": 41.5,
        "over_budget": False,
        "budget_source": "total",
        "expense_count": 2,
    }
    # what the model read as the tool result is that same result
    [tool_message] = fake_llm.tool_messages()
    assert json.loads(tool_message["content"]) == call.result
    assert tool_message["tool_call_id"] == call.call_id
    first = fake_llm.calls[0]
    assert first["model"] == "gpt-4.1-mini"
    assert first["messages"][0]["role"] == "system"
    assert "2026-06" in first["messages"][0]["content"]
    assert first["messages"][-1] == {"role": "user", "content": "qual o total do mês?"}
    assert {tool["function"]["name"] for tool in first["tools"]} >= {"budgetTotal"}
    assert result.ran_tools


async def test_frustration_and_a_human_request_together_count_as_frustration(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    agent = await make_agent()

    result = await agent.ask([user("VAI A MERDA, QUERO FALAR COM HUMANO")])

    assert result.verdict is not None
    assert (result.verdict.preempt, result.verdict.kind) == (True, "frustrated")
    assert result.reply.content == GUARD_RESPONSE_FRUSTRATED
    assert fake_llm.call_count == 0
    assert result.tool_calls == []


# -- the tool loop ---------------------------------------------------------------------------


async def test_a_validation_error_reaches_the_model_which_corrects_itself(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    fake_llm.script(
        tool_call("budgetTotal", {"month": "junho"}),
        tool_call("budgetTotal", {"month": "2026-06"}),
        "Ainda não há gastos em junho. Quer registrar o primeiro?",
    )
    agent = await make_agent()

    result = await agent.ask([user("quanto gastei em junho?")], thread_id=THREAD)

    assert result.outcome == "agent"
    assert fake_llm.call_count == 3
    wrong, right = result.tool_calls
    assert wrong.error is not None
    assert "month: mês inválido 'junho'" in wrong.error
    assert wrong.result is None
    # the model saw the error text as the tool result of its first call
    [seen] = fake_llm.tool_messages(1)
    assert json.loads(seen["content"]) == {"error": wrong.error}
    assert right.ok
    assert right.result["spent"] == "R$ 0,00"
    assert result.reply.content == "Ainda não há gastos em junho. Quer registrar o primeiro?"


async def test_several_tools_in_one_round_all_run_in_order(
    make_agent: MakeAgent, fake_llm: FakeLLM, ledger: Ledger
) -> None:
    fake_llm.script(
        tool_calls(
            ("recordExpense", {"amount": "45,90", "category": "Mercado", "description": "feira"}),
            ("budgetTotal", {"month": "2026-06"}),
        ),
        "Anotei R$ 45,90 em mercado.",
    )
    agent = await make_agent()

    result = await agent.ask([user("gastei 45,90 na feira")], thread_id=THREAD)

    assert [call.name for call in result.tool_calls] == ["recordExpense", "budgetTotal"]
    recorded, total = (call.result for call in result.tool_calls)
    assert recorded["expense"]["amount"] == "R$ 45,90"
    assert recorded["expense"]["category"] == "mercado"
    assert recorded["expense"]["date"] == "2026-06-15"  # "today" in São Paulo
    assert recorded["expense"]["paid_by"] == SENDER
    assert total["spent_cents"] == 4590  # the second call sees the first one's write
    assert [m["tool_call_id"] for m in fake_llm.tool_messages()] == [
        call.call_id for call in result.tool_calls
    ]
    assert (await ledger.month_spending(SENDER, "2026-06")).total_cents == 4590


async def test_the_tool_round_bound_gives_the_apology(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda request: tool_call("budgetTotal", {"month": "2026-06"})
    agent = await make_agent(max_tool_rounds=2)

    result = await agent.ask([user("qual o total do mês?")])

    assert result.outcome == "tool_limit"
    assert result.reply == ChatMessage(role="assistant", content=TOOL_LOOP_APOLOGY)
    assert fake_llm.call_count == 3  # two rounds of tools, then one answer too many
    assert len(result.tool_calls) == 2
    assert result.llm_calls == 3


async def test_the_default_bound_is_four_rounds(make_agent: MakeAgent, fake_llm: FakeLLM) -> None:
    fake_llm.responder = lambda request: tool_call("budgetTotal", {"month": "2026-06"})
    agent = await make_agent()

    result = await agent.ask([user("qual o total do mês?")])

    assert result.outcome == "tool_limit"
    assert (fake_llm.call_count, len(result.tool_calls)) == (5, 4)


async def test_an_unknown_tool_is_reported_to_the_model(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    fake_llm.script(tool_call("saldoBancario", {}), "Não tenho acesso ao saldo do banco.")
    agent = await make_agent()

    result = await agent.ask([user("e o saldo do banco?")])

    assert result.outcome == "agent"
    [call] = result.tool_calls
    assert call.error is not None
    assert call.error.startswith("ferramenta desconhecida 'saldoBancario'")
    assert "error" in json.loads(fake_llm.tool_messages()[0]["content"])


# -- failures --------------------------------------------------------------------------------


async def test_an_llm_timeout_is_an_outage_with_the_failure_reply(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    fake_llm.script(hang())
    agent = await make_agent(profiles=profiles_with(agent={"timeout_seconds": 0.3}))

    started = time.perf_counter()
    with capture_logs() as logs:
        result = await agent.ask([user("qual o total do mês?")], thread_id=THREAD)

    assert time.perf_counter() - started < 3
    assert result.outcome is Outcome.OUTAGE  # the gateway parks the turn and tries again
    assert result.reply == ChatMessage(role="assistant", content=LLM_FAILURE_REPLY)
    assert fake_llm.call_count == result.llm_calls == 1  # no retry behind the caller's back
    assert result.usage.calls == 0
    [failure] = [log for log in logs if log["event"] == "agent_chat.llm_failed"]
    assert failure["error"] == "LLMTimeout"
    assert failure["log_level"] == "warning"


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (error(500), Outcome.OUTAGE),
        (error(429), Outcome.OUTAGE),
        (error(401), Outcome.ERROR),
        (no_choices(), Outcome.ERROR),
    ],
)
async def test_an_llm_error_gives_the_failure_reply_an_outage_when_it_may_pass(
    make_agent: MakeAgent, fake_llm: FakeLLM, answer: object, outcome: Outcome
) -> None:
    fake_llm.script(answer)  # type: ignore[arg-type]
    agent = await make_agent()

    result = await agent.ask([user("qual o total do mês?")])

    assert (result.outcome, result.reply.content) == (outcome, LLM_FAILURE_REPLY)
    assert fake_llm.call_count == 1


async def test_a_failure_after_a_tool_round_keeps_what_was_done(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    fake_llm.script(
        tool_call("budgetTotal", {"month": "2026-06"}, prompt_tokens=100, completion_tokens=10),
        error(503),
    )
    agent = await make_agent()

    result = await agent.ask([user("qual o total do mês?")])

    assert result.outcome is Outcome.OUTAGE  # 503
    assert [call.name for call in result.tool_calls] == ["budgetTotal"]
    assert (result.llm_calls, result.usage.calls, result.usage.prompt_tokens) == (2, 1, 100)


async def test_an_empty_answer_is_treated_as_a_failure(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text(""))
    agent = await make_agent()

    result = await agent.ask([user("oi")])

    assert (result.outcome, result.reply.content) == ("error", LLM_FAILURE_REPLY)


async def test_no_llm_configured_gives_the_unavailable_reply(ledger: Ledger) -> None:
    agent = AgentChat(None, default_registry(), ledger)

    result = await agent.ask([user("qual o total do mês?")])

    assert result.outcome == "unavailable"
    assert result.reply == ChatMessage(role="assistant", content=ASSISTANT_UNAVAILABLE)
    assert (result.llm_calls, result.tool_calls, result.verdict) == (0, [], None)


async def test_the_guard_still_answers_without_an_llm(ledger: Ledger) -> None:
    agent = AgentChat(None, default_registry(), ledger)

    result = await agent.ask([user("quero falar com uma pessoa, não com bot")])

    assert result.outcome is Outcome.PREEMPT_HUMAN_REQUEST
    assert result.reply.content == GUARD_RESPONSE_HUMAN_REQUEST


async def test_a_client_without_an_endpoint_for_the_profile_is_unavailable(
    make_llm: object, fake_llm: FakeLLM, ledger: Ledger
) -> None:
    llm = make_llm(base_url=None)  # type: ignore[operator]
    agent = AgentChat(llm, default_registry(), ledger)

    result = await agent.ask([user("qual o total do mês?")])

    assert result.outcome == "unavailable"
    assert result.reply.content == ASSISTANT_UNAVAILABLE
    assert fake_llm.call_count == 0


# -- usage, households, profiles -------------------------------------------------------------


async def test_usage_and_cost_are_summed_over_the_calls(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    fake_llm.script(
        tool_call("budgetTotal", {"month": "2026-06"}, prompt_tokens=1000, completion_tokens=50),
        text("Nada gasto em junho ainda.", prompt_tokens=1200, completion_tokens=30),
    )
    agent = await make_agent()

    result = await agent.ask([user("qual o total do mês?")])

    assert result.usage.prompt_tokens == 2200
    assert result.usage.completion_tokens == 80
    # gpt-4.1-mini: US$ 0.40 in / 1.60 out per million tokens → micro-USD = tokens x price
    assert result.usage.cost_micro_usd == 2200 * 40 // 100 + 80 * 160 // 100 == 1008
    assert result.usage.calls == result.llm_calls == 2


async def test_linked_numbers_share_one_household(
    make_agent: MakeAgent, fake_llm: FakeLLM, ledger: Ledger
) -> None:
    await ledger.link_household("casa-ana-bia", ["+5511999990000", "+5511888880000"])
    agent = await make_agent()

    fake_llm.script(
        tool_call("recordExpense", {"amount": "80", "category": "lixo", "date": "2026-06-01"}),
        "Anotado!",
    )
    await agent.ask([user("paguei a taxa do lixo, 80 reais")], thread_id=THREAD)

    fake_llm.script(tool_call("budgetTotal", {"month": "2026-06"}), "R$ 80,00 até agora.")
    partner = await agent.ask(
        [user("quanto gastamos em junho?")], thread_id="twilio:+14155238886:+5511888880000"
    )

    assert partner.tool_calls[0].result["spent"] == "R$ 80,00"
    assert (await ledger.month_spending("casa-ana-bia", "2026-06")).total_cents == 8000
    assert (await ledger.month_spending(SENDER, "2026-06")).total_cents == 0


async def test_an_explicit_household_wins_and_no_thread_means_default(
    make_agent: MakeAgent, fake_llm: FakeLLM, ledger: Ledger
) -> None:
    await ledger.set_budget("default", "2026-06", 1000)
    await ledger.set_budget("casa-9", "2026-06", 2000)
    agent = await make_agent()
    fake_llm.responder = lambda request: (
        tool_call("budgetTotal", {"month": "2026-06"})
        if request["messages"][-1]["role"] == "user"
        else text("ok")
    )

    anonymous = await agent.ask([user("orçamento?")])
    explicit = await agent.ask([user("orçamento?")], thread_id=THREAD, household_id="casa-9")

    assert anonymous.tool_calls[0].result["budget_cents"] == 1000
    assert explicit.tool_calls[0].result["budget_cents"] == 2000


async def test_the_agent_uses_its_profile_model_and_limits(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    profiles = profiles_with(router={"model": "llama3.1:8b", "max_tokens": 123, "temperature": 0.0})
    agent = await make_agent(profiles=profiles, profile="router", system_prompt="Seja breve.")

    await agent.ask([user("oi")])

    [call] = fake_llm.calls_for("llama3.1:8b")
    assert (call["max_tokens"], call["temperature"]) == (123, 0.0)
    assert call["messages"][0] == {"role": "system", "content": "Seja breve."}
    assert "tool_choice" not in call
    assert "response_format" not in call


async def test_the_fixed_clock_is_what_the_tools_see(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    fake_llm.script(tool_call("spendingByCategory", {}), "ok")
    agent = await make_agent()

    result = await agent.ask([user("gastos por categoria?")])

    assert result.tool_calls[0].result["month"] == NOW.strftime("%Y-%m")
