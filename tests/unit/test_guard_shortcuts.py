"""The guard's shortcuts for speed change no verdict: each is checked against the long way
on every message of the corpus, and on generated text.

- normalisation maps Latin-1 text with one byte table instead of NFKD (``guard._text``);
- a lexicon pattern runs in its faster form when it has one (``guard._spaced``);
- a lexicon pattern runs only on messages holding a word it cannot match without, read
  from its parse tree (``guard._needs``), besides one of its keys;
- the fallback model is skipped when the signals a message may have could not make it
  give a kind (``Score.possible``, ``guard._model.may_call``)."""

from __future__ import annotations

import json
import random
import re
import unicodedata
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard import _frustration, _human, _text
from guard._features import model_input, model_may_call
from guard._frustration import Message
from guard._lexicon import Pattern, Rules, _needed, tokens_of
from guard._model import model_kind
from guard._needs import needs
from guard._signals import FRUSTRATION
from guard._spaced import spaced

CORPUS = Path(__file__).resolve().parents[1] / "data" / "guard_corpus.jsonl"

PATTERNS: list[Pattern] = [
    pattern
    for rules in vars(_frustration).values()
    if isinstance(rules, Rules)
    for pattern in rules.patterns
] + [*_human.RULES, *_human.NOT_REQUESTS]


@cache
def _corpus_texts() -> tuple[str, ...]:
    with CORPUS.open(encoding="utf-8") as lines:
        texts = [text for line in lines for text in json.loads(line)["messages"]]
    return tuple(dict.fromkeys(texts))


def _nfkd_ascii(text: str) -> bytes:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore")


def test_the_latin1_table_is_what_nfkd_makes_of_every_character() -> None:
    for code in range(0x80, 0x100):
        char = chr(code)
        mapped = char.encode("latin-1").translate(_text._LATIN_TO_ASCII, _text._LATIN_DROPPED)
        if mapped.isascii():
            assert mapped == _nfkd_ascii(char), char
        else:  # left for NFKD: the fractions
            assert len(_nfkd_ascii(char)) > 1, char


@given(st.text(alphabet=st.characters(max_codepoint=0x2FF), max_size=40))
def test_normalisation_of_any_latin_text_is_what_nfkd_would_make(text: str) -> None:
    lowered = text.lower()
    assert " ".join(_text.normalized_words(text)) == _text.normalize(text)
    if lowered.isascii() or not all(ord(c) < 0x100 for c in lowered):
        return
    # what the words would be had NFKD done it
    words = _nfkd_ascii(lowered).decode("ascii")
    assert _text.normalize(text) == _text.normalize(words)


def test_most_patterns_have_a_faster_form() -> None:
    assert sum(p.spaced is not None for p in PATTERNS) > 0.8 * len(PATTERNS)


@pytest.mark.parametrize(
    "source",
    [
        " x",  # starts with a space
        "(?<!^x)fala",  # an anchor a lookbehind sees
        "a\\Bb",
        "(?<= )foo",  # a lookbehind that could see the added space
        "(?<! e)bar",
        "foo(?: \\w+)? ",  # ends with a space
        "(?:a|b)?c?",  # may match nothing
        "[^a]b",
        ".b",
    ],
)
def test_spaced_refuses_what_it_cannot_prove(source: str) -> None:
    assert spaced(source) is None


def test_spaced_takes_word_bounded_patterns() -> None:
    found = spaced("(?<!nao )(?:voce|tu) (?:e|es) (?:burr[oa]|lent[oa])s?(?= demais|$)")
    assert found is not None
    assert found.search(" tu e burra demais") is not None
    assert found.search(" nao tu e burra") is None
    # the text's start is just after the added space
    at_start = spaced("(?:^|voce )fala")
    assert at_start is not None
    assert [at_start.search(f" {t}") is not None for t in ("fala", "voce fala", "ele fala")] == [
        True,
        True,
        False,
    ]


def _variants(text: str, rng: random.Random) -> list[str]:
    """The text, and the text with a word taken out (a double space, as ``NEUTRALISE``
    leaves)."""
    words = text.split(" ")
    if len(words) < 3:
        return [text]
    words[rng.randrange(len(words))] = ""
    return [text, " ".join(words)]


def _same(pattern: Pattern, text: str) -> None:
    assert pattern.spaced is not None
    assert (pattern.spaced.search(f" {text}") is None) == (pattern.regex.search(text) is None), (
        pattern.regex.pattern[:80],
        text,
    )
    assert pattern.spaced.sub("   ", f" {text}")[1:] == pattern.regex.sub("  ", text), (
        pattern.regex.pattern[:80],
        text,
    )


def test_faster_forms_find_and_replace_what_the_patterns_do_on_the_corpus() -> None:
    rng = random.Random(7)
    texts = [variant for raw in _corpus_texts() for variant in _variants(_text.normalize(raw), rng)]
    tokens = [tokens_of(text.split(), text) for text in texts]
    checked = 0
    for pattern in PATTERNS:
        if pattern.spaced is None:
            continue
        for text, words in zip(texts, tokens, strict=True):
            if not pattern.keys or not pattern.keys.isdisjoint(words):  # where it runs
                _same(pattern, text)
                checked += 1
    assert checked > 100_000


