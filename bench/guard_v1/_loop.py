"""Loop: the couple asks the same thing a third time and mel has not resolved it.

The spec's measure is Jaccard > 0.7 over whitespace tokens. Taken literally it never
fires on the spec's own example: "qual o saldo?" / "saldo?" / "saldo mesmo?" score 0.33,
0.5 and 0.25. The scenario wins, and the measure is kept as one of two paths. Two user
messages are *similar* when both have at least one content word and either

1. the spec's Jaccard over all their (normalised) tokens is > 0.7, or
2. the overlap coefficient |A ∩ B| / min(|A|, |B|) of their *content stems* is > 0.7.

Content stems are the normalised tokens minus PT-BR stop words and filler ("qual", "o",
"mesmo", "quanto", "me mostra", "aí", "né" ...), with plurals dropped and each word cut
to its first four letters ("gastei", "gastamos", "gastos" → "gast"), numbers kept whole,
and a few finance synonyms merged (anota / lança / adiciona / registra; viajar / viagem).
"mês" counts as filler: "esse mês" is what the couple means when they name no month.
A rephrasing keeps its content and only adds or drops filler or detail, so one stem set
contains the other: "quanto gastei no mercado?" / "mercado quanto gastei" → {gast, merc}.
A follow-up swaps the content: "e a luz?" / "e o mercado?" → {luz} / {merc}, overlap 0;
"gastos de maio" / "gastos de junho" → 1/2. Messages with no content word at all ("ok",
"oi", "kkk") are never similar, so acknowledgements do not look like a loop.

The loop needs the last *three* user messages pairwise similar, and the caller's
``past_turns_without_tool_call >= 2``: without that signal the detector stays off.
"""

from __future__ import annotations

import functools
from typing import Final

from bench.guard_v1._rules import words
from bench.guard_v1._text import normalize

__all__ = ["content_stems", "is_loop", "similar"]

THRESHOLD: Final = 0.7

_STOP: Final = words(
    """
    a o as os um uma uns umas de da do das dos em no na nos nas num numa pra pro pras pros
    para por pelo pela pelos pelas com sem e ou que qual quais quanto quanta quantos quantas
    quando onde como porque eu tu voce voces ele ela eles elas gente nos me te se lhe meu
    minha meus minhas nosso nossa nossos nossas seu sua seus suas teu tua esse essa esses
    essas este esta estes estas isso isto aquele aquela aquilo ai aqui la mesmo mesma entao
    ne ue hein oi ola mel pfv favor agora ja ainda so tambem mais muito muita bem tipo ta to
    tava foi foram era eram ser sao sera seria tem ter tenho temos tinha ha vai vou vamos
    pode podia poderia consegue quero queria preciso gostaria sabe saber diz dizer fala
    falar mostra mostrar manda mandar ver veja vejo cade lista listar informa passa da dar
    de novo afinal nao sim ok okay viu cara mano amor deu dai o que hoje mes
    """
)


# Stems of words that name the same thing in a finance chat.
_SYNONYMS: Final = {
    "viaj": "viag",
    "desp": "gast",
    "budg": "orca",
    "obje": "meta",
    "anot": "regi",  # anota / registra / lança / adiciona: record an expense
    "lanc": "regi",
    "adic": "regi",
}


_EMPTY: Final[frozenset[str]] = frozenset()


@functools.lru_cache(maxsize=4096)
def _stem(word: str) -> str:
    if word.isdigit():
        return word
    if len(word) > 4 and word.endswith("es") and word[-3] in "rzsl":
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s"):
        word = word[:-1]
    word = word[:4]
    return _SYNONYMS.get(word, word)


def content_stems(text: str) -> frozenset[str]:
    """The content stems of a normalised message (see the module docstring)."""
    words = set(text.split())
    words -= _STOP
    return frozenset([_stem(word) for word in words]) if words else _EMPTY


def similar(a: str, b: str, stems_a: frozenset[str], stems_b: frozenset[str]) -> bool:
    """Whether two normalised messages say the same thing (see the module docstring)."""
    if not stems_a or not stems_b:
        return False
    if len(stems_a & stems_b) / min(len(stems_a), len(stems_b)) > THRESHOLD:
        return True
    tokens_a, tokens_b = set(a.split()), set(b.split())
    return len(tokens_a & tokens_b) / len(tokens_a | tokens_b) > THRESHOLD


def is_loop(last: str, previous: str, before: str) -> bool:
    """Whether the last three user messages are pairwise similar.

    ``last`` is already normalised; ``previous`` and ``before`` are the raw texts of the
    two user messages before it, normalised only if the comparison gets that far.
    """
    stems_last = content_stems(last)
    if not stems_last:
        return False
    previous = normalize(previous)
    stems_previous = content_stems(previous)
    if not similar(last, previous, stems_last, stems_previous):
        return False
    before = normalize(before)
    stems_before = content_stems(before)
    return similar(previous, before, stems_previous, stems_before) and similar(
        last, before, stems_last, stems_before
    )
