"""What each word signals: the [signals] classes of lexicon.toml as bits.

Every signal class of lexicon.toml [signals] (target, negative, deed, praise, ...) is one bit;
``mask_of`` gives a normalised word its bits — from its listed words, the stems it starts with
(minus a class's ``except`` words) and ``PHRASE_BIT`` when phrases are filed under it (the
phrase itself is checked against the message by the reader, ``_signals.read``). Masks are
cached; a word seen for the first time is also handed to each registered score, which files
it as quiet or not (``_signals.Score.bound``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from guard._data import LexiconError, strings, table
from guard._lexicon import _RANK, _terms_of

__all__ = [
    "BIT",
    "CACHE",
    "CACHE_LIMIT",
    "NAMES",
    "PHRASES",
    "PHRASE_BIT",
    "PHRASE_BITS_OF",
    "Sorter",
    "bits",
    "mask_of",
    "register",
    "signal_names",
]


class Sorter(Protocol):
    """What ``mask_of`` hands a new word to (a score)."""

    @property
    def quiet_words(self) -> set[str]: ...

    def sort(self, word: str, mask: int) -> None: ...


_STEM_MIN: Final = 3
_STEM_MAX: Final = 12
CACHE_LIMIT: Final = 50_000
_FIELDS: Final = frozenset(("words", "stems", "phrases", "except"))


def _names() -> tuple[str, ...]:
    return tuple(table("signals"))


#: The signal classes of lexicon.toml [signals], in file order; bit ``i`` is ``NAMES[i]``.
NAMES: Final = _names()
BIT: Final = {name: 1 << index for index, name in enumerate(NAMES)}
#: A word that files phrases: the message must be checked for them.
PHRASE_BIT: Final = 1 << len(NAMES)


def signal_names() -> tuple[str, ...]:
    """The signal classes lexicon.toml defines."""
    return NAMES


_Phrases = dict[str, tuple[tuple[str, int], ...]]


def _load() -> tuple[dict[str, int], dict[str, int], frozenset[str], _Phrases]:
    """word → bits, stem → bits, "name:word" stems must not catch, phrases by key word."""
    words: dict[str, int] = {}
    stems: dict[str, int] = {}
    never: set[str] = set()
    phrases: dict[str, list[tuple[str, int]]] = {}
    common = frozenset(_terms_of("score.common", strings("score.common")))
    for name in NAMES:
        node = table(f"signals.{name}")
        unknown = set(node) - _FIELDS
        if unknown:
            raise LexiconError(
                f"lexicon.toml: 'signals.{name}' has unknown fields {sorted(unknown)}"
            )
        bit = BIT[name]
        for stem in _terms_of(f"signals.{name}.stems", node.get("stems", [])):
            if " " in stem or not _STEM_MIN <= len(stem) <= _STEM_MAX:
                raise LexiconError(
                    f"lexicon.toml: 'signals.{name}.stems': {stem!r} must be one word of "
                    f"{_STEM_MIN}-{_STEM_MAX} letters"
                )
            stems[stem] = stems.get(stem, 0) | bit
        for word in _terms_of(f"signals.{name}.except", node.get("except", [])):
            never.add(f"{name}:{word}")
        listed = _terms_of(f"signals.{name}.words", node.get("words", []))
        listed += _terms_of(f"signals.{name}.phrases", node.get("phrases", []))
        for term in listed:
            if " " not in term:
                words[term] = words.get(term, 0) | bit
                continue
            # filed under its rarest word, as lexicon term lists are
            parts = term.split()
            rare = [w for w in parts if w not in _RANK and w not in common]
            if rare:
                key = max(rare, key=len)
            else:  # all common: the last one the guard's own list does not rank
                unranked = [w for w in parts if w not in _RANK]
                key = unranked[-1] if unranked else max(parts, key=_RANK.__getitem__)
            phrases.setdefault(key, []).append((f" {term} ", bit))
    return words, stems, frozenset(never), {k: tuple(v) for k, v in phrases.items()}


_WORDS, _STEMS, _NEVER, PHRASES = _load()
# a word filing phrases → the signals of those phrases
PHRASE_BITS_OF: Final = {key: sum({bit for _, bit in found}) for key, found in PHRASES.items()}
CACHE: dict[str, int] = {}


def _compute(word: str) -> int:
    mask = _WORDS.get(word, 0)
    for length in range(_STEM_MIN, min(len(word), _STEM_MAX) + 1):
        found = _STEMS.get(word[:length])
        if found:
            mask |= found
    if mask and _NEVER:
        for name in NAMES:
            if mask & BIT[name] and f"{name}:{word}" in _NEVER:
                mask &= ~BIT[name]
    if word in PHRASES:
        mask |= PHRASE_BIT
    return mask


def mask_of(word: str) -> int:
    """The signals of one normalised word, as bits (cached; a new word is also sorted into
    each score's quiet words, see ``Score.bound``)."""
    found = CACHE.get(word)
    if found is None:
        if len(CACHE) > CACHE_LIMIT:
            CACHE.clear()
            for sorter in _SORTERS:
                sorter.quiet_words.clear()
        found = CACHE[word] = _compute(word)
        for sorter in _SORTERS:
            sorter.sort(word, found)
    return found


_SORTERS: list[Sorter] = []


def register(sorter: Sorter) -> None:
    """Have ``sorter`` (a score) sort every word ``mask_of`` sees for the first time."""
    _SORTERS.append(sorter)


def bits(names: Sequence[str], where: str) -> int:
    mask = 0
    for name in names:
        if name not in BIT:
            raise LexiconError(f"lexicon.toml: '{where}' names an unknown signal {name!r}")
        mask |= BIT[name]
    return mask
