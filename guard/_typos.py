"""One typo away: the words of lexicon.toml's [typos] recognised with a typo.

``fix_typos`` replaces a word the lexicon does not know by the [typos] word one typo away
(a letter added or dropped, two neighbouring letters swapped, or a letter changed for its
neighbour on the keyboard or in sound), so "esse bot não fucniona" reads "esse bot não
funciona" and "burrp" reads "burro", while "barro" stays "barro". It uses a deletion
index: every [typos] word
and every way of dropping one of its letters point back to it, so a message word needs
only its own letter-dropped forms looked up.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Final

from guard._data import RAW, LexiconError, strings, table
from guard._lexicon import Terms, inflections
from guard._text import normalize

__all__ = ["KNOWN", "MAX_WORDS", "MEL_WORDS", "fix_typos", "one_typo_away"]


def _neighbours() -> frozenset[tuple[str, str]]:
    """Letter pairs one slip of the finger apart on a phone keyboard, or one sound apart
    ([typos] keyboard_rows and sound_pairs): a changed letter must be one of them, so
    "burrp" is "burro" but "barro" stays "barro"."""
    pairs: set[tuple[str, str]] = set()
    rows = strings("typos.keyboard_rows")
    for row in rows:
        for a, b in itertools.pairwise(row):
            pairs.update(((a, b), (b, a)))
    for upper, lower in itertools.pairwise(rows):  # the keys just below, left and right
        for i, a in enumerate(upper):
            for b in lower[max(i - 1, 0) : i + 1]:
                pairs.update(((a, b), (b, a)))
    for pair in strings("typos.sound_pairs"):
        a, b = pair.split()
        pairs.update(((a, b), (b, a)))
    return frozenset(pairs)


_NEIGHBOURS: Final = _neighbours()


def one_typo_away(word: str, known: str) -> bool:
    """Damerau-Levenshtein distance exactly 1, a changed letter being a neighbour of the
    right one on the keyboard or in sound."""
    if word == known or abs(len(word) - len(known)) > 1:
        return False
    if len(word) == len(known):
        diffs = [i for i, (a, b) in enumerate(zip(word, known, strict=True)) if a != b]
        if len(diffs) == 1:
            return (word[diffs[0]], known[diffs[0]]) in _NEIGHBOURS
        return (
            len(diffs) == 2
            and diffs[1] == diffs[0] + 1
            and word[diffs[0]] == known[diffs[1]]
            and word[diffs[1]] == known[diffs[0]]
        )
    short, long = (word, known) if len(word) < len(known) else (known, word)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def _strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def _known() -> frozenset[str]:
    """Every word that appears anywhere in lexicon.toml (terms, keys, patterns), and the
    inflections of the words written with a final ``*`` ("burrão" is not a typo)."""
    words: set[str] = set()
    for text in _strings(RAW):
        words.update(normalize(text).split())
        if text.endswith("*") and " " not in text:
            words.update(inflections(normalize(text[:-1])))
    return frozenset(words)


#: Words the lexicon knows: never "corrected".
KNOWN: Final = _known()
_TARGETS: Final = Terms.at("typos.words").words
MEL_WORDS: Final = Terms.at("typos.mel_words").words


def _max_words() -> int:
    value = table("typos").get("max_words")
    if not isinstance(value, int) or isinstance(value, bool):
        raise LexiconError("lexicon.toml: 'typos.max_words' must be a whole number")
    return value


MAX_WORDS: Final = _max_words()


def _deletions(word: str) -> Iterator[str]:
    for i in range(len(word)):
        yield word[:i] + word[i + 1 :]


def _index() -> dict[str, tuple[str, ...]]:
    index: dict[str, set[str]] = {}
    for target in _TARGETS:
        index.setdefault(target, set()).add(target)
        for deleted in _deletions(target):
            index.setdefault(deleted, set()).add(target)
    return {key: tuple(sorted(found)) for key, found in index.items()}


_INDEX: Final = _index()


def _fix(word: str) -> str:
    for candidate in (word, *_deletions(word)):
        for target in _INDEX.get(candidate, ()):
            if one_typo_away(word, target):
                return target
    return word


def fix_typos(words: list[str]) -> list[str]:
    """``words`` with each unknown word of 4+ letters one typo from a [typos] word fixed."""
    if KNOWN.issuperset(words):  # the common case: every word is one the lexicon knows
        return words
    return [
        _fix(word) if len(word) >= 4 and word not in KNOWN and not word.isdigit() else word
        for word in words
    ]
