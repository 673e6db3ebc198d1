"""The words a lexicon pattern cannot match without, read from its parse tree.

A lexicon pattern ``X`` is compiled as ``\\b(?:X)\\b`` and searched in normalised text:
words of ``a-z0-9`` with one space between. A stretch of ``X`` that lies between two
things a match must have there (a space, ``\\b``, ``^``, ``$`` or the pattern's own ends),
and that can only match a few strings ("(?:preciso|quero) de", "burr[oa]s?"), matches whole
words of the message. So every match holds, as a word of the message, one word of each of
those strings: ``needs`` gives such a set of words for each stretch of each top-level
alternative (of each string, a word that is not common where it can). A message holding none
of a stretch's words cannot match that alternative, whatever the pattern's hand-written
``keys`` say; ``guard._lexicon`` picks the sets a pattern runs with.

It is conservative: lookarounds are read as matching nothing (they only take matches away),
and a stretch that can match too many strings, or any string at all (``\\w+``, ``.*``),
gives nothing. ``tests/unit/test_guard_shortcuts.py`` checks it against the corpus.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable
from itertools import product
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any, Final

__all__ = ["needs"]

#: the most strings a stretch may match for its words to be taken
_LIMIT: Final = 400
_SPACE: Final = ord(" ")
_WORD: Final = re.compile(r"[a-z0-9]+")
_ZERO_WIDTH: Final = frozenset((sre.ASSERT, sre.ASSERT_NOT))
_EDGES: Final = frozenset((sre.AT_BOUNDARY, sre.AT_BEGINNING, sre.AT_END))


def _strings(seq: Iterable[tuple[Any, Any]]) -> set[str] | None:
    """Every string ``seq`` can match (lookarounds and anchors matching ""), or None when
    they are too many or unbounded."""
    found = {""}
    for op, av in seq:
        if op is sre.LITERAL:
            part: set[str] | None = {chr(av)}
        elif op is sre.IN:
            part = _class(av)
        elif op is sre.SUBPATTERN:
            items = _group(op, av)
            part = None if items is None else _strings(items)
        elif op is sre.BRANCH:
            part = set()
            for branch in av[1]:
                strings = _strings(branch)
                if strings is None:
                    return None
                part |= strings
        elif op is sre.MAX_REPEAT or op is sre.MIN_REPEAT:
            part = _repeat(av)
        elif op is sre.AT or op in _ZERO_WIDTH:
            continue
        else:
            return None
        if part is None or len(found) * len(part) > _LIMIT:
            return None
        found = {a + b for a, b in product(found, part)}
    return found


def _class(items: list[tuple[Any, Any]]) -> set[str] | None:
    chars: set[str] = set()
    for op, av in items:
        if op is sre.LITERAL:
            chars.add(chr(av))
        elif op is sre.RANGE and av[1] - av[0] < 40:
            chars.update(chr(c) for c in range(av[0], av[1] + 1))
        else:  # a category (\w, \d), a negated class
            return None
    return chars


def _repeat(av: tuple[int, int, Any]) -> set[str] | None:
    low, high, item = av
    if high > 3:
        return None
    once = _strings(item)
    if once is None:
        return None
    found: set[str] = {""} if low == 0 else set()
    current = {""}
    for count in range(1, high + 1):
        current = {a + b for a, b in product(current, once)}
        if len(current) > _LIMIT:
            return None
        if count >= low:
            found |= current
    return found


def _group(op: Any, av: Any) -> list[tuple[Any, Any]] | None:
    """The items of a group without flags, else None."""
    return list(av[3]) if op is sre.SUBPATTERN and not av[1] and not av[2] else None


def _is_edge(op: Any, av: Any) -> bool:
    """Whether an item is something a match must have at that place, that ends a word:
    a space, or ``\\b``, ``^``, ``$``."""
    return (op is sre.LITERAL and av == _SPACE) or (op is sre.AT and av in _EDGES)


def _repeat_body(op: Any, av: Any) -> list[tuple[Any, Any]] | None:
    if op is not sre.MAX_REPEAT and op is not sre.MIN_REPEAT:
        return None
    return _open(list(av[2]))


def _spaced_at(body: list[tuple[Any, Any]], end: int) -> bool:
    """Whether every match of ``body`` ends (``end`` -1) or starts (0) with a space."""
    strings = _strings(body)
    if strings is not None:
        return all(s[end:] == " " if end else s[:1] == " " for s in strings)
    return bool(body) and body[end][0] is sre.LITERAL and body[end][1] == _SPACE


def _space_after(op: Any, av: Any) -> bool:
    """Whether an item is a repeat of something that ends with a space ("(?:\\w+ ){0,2}",
    "(?:eu |a gente )?"): after an edge, what follows it starts a word too."""
    body = _repeat_body(op, av)
    return body is not None and _spaced_at(body, -1)


def _space_before(op: Any, av: Any) -> bool:
    """Whether an item is a repeat of something that starts with a space ("(?: \\w+){0,4}"):
    before an edge, what precedes it ends a word too."""
    body = _repeat_body(op, av)
    return body is not None and _spaced_at(body, 0)


def _stretch_words(seq: list[tuple[Any, Any]], common: Collection[str]) -> list[frozenset[str]]:
    """For each stretch of ``seq`` between two edges that cannot match nothing: a set of
    words one of which every match of it holds (of each string it can match, a word not in
    ``common``, the one most of its strings share, else the longest)."""
    out: list[frozenset[str]] = []
    start = 0
    for end in range(len(seq) + 1):
        if end < len(seq) and not _is_edge(*seq[end]):
            if end == start and _space_after(*seq[end]):
                start = end + 1  # (an edge before it, and a space or that edge after it)
            edge_next = end + 1 == len(seq) or _is_edge(*seq[end + 1])
            if not (edge_next and _space_before(*seq[end])):
                continue  # (unless a space or the next edge comes before what follows it)
        strings = _strings(seq[start:end]) if end > start else None
        start = end + 1
        if not strings:
            continue
        # (a string with other characters cannot be in normalised text)
        split = [string.split() for string in strings if not _WORD.sub("", string).strip(" ")]
        if not split or not all(split):  # the stretch may match nothing: no word needed
            continue
        shared = Counter(word for words in split for word in set(words))
        out.append(
            frozenset(
                max(words, key=lambda w: (w not in common, shared[w], len(w))) for words in split
            )
        )
    return out


def _branches(tree: list[tuple[Any, Any]]) -> list[list[tuple[Any, Any]]]:
    """The top-level alternatives of a pattern, as sequences."""
    tree = _open(tree)
    if len(tree) == 1 and tree[0][0] is sre.BRANCH:
        return [list(branch) for branch in tree[0][1][1]]
    return [tree]


def needs(source: str, common: Collection[str] = ()) -> list[list[frozenset[str]]]:
    """For each top-level alternative of pattern ``source`` (as compiled between ``\\b``s):
    sets of words, every match of it holding one word of each set (none found: an empty
    list; a string's word is one not in ``common`` where it can). A pattern that cannot be
    read gives one alternative with none."""
    try:
        tree = list(sre_parse.parse(source))
    except (re.error, AttributeError, TypeError, ValueError):  # (a private module changed)
        return [[]]
    return [_stretch_words(_open(branch), common) for branch in _branches(tree)]


def _open(seq: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """``seq`` with its groups without flags opened in place, so that their spaces are edges
    too."""
    flat: list[tuple[Any, Any]] = []
    for op, av in seq:
        items = _group(op, av)
        if items is None:
            flat.append((op, av))
        else:
            flat.extend(_open(items))
    return flat