@given(
    st.lists(st.sampled_from(sorted({w for p in PATTERNS for w in p.keys})), max_size=8),
    st.lists(st.sampled_from(["o", "a", "voce", "nao", "de", "mel", "e", ""]), max_size=8),
)
def test_faster_forms_agree_on_generated_text(keys: list[str], fillers: list[str]) -> None:
    words = [w for pair in zip(keys, fillers, strict=False) for w in pair] + keys[len(fillers) :]
    text = re.sub(r"^ +| +$", "", " ".join(words))
    for pattern in PATTERNS:
        if pattern.spaced is not None:
            _same(pattern, text)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("(?:quero|preciso) falar com (?:um |uma )?atendente", [{"quero", "preciso"}]),
        # an optional word is no word a match needs; a repeat ending in a space starts one
        ("(?:tu|voce) (?:e|es) (?:muito )?burr[oa]s?", [{"tu", "voce"}]),
        ("^(?:\\w+ )?errad[oa]", [{"errado", "errada"}]),
        ("(?:disse|diz)(?: que)? (?:\\w+ ){0,2}?(?:ligar|procurar)", [{"disse", "diz"}]),
        ("(?:falar|conversar)(?: \\w+){0,4}", [{"falar", "conversar"}]),
        # the word of each string: one not common, then the one most strings share
        ("(?:que |a )?vergonha", [{"vergonha"}]),
        # two alternatives: each its own
        ("ja te disse|nunca mais", [{"ja"}, {"nunca"}]),
        # lookarounds match nothing here (they only take matches away)
        ("(?<!nao )gostei(?= muito)", [{"gostei"}]),
    ],
)
def test_needs_reads_the_words_a_match_holds(source: str, expected: list[set[str]]) -> None:
    common = ("que", "a", "te", "ja", "e", "muito")
    found = needs(source, common)
    assert len(found) == len(expected)
    for sets, words in zip(found, expected, strict=True):
        assert frozenset(words) in sets, (source, sets)


@pytest.mark.parametrize(
    "source",
    [
        "(?:burro|\\w+)",  # an alternative that can be any word
        "bur+o",  # too many strings
        "(?:burro)?",  # may match nothing
        "burr\\w*",  # a word that goes on
        "burr[^x]o",  # a negated class
        # a repeat that ends (starts) with a space bounds a word only after (before) an edge
        "burr(?:\\w+ )?o",
        "(?:falar|conversar)(?: \\w+)?x",
    ],
)
def test_needs_finds_no_word_where_any_would_do(source: str) -> None:
    assert not all(needs(source)), (source, needs(source))


def test_most_patterns_run_only_with_words_they_need() -> None:
    assert sum(bool(_needed(p.regex, p.keys)) for p in PATTERNS) > 0.8 * len(PATTERNS)


def test_every_match_on_the_corpus_holds_a_word_its_pattern_needs() -> None:
    """... and one of its ``requires``, unless lexicon.toml gave them as ``only_with``."""
    rng = random.Random(11)
    texts = [variant for raw in _corpus_texts() for variant in _variants(_text.normalize(raw), rng)]
    holding: dict[str, set[int]] = {}  # word → the texts that hold it
    for index, text in enumerate(texts):
        for word in set(text.split()):
            holding.setdefault(word, set()).add(index)
    checked = 0
    for pattern in PATTERNS:
        # the words read from the pattern, and the hand-written ones said to be needed too
        for needed in (
            _needed(pattern.regex, pattern.keys),
            pattern.requires if pattern.necessary else frozenset(),
        ):
            if not needed:
                continue
            # where the pattern would run but for those words: a key and none of them
            runs = set().union(*(holding.get(key, ()) for key in pattern.keys))
            skipped = runs.difference(*(holding.get(word, ()) for word in needed))
            for index in skipped:
                assert pattern.regex.search(texts[index]) is None, (
                    pattern.regex.pattern[:80],
                    texts[index],
                )
            checked += len(skipped)
    assert checked > 100_000


def test_possible_signals_cover_every_signal_the_score_finds_in_the_corpus() -> None:
    for raw in _corpus_texts():
        message = Message(raw, _text.normalized_words(raw))
        found = set(message.scored()[1])
        assert found <= FRUSTRATION.possible(message.kept(), raw), raw


def test_the_model_is_skipped_only_where_it_could_not_give_a_kind() -> None:
    skipped = 0
    for raw in _corpus_texts():
        words = _text.normalized_words(raw)
        message = Message(raw, words)
        if not model_may_call(raw, words, message.kept()):
            skipped += 1
            assert model_kind(model_input(raw, words, message)[0]) is None, raw
    assert skipped > 1000  # the shortcut is taken
