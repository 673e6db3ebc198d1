"""Blame: one of mel's deeds put on mel by the message itself.

A deed is a past-tense verb of [signals.deed] ("registrou", "jogou", "duplicou", "apagou").
It is blamed on mel when it opens a clause ("tá de sacanagem, somou 3 vezes a mesma
compra"), comes right after a word for mel, maybe with a few words between ([score.blame]:
"vc já lançou", "tu me botou"), or follows "e" in a message that names nobody else
("importei o extrato e duplicou tudo"). A clause that asks ("vc registrou o mercado?") blames
nobody, and a deed after a clause naming someone else is theirs ("meu sócio é uma
enganação, sumiu com 2 mil"). The score reads blame as a signal (``_signals.score``: the
moods of a complaint about what mel did count anywhere in it) and an outburst about
something else is at mel when it blames mel (``_frustration``).
"""

from __future__ import annotations

import re
from typing import Final

from guard._data import strings
from guard._lexicon import _terms_of
from guard._masks import BIT, mask_of
from guard._text import normalized_words

__all__ = ["blamed"]

_DEED: Final = BIT.get("deed", 0)
_THIRD: Final = BIT.get("third", 0)
# mel blamed for something it did ("vc mudou pra 800 sozinha 😑", "tu jogou no cartão",
# "apagou meu lançamento DE NOVO"): one of mel's deeds ([signals.deed]) opening a clause or
# right after a word for mel ([score.blame]: "vc já lançou", "tu me botou")
_MEL_WORDS: Final = frozenset(_terms_of("score.blame.after", strings("score.blame.after")))
_BLAME_BETWEEN: Final = frozenset(_terms_of("score.blame.between", strings("score.blame.between")))
# a clause that asks ("vc registrou o mercado? que raiva do preço do tomate"): no blame
_QUESTION: Final = re.compile(r"[^.!?\n]*\?")
_CLAUSE_BREAK: Final = re.compile(r"[.,;:!\n]")


def blamed(words: list[str], raw: str) -> bool:
    """Whether one of mel's deeds opens a clause of the message ("tá de sacanagem, somou 3
    vezes a mesma compra") or follows a word for mel, outside a question; or follows "e" in
    a message naming nobody else ("importei o extrato e duplicou tudo", not "paguei a luz e
    mudou o valor, que raiva da enel")."""
    if not any(mask_of(w) & _DEED for w in words):
        return False
    after_and = not any(mask_of(w) & _THIRD for w in words)
    if "?" not in raw and not _CLAUSE_BREAK.search(raw):
        return _deed_blamed(words, after_and)
    statements = _QUESTION.sub(" ", raw) if "?" in raw else raw
    before: list[str] = []
    for part in _CLAUSE_BREAK.split(statements):
        clause = normalized_words(part)
        if not clause:
            continue
        # a deed after a clause naming someone else is theirs ("meu sócio é uma enganação,
        # sumiu com 2 mil")
        if _deed_blamed(clause, after_and) and not any(mask_of(w) & _THIRD for w in before):
            return True
        before = clause
    return False


def _deed_blamed(words: list[str], after_and: bool) -> bool:
    """``blamed`` within one clause."""
    for index, word in enumerate(words):
        if mask_of(word) & _DEED and (
            index == 0 or _after_mel(words, index) or (after_and and words[index - 1] == "e")
        ):
            return True
    return False


def _after_mel(words: list[str], index: int) -> bool:
    """Whether a word for mel comes before ``index``, at most two of the words that may come
    between ([score.blame] ``between``) apart ("vc já lançou", "mel de novo jogou")."""
    for before in range(index - 1, max(index - 4, -1), -1):
        if words[before] in _MEL_WORDS:
            return True
        if words[before] not in _BLAME_BETWEEN:
            return False
    return False
