"""Loop: the couple asks the same thing a third time and mel has not resolved it.

The spec's measure, whitespace-token Jaccard > 0.7, never fires on its own example ("qual
o saldo?" / "saldo?" / "saldo mesmo?" score 0.33 / 0.5 / 0.25), and couples rephrase with
few shared words ("quanto gastamos de mercado?" / "qual foi o total de supermercado?" /
"mercado, quanto deu?"). So messages are compared by meaning. Each becomes a ``Meaning``
made from the synonym groups of ``guard/lexicon.toml`` ([loop.*]):

* **topics** — what it is about (mercado = supermercado = assaí; farmácia = remédio);
* **generic** concepts — gasto, pagamento, conta ... (shared by different questions);
* **intents** — the kind of question: amount, date, split, record, most, who, remaining;
* **periods** — "kind:value" (month:abril, week:last, day:hoje);
* **amounts** — the numbers in it;
* **stems** — any other content word, cut to its root ("fixos"/"fixas" → "fix").

A word that is not in a group but shares a group word's root counts as that word
("economizou" is in the group of "economizar").

Two messages are *similar* when both have content (anything but a period), nothing
conflicts, and they share a topic, concept, intent, amount or period, or name related
topics ([loop.related]: "saldo" / "orçamento"), or most of their other content words
(shared stems over the smaller set > 0.7: "primeira pergunta" / "segunda pergunta" are two
questions) — or the spec's Jaccard is > 0.7. A *follow-up* ("e a água?", "ok, e em
março?") is similar only through a shared topic, stems or Jaccard: it asks the next
question. Conflicts: both name topics of one facet ([loop.facets]: categories, accounts,
money matters) and share none that is related ("e a luz?" / "e a água?"; but "nubank" and
"fatura" are different facets); both name a period of the same kind with different values
("abril" / "maio"), unless one compares periods ("pior que o mês passado?"); both hold
amounts that differ (a correction: "anota 50 de gasolina" / "foi 55"; "30 mil", "30k" and
"30.000" are one amount), unless one asks why or splits (it quotes figures); both ask conflicting
kinds of question ("quanto foi a luz?" / "quando vence a luz?"); or they are one sentence
with one word swapped for a word the lexicon does not tie to it ("gastos com pilates em
maio" / "gastos com natação em maio": one template asked about two things).

The loop needs the caller's ``past_turns_without_tool_call >= 2`` and the last *three* user
messages to be one question: at least two of the three pairs similar, and the third pair
neither conflicting nor a follow-up (a rephrasing can share a word with each of the others
and none with the third) — or one pair similar and no pair conflicting or a follow-up, all
three saying something: the couple asking again in words no synonym group ties to the
others ("quanto custa a assinatura?" / "qual o valor do plano?" / "to perguntando o preço
pra continuar usando"), unless the last names a topic the other two do not, or one of the
last two says the answer came or the step is done ([loop] ``answered``: "ah vi aqui, valeu
mel", "pronto, mandei o arquivo"). The bot has already failed twice, so a same-topic test is
safer than it looks; without the signal the detector stays off.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

from guard._data import LexiconError, strings, table
from guard._lexicon import Terms
from guard._text import normalize

__all__ = [
    "JACCARD_THRESHOLD",
    "Meaning",
    "has_content",
    "is_loop",
    "meaning",
    "repeats",
    "similar",
]

#: The spec's threshold for its whitespace-token Jaccard.
JACCARD_THRESHOLD: Final = 0.7

_TOPIC, _GENERIC, _INTENT, _PERIOD = "topic", "generic", "intent", "period"


# Inflections cut off to compare words by their root ("economizou" / "economizamos" /
# "economizar" → "economiz"), longest first; the root keeps at least 3 letters.
_SUFFIXES: Final = (
    "ariamos",
    "eriamos",
    "avamos",
    "aremos",
    "eremos",
    "amento",
    "imento",
    "acoes",
    "acao",
    "ando",
    "endo",
    "indo",
    "aram",
    "eram",
    "iram",
    "amos",
    "emos",
    "imos",
    "ados",
    "adas",
    "idos",
    "idas",
    "ado",
    "ada",
    "ido",
    "ida",
    "ava",
    "ia",
    "ar",
    "er",
    "ir",
    "ou",
    "ei",
    "eu",
    "iu",
    "am",
    "em",
    "as",
    "es",
    "os",
    "a",
    "e",
    "o",
    "s",
)


@functools.lru_cache(maxsize=4096)
def _root(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


_Concept = tuple[str, str]  # (kind, name)
_Phrase = tuple[str, str, str]  # (padded phrase, kind, name)


# Groups whose words match only as written, not by their root ("registrado" is not a
# request to record).
_EXACT_ONLY: Final = frozenset(strings("loop.exact_only"))
_REMAINING: Final = "remaining"


def _index() -> tuple[dict[str, tuple[_Concept, ...]], dict[str, tuple[_Phrase, ...]]]:
    """word → its concepts (and "~root" → concepts for the groups' words of more than 3
    letters); a phrase's rarest word → the phrases filed under it."""
    words: dict[str, set[_Concept]] = {}
    roots: dict[str, set[_Concept]] = {}
    phrases: dict[str, list[_Phrase]] = {}
    for kind, path in (
        (_TOPIC, "loop.topics"),
        (_GENERIC, "loop.generic"),
        (_INTENT, "loop.intents"),
        (_PERIOD, "loop.periods"),
    ):
        for name in table(path):
            if kind == _PERIOD and ":" not in name:
                raise LexiconError(f"lexicon.toml: period '{name}' must be 'kind:value'")
            group = Terms.at(f"{path}.{name}")
            for word in group.words:
                words.setdefault(word, set()).add((kind, name))
                if kind != _PERIOD and len(word) > 3 and name not in _EXACT_ONLY:
                    roots.setdefault(_root(word), set()).add((kind, name))
            for key, found in group.phrases.items():
                phrases.setdefault(key, []).extend((phrase, kind, name) for phrase in found)
    for root, concepts in roots.items():  # an exact word wins over a root
        words.setdefault(f"~{root}", concepts)
    return (
        {word: tuple(sorted(concepts)) for word, concepts in words.items()},
        {key: tuple(found) for key, found in phrases.items()},
    )


