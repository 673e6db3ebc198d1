"""split_message: natural boundaries, never over the limit, nothing but whitespace lost."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels import split_message, text_length


def non_space(text: str) -> str:
    return "".join(text.split())


def test_short_text_is_one_part() -> None:
    assert split_message("Oi, tudo bem?", 1600) == ["Oi, tudo bem?"]


def test_blank_text_has_no_parts() -> None:
    assert split_message(" \n\t ", 10) == []


def test_exact_limit_is_not_split() -> None:
    assert split_message("a" * 1600, 1600) == ["a" * 1600]


def test_prefers_paragraphs() -> None:
    first = "Primeiro parágrafo. " * 50
    second = "Segundo parágrafo. " * 50
    parts = split_message(f"{first.strip()}\n\n{second.strip()}", 1600)
    assert parts == [first.strip(), second.strip()]


def test_then_sentences() -> None:
    sentence = "Essa é uma frase de exemplo sobre o orçamento do casal. "
    parts = split_message(sentence * 40, 1000)
    assert len(parts) == 3
    assert all(part.endswith(".") for part in parts)
    assert all(text_length(part) <= 1000 for part in parts)


def test_sentence_ending_with_a_quote() -> None:
    text = 'Ela disse "chega de gastos." ' * 10
    parts = split_message(text, 100)
    assert all(part.endswith('."') for part in parts)
    assert non_space("".join(parts)) == non_space(text)


def test_then_words() -> None:
    parts = split_message("palavra " * 300, 100)
    assert all(text_length(part) <= 100 for part in parts)
    assert all(not part.startswith("alavra") for part in parts)
    assert non_space("".join(parts)) == "palavra" * 300


def test_a_word_longer_than_the_limit_is_cut() -> None:
    url = "https://example.com/" + "x" * 300
    parts = split_message(f"veja {url} ok", 100)
    assert all(text_length(part) <= 100 for part in parts)
    assert non_space("".join(parts)) == non_space(f"veja {url} ok")


def test_two_thousand_chars_at_1600_give_two_parts() -> None:
    text = ("Você gastou R$ 120,00 em mercado este mês. " * 50)[:2000]
    parts = split_message(text, 1600)
    assert len(parts) == 2
    assert all(text_length(part) <= 1600 for part in parts)


def test_emoji_outside_the_bmp_count_two() -> None:
    parts = split_message("💸" * 10, 5)
    assert parts == ["💸💸", "💸💸", "💸💸", "💸💸", "💸💸"]


def test_limit_too_small() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        split_message("abc", 1)


_alphabet = st.sampled_from(
    [
        *"abcdefghij .,!?…\"'()\n\t",
        *("ção", "😀", "👍🏽", "\u00a0", "\u2028", " \n\n "),
        *("fim. ", 'disse." ', "(sim!) ", "palavra "),
    ]
)


@settings(max_examples=400, deadline=None)
@given(text=st.lists(_alphabet, max_size=400).map("".join), limit=st.integers(2, 80))
def test_properties(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    for part in parts:
        assert part, "no empty part"
        assert part == part.strip(), "no whitespace around a part"
        assert text_length(part) <= limit, "never over the limit"
    assert non_space("".join(parts)) == non_space(text), "no visible character lost"
    if text.strip() and text_length(text.strip()) <= limit:
        assert parts == [text.strip()]


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300), limit=st.integers(2, 50))
def test_properties_on_any_unicode(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    assert all(part and text_length(part) <= limit for part in parts)
    assert non_space("".join(parts)) == non_space(text)
