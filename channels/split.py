"""Split a long reply into parts a provider accepts, on the most natural boundary."""

from __future__ import annotations

import re

__all__ = ["split_message", "text_length"]

# Boundaries, from the most to the least natural.
# Group 1 of each match is the whitespace to drop at the cut.
_PARAGRAPH = re.compile(r"(\n[^\S\n]*\n\s*)")
_LINE = re.compile(r"(\n\s*)")
_SENTENCE = re.compile(r"[.!?…][\"'”’»)\]]*(\s+)")
_WORD = re.compile(r"(\s+)")
_BOUNDARIES = (_PARAGRAPH, _LINE, _SENTENCE, _WORD)


def text_length(text: str) -> int:
    """Length in UTF-16 code units: what a provider counts, never less than ``len(text)``.

    An emoji outside the Basic Multilingual Plane counts 2, so a split that fits by this
    measure fits whether the provider counts code points or UTF-16 units.
    """
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def split_message(text: str, limit: int) -> list[str]:
    """Cut ``text`` into parts of at most ``limit`` (by ``text_length``).

    Cuts on a paragraph break if one falls in the second half of the allowed window, else
    a line break, a sentence end, a space; a word longer than the limit is cut hard. Only
    the whitespace at a cut (and around the whole text) is dropped: every other character
    is kept, in order, and no part is empty. A blank text gives ``[]``.
    """
    if limit < 2:  # one emoji needs 2 units
        raise ValueError(f"limit must be at least 2, got {limit}")
    parts: list[str] = []
    rest = text.strip()
    while rest:
        if text_length(rest) <= limit:
            parts.append(rest)
            break
        window = _fitting_prefix(rest, limit)
        head, tail = _cut(rest, window)
        parts.append(head)
        rest = tail
    return parts


def _fitting_prefix(text: str, limit: int) -> int:
    """How many leading code points of ``text`` fit in ``limit`` UTF-16 units."""
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > limit:
            return index
    return len(text)


def _cut(text: str, window: int) -> tuple[str, str]:
    """Split ``text`` so that the head has at most ``window`` code points.

    ``text`` is stripped and longer than the window. The head is stripped and non-empty;
    the tail is stripped (possibly empty only if the text ended in whitespace).
    """
    best_any: tuple[int, int] | None = None
    for pattern in _BOUNDARIES:
        last: tuple[int, int] | None = None
        for match in pattern.finditer(text, 0, window + 1):
            start, end = match.span(1)
            if start == 0:
                continue
            if start > window:
                break
            last = (start, end)
        if last is None:
            continue
        if last[0] * 2 >= window:
            return _halves(text, *last)
        if best_any is None or last[0] > best_any[0]:
            best_any = last
    if best_any is not None:  # no boundary in the second half: the latest one anywhere
        return _halves(text, *best_any)
    return text[:window].rstrip(), text[window:].lstrip()


def _halves(text: str, start: int, end: int) -> tuple[str, str]:
    return text[:start].rstrip(), text[end:].lstrip()