_WORDS, _PHRASES = _index()
_TOPICS: Final = frozenset(table("loop.topics"))


def _facets() -> dict[str, str]:
    """topic → its facet ("category" unless [loop.facets] says otherwise)."""
    out = dict.fromkeys(_TOPICS, "category")
    for facet, names in table("loop.facets").items():
        for name in strings(f"loop.facets.{facet}", names):
            if name not in _TOPICS:
                raise LexiconError(f"lexicon.toml: loop.facets.{facet}: unknown topic '{name}'")
            out[name] = facet
    return out


def _related() -> frozenset[tuple[str, str]]:
    """Pairs of topics that never conflict ([loop.related]), both ways round."""
    pairs: set[tuple[str, str]] = set()
    for hub, names in table("loop.related").items():
        for name in (hub, *strings(f"loop.related.{hub}", names)):
            if name not in _TOPICS:
                raise LexiconError(f"lexicon.toml: loop.related.{hub}: unknown topic '{name}'")
            pairs.update(((hub, name), (name, hub)))
    return frozenset(pairs)


_FACET: Final = _facets()
_MONEY: Final = "money"
_RELATED: Final = _related()
# How a follow-up to a different question starts ("e a água?", "ok, e em março?").
_FOLLOW_UP: Final = tuple(f"{normalize(start)} " for start in strings("loop.follow_up"))
_NOT_FOLLOW_UP: Final = tuple(f"{normalize(s)} " for s in strings("loop.not_follow_up"))
_CORRECTS: Final = tuple(f"{normalize(start)} " for start in strings("loop.correction"))
_STOP_TERMS: Final = Terms.at("loop.stop")
# The couple says the answer came or the step is done ("ah vi aqui, valeu", "pronto, mandei
# o arquivo"): not asking again.
_ANSWERED: Final = Terms.at("loop.answered")
_STOP: Final = _STOP_TERMS.words
_STOP_PHRASES: Final = _STOP_TERMS.phrases
CONFLICTING_INTENTS: Final = frozenset(strings("loop.conflicting_intents"))
# A comparison names two periods: they do not conflict.
_COMPARE: Final = frozenset(("compare",))
# a why or a split quotes its figures ("pq a fatura tá 2300?", "a net de 110, 55 pra cada")
_QUOTES_FIGURES: Final = frozenset(("why", "split"))
# instalments quote the total and the instalment ("tênis 600 em 3x" / "3 parcelas de 200")
_INSTALMENTS: Final = "parcela"


