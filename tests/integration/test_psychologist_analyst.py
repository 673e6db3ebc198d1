"""Psychologist.analyze end to end: the real openai client against the fake
chat-completions server on loopback, scripted to misbehave and correct itself.

What the model was told is observed on the wire: ``fake_llm.calls`` and
``fake_llm.tool_messages(call)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from agent.llm import OpenAICompatibleLLM, Usage
from agent.profiles import LLMProfiles
from agent.psychologist import (
    EMIT_HYPOTHESES,
    FORCE_EMIT_HYPOTHESES,
    HEAVY,
    NUDGE,
    SESSION_CLOSED,
    SESSION_CLOSED_ABNORMALLY,
    TRUNCATED_NOTE,
    AnalysisContext,
    AnalysisOutcome,
    Psychologist,
    classify_termination,
    load_rules,
    validate_batch,
)
from tests.fakes.llm import FakeLLM, error, text, tool_call, tool_calls
from tests.integration.conftest import profiles_with

THREAD = "twilio:+14155238886:+5511999990000"
LIGHT_MODEL = "fake-psychologist-light"
HEAVY_MODEL = "fake-psychologist-heavy"
OTHER_SESSION_ID = "1600000000000-0"


def profiles() -> LLMProfiles:
    """Light and heavy on different models and prices (USD per million tokens)."""
    return profiles_with(
        psychologist_light={
            "model": LIGHT_MODEL,
            "price_input_per_mtok": Decimal("1"),
            "price_output_per_mtok": Decimal("2"),
        },
        psychologist={
            "model": HEAVY_MODEL,
            "price_input_per_mtok": Decimal("10"),
            "price_output_per_mtok": Decimal("40"),
        },
    )


@pytest.fixture
def psychologist(fake_llm: FakeLLM, make_llm: Callable[..., OpenAICompatibleLLM]) -> Psychologist:
    return Psychologist(make_llm(base_url=fake_llm.base_url, profiles=profiles()))


def session_events(
    count: int, *, session_id: str = "s-1", base: int = 1_700_000_000_000
) -> list[dict[str, Any]]:
    kinds = ["message.received", "agent.replied"]
    events = []
    for index in range(count):
        kind = kinds[index % 2]
        said = "qual o total do mês?" if index % 2 == 0 else "Vocês gastaram R$ 10,00."
        events.append(
            {
                "id": f"{base + index}-0",
                "type": kind,
                "at": "2026-06-03T12:00:00Z",
                "thread_id": THREAD,
                "session_id": session_id,
                "data": {"text": said},
            }
        )
    return events


def context(
    events: list[dict[str, Any]],
    *,
    reason: str | None = "user_ended",
    event_type: str = SESSION_CLOSED,
    **kwargs: Any,
) -> AnalysisContext:
    kwargs.setdefault("known_event_ids", {e["id"] for e in events} | {OTHER_SESSION_ID})
    return AnalysisContext(
        session_id="s-1",
        thread_id=THREAD,
        events=events,
        rules=load_rules(),
        termination=classify_termination(reason, event_type),
        **kwargs,
    )


def hypothesis(evidence: list[str], **changes: Any) -> dict[str, Any]:
    return {
        "target_agent": "budget_agent",
        "title": "Total citado sem ferramenta",
        "description": "A mel respondeu um total sem chamar budgetTotal.",
        "confidence": 75,
        "evidence_event_ids": evidence,
        **changes,
    }


def batch(*items: dict[str, Any]) -> dict[str, Any]:
    return {"hypotheses": list(items)}


def assert_failed(outcome: AnalysisOutcome, failure: str) -> None:
    assert not outcome.ok
    assert outcome.failure == failure
    assert outcome.hypotheses == []


async def test_a_rejected_batch_reaches_the_model_verbatim_and_the_correction_is_accepted(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    events = session_events(6)
    ids = [e["id"] for e in events]
    bad = batch(
        hypothesis([ids[1], "9999999999999-0"]),
        hypothesis([OTHER_SESSION_ID], target_agent="router", confidence=72.5),
    )
    good = batch(hypothesis([ids[1], ids[3]]), hypothesis([ids[4]], target_agent="router"))
    fake_llm.script(
        tool_call(EMIT_HYPOTHESES, bad, id="call_bad"), tool_call(EMIT_HYPOTHESES, good)
    )

    outcome = await psychologist.analyze(context(events))

    assert outcome.ok
    assert outcome.failure is None
    assert [h.model_dump() for h in outcome.hypotheses] == [
        {**hypothesis([ids[1], ids[3]]), "termination_analysis": None},
        {**hypothesis([ids[4]], target_agent="router"), "termination_analysis": None},
    ]
    assert (outcome.iterations, outcome.rejected_batches, fake_llm.call_count) == (2, 1, 2)
    # what the model read as the tool result is exactly the validation text
    expected = validate_batch(
        json.dumps(bad),
        session_event_ids=set(ids),
        known_event_ids=set(ids) | {OTHER_SESSION_ID},
        abnormal=False,
    ).error
    assert fake_llm.tool_messages(1) == [
        {"role": "tool", "tool_call_id": "call_bad", "content": expected}
    ]
    assert outcome.errors == [expected]
    for problem in (
        "hypotheses[0].evidence_event_ids[1]: o evento '9999999999999-0' não existe",
        f"hypotheses[1].evidence_event_ids[0]: o evento '{OTHER_SESSION_ID}' pertence a outra",
        "hypotheses[1].confidence: deve ser um número inteiro",
    ):
        assert problem in expected
    assistant = fake_llm.calls[1]["messages"][-2]
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"][0]["id"] == "call_bad"


async def test_every_call_forces_the_mandatory_tool(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    events = session_events(4)
    fake_llm.script(tool_call(EMIT_HYPOTHESES, batch(hypothesis([events[0]["id"]]))))

    await psychologist.analyze(context(events))

    body = fake_llm.last_call
    assert body["tool_choice"] == FORCE_EMIT_HYPOTHESES
    assert [tool["function"]["name"] for tool in body["tools"]] == [EMIT_HYPOTHESES]
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "Regras de negócio" in system
    assert all(f"[{e['id']}]" in user for e in events)
    assert "+5511999990000" not in system + user


async def test_an_abnormal_close_is_corrected_until_a_termination_analysis_comes(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    events = session_events(4)
    first = events[1]["id"]
    fake_llm.script(
        tool_call(EMIT_HYPOTHESES, batch(hypothesis([first]))),
        tool_call(
            EMIT_HYPOTHESES,
            batch(hypothesis([first], termination_analysis="O casal ficou sem resposta.")),
        ),
    )

    outcome = await psychologist.analyze(
        context(events, reason="worker_lost: w-2", event_type=SESSION_CLOSED_ABNORMALLY)
    )

    assert outcome.ok
    assert outcome.hypotheses[0].termination_analysis == "O casal ficou sem resposta."
    rejection = fake_llm.tool_messages(1)[0]["content"]
    assert "terminou de forma anormal (worker_lost)" in rejection
    assert "causa: worker_lost (ANORMAL)" in fake_llm.calls[0]["messages"][1]["content"]


async def test_exceeding_the_budget_ends_the_run(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    events = session_events(4)  # light: 50 000 micro-USD; input at 1 USD/Mtok
    fake_llm.script(
        tool_call(
            EMIT_HYPOTHESES,
            batch(hypothesis(["nope"])),
            prompt_tokens=60_000,
            completion_tokens=10,
        ),
        tool_call(EMIT_HYPOTHESES, batch(hypothesis([events[0]["id"]]))),
    )

    outcome = await psychologist.analyze(context(events))

    assert_failed(outcome, "budget_exceeded")
    assert fake_llm.call_count == 1  # the corrected batch was never asked for
    assert outcome.usage.cost_micro_usd == 60_000 + 20
    assert outcome.usage.cost_micro_usd > outcome.budget_micro_usd == 50_000
    assert (outcome.iterations, outcome.rejected_batches) == (1, 1)


async def test_the_iteration_bound_ends_the_run(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    events = session_events(4)
    bad = tool_call(EMIT_HYPOTHESES, batch(hypothesis([])), prompt_tokens=100, completion_tokens=10)
    fake_llm.script([bad] * 6)

    outcome = await psychologist.analyze(context(events))

    assert_failed(outcome, "max_iterations")
    assert fake_llm.call_count == 4 == outcome.max_iterations
    assert (outcome.iterations, outcome.rejected_batches, len(outcome.errors)) == (4, 4, 4)
    assert outcome.usage == Usage(400, 40, 4 * (100 + 20), 4)
    assert fake_llm.pending == 2


async def test_light_and_heavy_use_different_models_and_cost_differently(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    light_events, heavy_events = session_events(19), session_events(20)
    for events in (light_events, heavy_events):
        fake_llm.script(
            tool_call(
                EMIT_HYPOTHESES,
                batch(hypothesis([events[0]["id"]])),
                prompt_tokens=1_000,
                completion_tokens=200,
            )
        )

    light = await psychologist.analyze(context(light_events))
    heavy = await psychologist.analyze(context(heavy_events))

    assert [call["model"] for call in fake_llm.calls] == [LIGHT_MODEL, HEAVY_MODEL]
    assert (light.tier, light.profile, light.model) == ("light", "psychologist_light", LIGHT_MODEL)
    assert (heavy.tier, heavy.profile, heavy.model) == ("heavy", "psychologist", HEAVY_MODEL)
    assert light.usage.cost_micro_usd == 1_000 * 1 + 200 * 2
    assert heavy.usage.cost_micro_usd == 1_000 * 10 + 200 * 40
    assert light.metering() == {
        "tier": "light",
        "profile": "psychologist_light",
        "model": LIGHT_MODEL,
        "iterations": 1,
        "llm_calls": 1,
        "prompt_tokens": 1_000,
        "completion_tokens": 200,
        "cost_micro_usd": 1_400,
        "budget_micro_usd": 50_000,
        "max_iterations": 4,
        "rejected_batches": 0,
    }
    assert heavy.metering()["budget_micro_usd"] == 300_000


async def test_an_explicit_tier_overrides_triage(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    events = session_events(3)
    fake_llm.script(tool_call(EMIT_HYPOTHESES, batch(hypothesis([events[0]["id"]]))))

    outcome = await psychologist.analyze(context(events, tier=HEAVY))

    assert (outcome.tier, outcome.model) == ("heavy", HEAVY_MODEL)


async def test_a_reply_without_the_tool_call_is_nudged(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    events = session_events(4)
    fake_llm.script(
        text("Acho que a sessão foi bem."),
        tool_call(EMIT_HYPOTHESES, batch(hypothesis([events[2]["id"]]))),
    )

    outcome = await psychologist.analyze(context(events))

    assert outcome.ok
    assert (outcome.iterations, outcome.rejected_batches, outcome.errors) == (2, 0, [NUDGE])
    second = fake_llm.calls[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": "Acho que a sessão foi bem."}
    assert second[-1] == {"role": "user", "content": NUDGE}
    assert EMIT_HYPOTHESES in NUDGE


async def test_another_tool_is_answered_and_the_valid_call_of_a_reply_wins(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    events = session_events(4)
    fake_llm.script(
        tool_call("read_more_logs", {"after": "0-0"}, id="call_x"),
        tool_calls(
            (EMIT_HYPOTHESES, batch(hypothesis(["nope"]))),
            (EMIT_HYPOTHESES, batch(hypothesis([events[1]["id"]]))),
        ),
    )

    outcome = await psychologist.analyze(context(events))

    assert outcome.ok
    assert outcome.hypotheses[0].evidence_event_ids == [events[1]["id"]]
    reply = fake_llm.tool_messages(1)
    assert reply[0]["tool_call_id"] == "call_x"
    assert "ferramenta desconhecida 'read_more_logs'" in reply[0]["content"]
    assert outcome.rejected_batches == 1


async def test_an_llm_failure_is_an_outcome_not_an_exception(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    events = session_events(4)
    fake_llm.script(error(500))

    outcome = await psychologist.analyze(context(events))

    assert_failed(outcome, "llm_error: HTTP 500")
    assert (outcome.iterations, outcome.usage.calls, outcome.model) == (1, 0, "")


async def test_a_failure_after_a_rejection_keeps_the_cost_so_far(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    events = session_events(4)
    fake_llm.script(
        tool_call(EMIT_HYPOTHESES, batch(hypothesis([])), prompt_tokens=500, completion_tokens=50),
        error(503),
    )

    outcome = await psychologist.analyze(context(events))

    assert_failed(outcome, "llm_error: HTTP 503")
    assert (outcome.iterations, outcome.rejected_batches, outcome.model) == (2, 1, LIGHT_MODEL)
    assert outcome.usage.cost_micro_usd == 500 + 100


@pytest.mark.parametrize(
    ("reason", "event_type"),
    [
        ("user_ended", SESSION_CLOSED),
        ("support_closed", SESSION_CLOSED),
        ("error: RuntimeError: boom", SESSION_CLOSED_ABNORMALLY),
    ],
)
async def test_each_way_of_closing_yields_evidence_from_that_very_session(
    psychologist: Psychologist, fake_llm: FakeLLM, reason: str, event_type: str
) -> None:
    events = session_events(5, base=1_800_000_000_000)
    ids = [e["id"] for e in events]
    fake_llm.script(
        tool_call(
            EMIT_HYPOTHESES,
            batch(hypothesis([ids[0], ids[-1]], termination_analysis="Consequência do fim.")),
        )
    )

    outcome = await psychologist.analyze(context(events, reason=reason, event_type=event_type))

    assert outcome.ok
    cited = {i for h in outcome.hypotheses for i in h.evidence_event_ids}
    assert cited <= set(ids)


async def test_a_reply_cut_by_the_output_limit_is_told_so(
    psychologist: Psychologist, fake_llm: FakeLLM
) -> None:
    events = session_events(4)
    cut = '{"hypotheses": [{"target_agent": "budget_agent", "title": "Total sem'
    fake_llm.script(
        tool_call(EMIT_HYPOTHESES, cut, finish_reason="length"),
        tool_call(EMIT_HYPOTHESES, batch(hypothesis([events[0]["id"]]))),
    )

    outcome = await psychologist.analyze(context(events))

    assert outcome.ok
    sent = fake_llm.tool_messages(1)[0]["content"]
    assert sent.startswith("Lote rejeitado")
    assert "não são um JSON válido" in sent
    assert sent.endswith(TRUNCATED_NOTE)
