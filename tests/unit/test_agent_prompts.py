"""mel's system prompt and canonical replies."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.dates import SAO_PAULO, month_of, parse_month
from agent.prompts import (
    ASSISTANT_UNAVAILABLE,
    LLM_FAILURE_REPLY,
    TOOL_LOOP_APOLOGY,
    build_system_prompt,
)


def test_the_prompt_carries_todays_date_in_sao_paulo() -> None:
    prompt = build_system_prompt(datetime(2026, 6, 2, 9, 30, tzinfo=SAO_PAULO))

    assert "Hoje é terça-feira, 2 de junho de 2026" in prompt
    assert "O mês atual é 2026-06" in prompt


def test_late_night_utc_is_still_yesterday_in_sao_paulo() -> None:
    utc = datetime(2026, 7, 1, 2, 0, tzinfo=UTC)  # 23:00 on June 30th in São Paulo

    assert "30 de junho de 2026" in build_system_prompt(utc)
    assert month_of(utc) == "2026-06"


def test_the_prompt_gives_mels_voice_and_forbids_invented_numbers() -> None:
    prompt = build_system_prompt(datetime(2026, 6, 2, tzinfo=SAO_PAULO), name="mel")

    assert prompt.startswith("Você é a mel, assistente virtual")
    assert "Nunca finja ser humano" in prompt
    assert "empatia e palavras simples" in prompt
    assert "próximo passo" in prompt
    assert "precisa ter vindo de uma\n  ferramenta" in prompt
    assert "Nunca invente" in prompt


def test_the_canonical_replies_are_pt_br_and_offer_a_next_step() -> None:
    assert TOOL_LOOP_APOLOGY == (
        "Desculpa, me enrolei aqui tentando buscar isso e não consegui terminar. Pode tentar "
        "de novo com outras palavras? Se preferir, posso te mostrar o resumo do mês."
    )
    # no model configured is permanent: said plainly, with what works, no greeting and no
    # "try again later"
    assert not ASSISTANT_UNAVAILABLE.startswith("Oi")
    assert "de novo" not in ASSISTANT_UNAVAILABLE
    assert "não tenho um modelo de linguagem configurado" in ASSISTANT_UNAVAILABLE
    assert "falar com uma pessoa" in ASSISTANT_UNAVAILABLE
    assert "problema técnico" in LLM_FAILURE_REPLY
    assert "mandar de novo" in LLM_FAILURE_REPLY


def test_months_are_validated() -> None:
    assert parse_month(" 2026-06 ") == "2026-06"


@pytest.mark.parametrize("bad", ["2026-13", "2026-00", "26-06", "2026/06", "junho"])
def test_bad_months_are_explained(bad: str) -> None:
    with pytest.raises(ValueError, match="AAAA-MM"):
        parse_month(bad)