@dataclass(frozen=True, slots=True)
class Meaning:
    """What one normalised message is about (see the module docstring)."""

    topics: frozenset[str]
    generic: frozenset[str]
    intents: frozenset[str]
    periods: frozenset[tuple[str, str]]
    amounts: frozenset[str]
    stems: frozenset[str]
    tokens: frozenset[str]
    #: it starts like a follow-up ("e a água?"): the same question only if it shares what
    #: the question is about
    follow_up: bool = False
    #: its words in order (for the same sentence with one thing swapped)
    sequence: tuple[str, ...] = ()
    #: it starts like a correction ("não, 3x de 250", "corrige pra 12 parcelas")
    corrects: bool = False

    @property
    def content(self) -> bool:
        """Whether it says anything beyond a period (greetings, "ok", "kkk" do not)."""
        return bool(self.topics or self.generic or self.intents or self.amounts or self.stems)


# a number after these is a day of the month ([loop] day_words)
_DATE_WORDS: Final = frozenset(normalize(word) for word in strings("loop.day_words"))


def _thousands(tokens: list[str], remaining: set[str]) -> set[str]:
    """``remaining`` with amounts written in thousands read as one number: "30 000" (from
    "30.000") and "30k" are 30000, like the spoken "30 mil"."""
    out = set(remaining)
    for index, token in enumerate(tokens):
        if token[:-1].isdigit() and token[-1:] == "k" and token in out:
            out.discard(token)
            out.add(str(int(token[:-1]) * 1000))
        elif (
            token.isdigit()
            and len(token) <= 3
            and not (index and tokens[index - 1] in _DATE_WORDS)  # "dia 10, 189 reais"
            and index + 1 < len(tokens)
            and len(tokens[index + 1]) == 3
            and tokens[index + 1].isdigit()
            and token in out
        ):
            out.discard(token)
            out.discard(tokens[index + 1])
            out.add(token + tokens[index + 1])
    return out


def _negated(tokens: list[str]) -> set[str]:
    """The numbers a message says it is not about ("no dia do pagamento e não no dia 1"):
    a number at most three words after "não" (and not also said without it). A message that
    opens with "não" corrects a value: the numbers after it are the ones meant ("não, 76")."""
    negated: set[str] = set()
    plain: set[str] = set()
    for index, token in enumerate(tokens):
        if token.isdigit():
            near = tokens[max(1, index - 3) : index]
            (negated if "nao" in near else plain).add(token)
    return negated - plain


def _meaning(text: str) -> Meaning:
    tokens = text.split()
    remaining = set(tokens)
    concepts: set[_Concept] = set()
    padded = f" {text} "
    stop_phrases = [p for t in remaining for p in _STOP_PHRASES.get(t, ()) if p in padded]
    phrases = [p for t in remaining for p in _PHRASES.get(t, ()) if p[0] in padded]
    if stop_phrases or phrases:
        for phrase in stop_phrases:
            padded = padded.replace(phrase, "  ")
        if len(phrases) > 1:  # longest first, so "mercado pago" is not read as "mercado"
            phrases.sort(key=lambda p: (-len(p[0]), p))
        for phrase, kind, name in phrases:
            if phrase in padded:
                concepts.add((kind, name))
                if kind != _INTENT:  # a kind of question leaves its words to the topic
                    padded = padded.replace(phrase, "  ")
        taken = remaining.difference(padded.split())
        remaining -= taken
        for word in taken:  # "quanto" in "quanto eu tenho" (saldo) still asks an amount
            concepts.update(c for c in _WORDS.get(word, ()) if c[0] == _INTENT)
    stems: set[str] = set()
    amounts: set[str] = set()
    if "k" in text or any(len(t) == 3 and t.isdigit() for t in tokens):
        remaining = _thousands(tokens, remaining)
    if "nao" in remaining:
        remaining -= _negated(tokens)
    dates = {
        ("day", t)
        for i, t in enumerate(tokens)
        if i and tokens[i - 1] in _DATE_WORDS and t.isdigit()
    }
    if dates:  # "até dia 24", "vence 10" are dates, not amounts
        remaining -= {value for _, value in dates}
    for word in remaining:
        found = _WORDS.get(word)
        if found is not None:
            concepts.update(found)
        elif word.isdigit():
            if word.strip("0"):  # "89,00": the cents are not another amount
                amounts.add(word)
        elif word not in _STOP:
            root = _root(word)
            found = _WORDS.get(f"~{root}") if len(word) > 3 else None
            if found is not None:
                concepts.update(found)
            else:
                stems.add(root)
    groups: dict[str, set[str]] = {_TOPIC: set(), _GENERIC: set(), _INTENT: set()}
    periods: set[tuple[str, str]] = dates
    for kind, name in concepts:
        if kind == _PERIOD:
            period_kind, _, value = name.partition(":")
            periods.add((period_kind, value))
        else:
            groups[kind].add(name)
    if "edit" in groups[_INTENT] and len(amounts) > 1:
        # a value changed from one to another: the new one is meant ("corrige de 500 pra 50")
        amounts -= {
            t
            for i, t in enumerate(tokens[:-2])
            if tokens[i + 1] in ("pra", "para") and tokens[i + 2] in amounts
        }
    return Meaning(
        frozenset(groups[_TOPIC]),
        frozenset(groups[_GENERIC]),
        frozenset(groups[_INTENT]),
        frozenset(periods),
        frozenset(amounts),
        frozenset(stems),
        frozenset(tokens),
        f"{text} ".startswith(_FOLLOW_UP) and not f"{text} ".startswith(_NOT_FOLLOW_UP),
        tuple(tokens),
        f"{text} ".startswith(_CORRECTS),
    )


