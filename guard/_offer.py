"""Whether a short reply accepts the loop reply's offer of a person.

``GUARD_RESPONSE_LOOP`` ends with "Quer reformular ou esperar um humano entrar pra te ajudar
mais tarde?". The gateway asks ``accepts_human_offer(next_message)``: True for a short yes
to waiting for a person ("sim", "s", "pode ser", "prefiro esperar", "pode chamar", "bora",
"👍", "siim", "claor"), False for a rephrased question, a no ("não", "vou reformular"), or
anything long or off-topic. The words are in ``guard/lexicon.toml`` ([offer]).

The rule: at most ``max_words`` words; none of them (or their phrases) in ``no``; every
word in ``words`` or ``yes`` (a word of 4+ letters may be one typo away: a letter added,
dropped, changed or two swapped); and at least one ``yes`` term, or a yes emoji.
Deterministic, no I/O, never raises.
"""

from __future__ import annotations

from typing import Final

from guard._data import LexiconError, string, table
from guard._lexicon import Terms
from guard._text import normalized_words
from guard._typos import one_typo_away

__all__ = ["accepts_human_offer"]

_YES: Final = Terms.at("offer.yes")
_NO: Final = Terms.at("offer.no")
_ALLOWED: Final = (
    Terms.at("offer.words").words
    | _YES.words
    | frozenset(
        word for phrases in _YES.phrases.values() for phrase in phrases for word in phrase.split()
    )
)
_VOCABULARY: Final = _ALLOWED | _NO.keys
_SORTED_VOCABULARY: Final = tuple(sorted(w for w in _VOCABULARY if len(w) >= 4))
_YES_EMOJI: Final = frozenset(string("offer.emoji"))


def _max_words() -> int:
    value = table("offer").get("max_words")
    if not isinstance(value, int) or isinstance(value, bool):
        raise LexiconError("lexicon.toml: 'offer.max_words' must be a whole number")
    return value


_MAX_WORDS: Final = _max_words()
#: Longer texts are never a short yes (and are not worth normalising).
_MAX_CHARS: Final = 120
# Characters that dress an emoji up: variation selectors, skin tones, joiners, spaces.
_EMOJI_DRESSING: Final = frozenset("\ufe0f\u200d \t\n!.") | {
    chr(c) for c in range(0x1F3FB, 0x1F400)
}


def _fix(word: str) -> str | None:
    """``word`` itself if known, the known word one typo away, else None."""
    if word in _VOCABULARY:
        return word
    if len(word) < 4:
        return None
    for known in _SORTED_VOCABULARY:  # sorted: the same answer on every run
        if one_typo_away(word, known):
            return known
    return None


def _is_yes_emoji(text: str) -> bool:
    found = False
    for char in text:
        if char in _YES_EMOJI:
            found = True
        elif char not in _EMOJI_DRESSING:
            return False
    return found


def accepts_human_offer(text: object) -> bool:
    """Whether ``text`` is a short yes to waiting for a person (see the module docstring)."""
    if not isinstance(text, str) or len(text) > _MAX_CHARS:
        return False
    words = normalized_words(text)
    if not words:
        return _is_yes_emoji(text)
    if len(words) > _MAX_WORDS:
        return False
    fixed = []
    for word in words:
        known = _fix(word)
        if known is None:
            return False  # a word that is not part of a yes: a question, another topic
        fixed.append(known)
    tokens = frozenset(fixed)
    padded = f" {' '.join(fixed)} "
    if _NO.search(padded, tokens):
        return False
    return _YES.search(padded, tokens) or not _YES_EMOJI.isdisjoint(text)
