"""Word lists and phrase patterns that only run when their key words are present.

Python's ``re`` tries every branch of a big alternation at every position, which is what
made a first version of the guard cost 20-40 µs a message. Here a detector is a set of
single words (a set intersection) plus small phrase patterns, each tagged with the words
it cannot match without; a pattern runs only when the message holds one of its keys.
``tests/unit/test_guard_properties.py`` checks that every pattern's matches contain one of
its keys.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final

__all__ = ["Rules", "phrase", "words"]


def words(text: str) -> frozenset[str]:
    """The space-separated words of ``text``, as a set."""
    return frozenset(text.split())


def phrase(keys: str, pattern: str) -> tuple[frozenset[str], re.Pattern[str]]:
    """A phrase pattern and the words (space separated) it cannot match without."""
    return words(keys), re.compile(pattern)


class Rules:
    """Single words plus key-gated phrase patterns, matched against normalised text."""

    __slots__ = ("keys", "phrases", "words")

    def __init__(self, words: str, *phrases: tuple[frozenset[str], re.Pattern[str]]) -> None:
        self.words: Final = frozenset(words.split())
        self.phrases: Final = phrases
        self.keys: Final = frozenset[str]().union(*(keys for keys, _ in phrases))

    def search(self, text: str, tokens: Collection[str]) -> bool:
        """Whether ``text`` (whose words are ``tokens``) holds a word or a phrase."""
        if not self.words.isdisjoint(tokens):
            return True
        if self.keys.isdisjoint(tokens):
            return False
        return any(
            not keys.isdisjoint(tokens) and pattern.search(text) is not None
            for keys, pattern in self.phrases
        )