#: The meaning of a normalised message. Cached: the couple's previous messages come back
#: in every later turn's comparison.
meaning: Final = functools.lru_cache(maxsize=4096)(_meaning)


#: The couple's earlier messages, normalised: they come back in every later turn.
_normalized: Final = functools.lru_cache(maxsize=4096)(normalize)


def has_content(text: str) -> bool:
    """Whether a normalised message can take part in a loop at all."""
    return meaning(text).content


@functools.lru_cache(maxsize=1024)
def _topics_conflict(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two sets of topics name different things: some facet has topics on both
    sides, none shared and none related. When the two share a topic, only a different
    account or category counts ("fatura do nubank" / "fatura do inter", "meta da viagem" /
    "meta do carro"); money matters are then aspects of one question ("ipva à vista?" /
    "ipva sem parcelar?")."""
    shared = not a.isdisjoint(b)
    for facet in {_FACET[t] for t in a}:
        if shared and facet == _MONEY:
            continue
        mine = [t for t in a if _FACET[t] == facet]
        theirs = [t for t in b if _FACET[t] == facet]
        if theirs and not any(x == y or (x, y) in _RELATED for x in mine for y in theirs):
            return True
    return False


def _swapped(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether two messages are one sentence with one content word swapped for a word the
    lexicon does not tie to it ("gastos com pilates em maio" / "gastos com natação em
    maio"): the same template asked about two things."""
    if len(a) != len(b) or len(a) < 2 or (a[0] != b[0] and a[-1] != b[-1]):
        return False  # (two words differ at least)
    diffs = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    if len(diffs) != 1:
        return False
    x, y = diffs[0]
    if x in _STOP or y in _STOP or x.isdigit() or y.isdigit() or x[:4] == y[:4]:
        return False  # (a filler word, an amount, or one word inflected or mistyped)
    return set(_WORDS.get(x, ())).isdisjoint(_WORDS.get(y, ()))


def _conflict(a: Meaning, b: Meaning) -> bool:
    if a.topics and b.topics and a.topics != b.topics and _topics_conflict(a.topics, b.topics):
        return True
    if len(a.sequence) == len(b.sequence) and _swapped(a.sequence, b.sequence):
        return True
    if (
        a.amounts
        and b.amounts
        and a.amounts != b.amounts
        and not (a.intents | b.intents) & _QUOTES_FIGURES
        and not (
            _INSTALMENTS in a.topics and _INSTALMENTS in b.topics and not (a.corrects or b.corrects)
        )
    ):
        return True
    if a.periods and b.periods and not (a.intents & _COMPARE or b.intents & _COMPARE):
        a_kinds = {kind for kind, _ in a.periods}
        b_kinds = {kind for kind, _ in b.periods}
        for kind in a_kinds & b_kinds:
            if {v for k, v in a.periods if k == kind}.isdisjoint(
                {v for k, v in b.periods if k == kind}
            ):
                return True
    if _REMAINING in a.intents or _REMAINING in b.intents:
        return False  # "quantas parcelas faltam?" / "quando eu termino de pagar?"
    a_intents, b_intents = a.intents & CONFLICTING_INTENTS, b.intents & CONFLICTING_INTENTS
    return bool(a_intents and b_intents and a_intents.isdisjoint(b_intents))


def similar(a: Meaning, b: Meaning) -> bool:
    """Whether two messages ask the same thing (see the module docstring)."""
    if not a.content or not b.content or _conflict(a, b):
        return False
    if not a.topics.isdisjoint(b.topics) or (
        not (a.follow_up or b.follow_up)
        and (
            not a.generic.isdisjoint(b.generic)
            or not a.intents.isdisjoint(b.intents)
            or not a.amounts.isdisjoint(b.amounts)
            or not a.periods.isdisjoint(b.periods)
            or any((x, y) in _RELATED for x in a.topics for y in b.topics)
        )
    ):
        return True
    # words the lexicon does not know: most of them shared ("primeira pergunta" / "segunda
    # pergunta" share only "pergunta" and are two questions)
    shared = len(a.stems & b.stems)
    if shared and shared / min(len(a.stems), len(b.stems)) > JACCARD_THRESHOLD:
        return True
    return len(a.tokens & b.tokens) / len(a.tokens | b.tokens) > JACCARD_THRESHOLD


def _linked(a: Meaning, b: Meaning) -> bool:
    """Not the same question, but not a different one either: no conflict, and neither is
    a follow-up."""
    return not (a.follow_up or b.follow_up or _conflict(a, b))


def _answered(text: str) -> bool:
    """Whether a normalised message says the answer came or the step is done ([loop]
    ``answered``)."""
    return _ANSWERED.search(f" {text} ", text.split())


def _new_topic(a: Meaning, others: frozenset[str]) -> bool:
    """Whether ``a`` names topics, the others name some, and none of ``a``'s is theirs or
    related to theirs ("quanto deu o uber?" / "uber total?" / "qual o saldo?")."""
    return bool(
        a.topics
        and others
        and a.topics.isdisjoint(others)
        and not any((x, y) in _RELATED for x in a.topics for y in others)
    )


def is_loop(last: str, previous: str, before: str) -> bool:
    """Whether the last three user messages ask one thing.

    ``last`` is already normalised; ``previous`` and ``before`` are the raw texts of the
    two user messages before it, normalised only if the comparison gets that far.
    """
    m_last = meaning(last)
    if not m_last.content:
        return False
    m_previous = meaning(_normalized(previous))
    last_previous = similar(m_last, m_previous)
    if not last_previous and not _linked(m_last, m_previous):
        return False
    m_before = meaning(_normalized(before))
    if not m_before.content:
        return False
    # all three pairs ask the same thing; or two do and the third pair does not conflict (a
    # rephrasing can share a word with each of the others and none with the third: "quanto
    # tem na nossa conta?" / "qual o saldo da conta conjunta?" / "quanto dinheiro a gente
    # tem?")
    previous_before = similar(m_previous, m_before)
    last_before = similar(m_last, m_before)
    if last_previous + previous_before + last_before < 2:
        # one pair asks the same thing and no pair conflicts: the third message asks it again
        # in words the lexicon does not tie to the other ("quanto custa a assinatura?" / "qual
        # o valor do plano?" / "to perguntando o preço pra continuar usando"), unless it or the
        # one before says the answer came ("ah vi aqui, valeu mel"), or it names a topic the
        # others do not ("quanto deu o uber?" / "uber total?" / "qual o saldo?"); all three
        # say something (not "quanto gastamos com ifood" / "nossa, muito" / "vamos definir
        # um orçamento")
        return (
            m_previous.content
            and (last_previous or previous_before or last_before)
            and _linked(m_last, m_previous)
            and _linked(m_previous, m_before)
            and _linked(m_last, m_before)
            and not _answered(last)
            and not _answered(_normalized(previous))
            and not _new_topic(m_last, m_previous.topics | m_before.topics)
        )
    if not last_previous:
        return True  # linked, checked above
    if not previous_before:
        return _linked(m_previous, m_before)
    return last_before or _linked(m_last, m_before)


def repeats(last: str, previous: str) -> bool:
    """Whether the normalised ``last`` message asks what the raw ``previous`` one did."""
    return similar(meaning(last), meaning(_normalized(previous)))
