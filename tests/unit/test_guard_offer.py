"""``accepts_human_offer``: a short yes to the loop reply's offer of a person."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard import GUARD_RESPONSE_LOOP, accepts_human_offer


def test_the_offer_it_answers_is_the_loop_reply() -> None:
    assert GUARD_RESPONSE_LOOP.endswith(
        "Quer reformular ou esperar um humano entrar pra te ajudar mais tarde?"
    )


@pytest.mark.parametrize(
    "text",
    [
        "sim",
        "s",
        "Sim!",
        "SIM",
        "siiim",
        "ss",
        "pode ser",
        "prefiro esperar",
        "quero esperar",
        "vou esperar",
        "pode chamar",
        "pode chamar?",
        "chama",
        "claro",
        "claro que sim",
        "quero sim",
        "quero",
        "por favor",
        "sim por favor 🙏",
        "esperar",
        "ok pode",
        "bora",
        "humano",
        "prefiro o humano",
        "com certeza",
        "pode sim, obrigada",
        "👍",
        "👍🏻",
        "ok 👍",
        # typos: one letter added, dropped, changed or two swapped
        "simm",
        "claor",
        "esperra",
        "pdoe ser",
        "chma",
    ],
)
def test_short_yes(text: str) -> None:
    assert accepts_human_offer(text)


@pytest.mark.parametrize(
    "text",
    [
        "não",
        "nao",
        "n",
        "não precisa",
        "vou reformular",
        "quero reformular",
        "prefiro reformular",
        "deixa",
        "esquece",
        "talvez",
        "não, pode chamar",  # a no in it: not taken as a yes
        "ok",  # acknowledges, does not choose
        "tá bom",
        "obrigado",
        # a rephrased question, even after a yes
        "quanto gastei no mercado?",
        "sim, mas quanto gastei no mercado?",
        "qual o saldo da conjunta",
        # off-topic, empty, long
        "kkkkk",
        "",
        "   ",
        "😡",
        "👎",
        "sim " * 12,
        "pode ser que sim mas antes quero ver a fatura do cartão e o saldo",
        "a" * 500,
    ],
)
def test_not_a_yes(text: str) -> None:
    assert not accepts_human_offer(text)


def test_anything_that_is_not_text_is_not_a_yes() -> None:
    for value in (None, 42, b"sim", ["sim"]):
        assert not accepts_human_offer(value)  # type: ignore[arg-type]


@given(st.text(max_size=200))
def test_never_raises_and_is_deterministic(text: str) -> None:
    first = accepts_human_offer(text)
    assert isinstance(first, bool)
    assert accepts_human_offer(text) == first


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz ", min_size=121, max_size=400))
def test_long_text_is_never_a_yes(text: str) -> None:
    assert not accepts_human_offer(text)


@given(st.sampled_from(["sim", "pode ser", "pode chamar", "bora", "prefiro esperar"]))
def test_a_yes_with_a_no_word_is_not_a_yes(yes: str) -> None:
    assert accepts_human_offer(yes)
    assert not accepts_human_offer(f"{yes} não")
    assert not accepts_human_offer(f"não, {yes}")
