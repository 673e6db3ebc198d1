"""The analysis prompt: every event with its citable id, the cause as a fact, the rules,
the earlier hypotheses that still stand — and no phone number in clear."""

from __future__ import annotations

from typing import Any

import pytest

from agent.psychologist import (
    DEFAULT_AGENTS,
    EMIT_HYPOTHESES,
    SESSION_CLOSED,
    SESSION_CLOSED_ABNORMALLY,
    build_messages,
    classify_termination,
    mask_phone_numbers,
    render_event,
    render_log,
)

THREAD = "twilio:+14155238886:+5511999990000"


def event(event_id: str, event_type: str, **data: Any) -> dict[str, Any]:
    return {
        "id": event_id,
        "type": event_type,
        "at": "2026-06-03T12:00:00Z",
        "thread_id": THREAD,
        "session_id": "s-1",
        "data": data,
    }


EVENTS = [
    event("1700000000000-0", "session.started", channel="twilio"),
    event(
        "1700000000001-0",
        "message.received",
        text="qual o total do mês? me liga no (11) 98888-7777",
        kind="text",
        profile_name="Ana Souza",
        location={"latitude": -23.5, "longitude": -46.6, "address": "Rua X, 10"},
        media=[{"kind": "image", "mime_type": "image/jpeg", "url": "https://x/y.jpg"}],
    ),
    event("1700000000002-0", "router.routed", agent="budget_agent", intent="month_total"),
    event(
        "1700000000003-0",
        "agent.replied",
        text="Vocês gastaram R$ 1.234,56 em junho.",
        outcome="agent",
        tool_calls=[
            {"name": "budgetTotal", "arguments": {"month": "2026-06"}, "error": None},
            {"name": "setBudget", "arguments": {"amount": "x"}, "error": "valor inválido"},
        ],
        usage={"prompt_tokens": 900, "completion_tokens": 40, "cost_micro_usd": 12345678},
    ),
    event("1700000000004-0", "guard.preempted", kind="frustrated"),
    event("1700000000005-0", "session.closed", reason="worker_lost"),
]


def messages(**kwargs: Any) -> tuple[str, str]:
    kwargs.setdefault("termination", classify_termination("user_ended", SESSION_CLOSED))
    built = build_messages(
        session_id="s-1",
        thread_id=THREAD,
        events=EVENTS,
        rules="# Regras\n- Nunca invente números.",
        **kwargs,
    )
    assert [m.role for m in built] == ["system", "user"]
    return built[0].content, built[1].content


@pytest.mark.parametrize(
    ("raw", "masked"),
    [
        ("+5511999990000", "+55*********00"),
        ("twilio:+14155238886:+5511999990000", "twilio:+14*******86:+55*********00"),
        ("liga 11 99999-0000", "liga 11*******00"),
        ("meu cel 99999-0000!", "meu cel 99*****00!"),
        ("5511999990000@s.whatsapp.net", "55*********00@s.whatsapp.net"),
    ],
)
def test_phone_numbers_are_masked_in_the_middle(raw: str, masked: str) -> None:
    assert mask_phone_numbers(raw) == masked


@pytest.mark.parametrize(
    "text",
    [
        "2026-06-03T12:00:00Z",
        "2026-06-03 12:00",
        "1700000000001-0",
        "R$ 1.234.567,89",
        "R$ 45,90",
        "mês 2026-06",
        "SM1234567890abcdef",
        "wamid.HBgNNTUxMTk5OTk5MDAwMBUCABEYEjQ1",
    ],
)
def test_dates_ids_and_amounts_are_not_mistaken_for_numbers(text: str) -> None:
    assert mask_phone_numbers(text) == text


def test_each_event_is_headed_by_its_id_type_and_time() -> None:
    log = render_log(EVENTS)

    for item in EVENTS:
        assert f"[{item['id']}] 2026-06-03T12:00:00Z {item['type']}" in log


def test_the_couple_and_mel_speak_with_their_texts_and_tools() -> None:
    received = render_event(EVENTS[1])
    replied = render_event(EVENTS[3])

    assert 'casal: "qual o total do mês? me liga no 11*******77"' in received
    assert 'mel: "Vocês gastaram R$ 1.234,56 em junho."' in replied
    assert 'ferramenta: budgetTotal({"month": "2026-06"}) → ok' in replied
    assert "ferramenta: setBudget" in replied
    assert "→ erro: valor inválido" in replied
    assert '"cost_micro_usd": 12345678' in replied  # numbers are never masked
    assert '"agent": "budget_agent"' in render_event(EVENTS[2])
    assert '"kind": "frustrated"' in render_event(EVENTS[4])


def test_personal_data_stays_out_of_the_log() -> None:
    system, user = messages()

    for secret in ("98888", "99999", "Ana Souza", "Rua X", "-23.5", "https://x/y.jpg"):
        assert secret not in user
        assert secret not in system
    assert "[localização omitida]" in user
    assert '"mime_type": "image/jpeg"' in user
    assert "+55*********00" in user  # the thread id, masked


def test_the_termination_is_given_as_a_fact() -> None:
    termination = classify_termination("error: boom", SESSION_CLOSED_ABNORMALLY)

    _, user = messages(termination=termination)

    assert "FATO" in user
    assert "causa: processing_error (ANORMAL)" in user
    assert "boom" in user
    assert "Ao menos uma hipótese precisa de termination_analysis" in user

    _, normal = messages()
    assert "causa: user_ended (normal)" in normal
    assert "termination_analysis é opcional" in normal


def test_rules_agents_and_the_tool_are_in_the_system_message() -> None:
    system, _ = messages()

    assert "- Nunca invente números." in system
    assert EMIT_HYPOTHESES in system
    for agent in DEFAULT_AGENTS:
        assert f"- {agent.name}: " in system


def test_previous_hypotheses_are_listed_unless_dismissed() -> None:
    previous = [
        {
            "status": "accepted",
            "target_agent": "savings_agent",
            "title": "Meta sem prazo",
            "description": "A mel criou a meta sem perguntar o prazo.",
            "confidence": 70,
            "session_id": "s-0",
            "evidence_event_ids": ["1600000000000-0"],
        },
        {
            "status": "dismissed",
            "target_agent": "guard",
            "title": "Falso positivo descartado",
            "description": "x",
            "confidence": 30,
        },
        {"target_agent": "router", "title": "Roteou errado", "description": "y", "confidence": 55},
    ]

    _, user = messages(previous_hypotheses=previous)

    assert "Meta sem prazo" in user
    assert "status accepted, alvo savings_agent, confiança 70, sessão s-0" in user
    assert "Roteou errado" in user
    assert "Falso positivo descartado" not in user
    assert "1600000000000-0" not in user  # other sessions' ids are not offered as evidence

    _, none = messages()
    assert "(nenhuma)" in none


def test_an_empty_log_says_so() -> None:
    assert render_log([]) == "(nenhum evento registrado)"


def test_a_long_text_is_clipped() -> None:
    rendered = render_event(event("1-0", "message.received", text="a" * 5000))

    assert len(rendered) < 2000
    assert "…" in rendered
