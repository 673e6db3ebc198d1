"""Frustration: the couple is angry or fed up with mel.

What the words are lives in ``guard/lexicon.toml`` ([frustration.*]); here is only how they
combine, on the normalised last user message (``_text.normalize``) plus its raw text (for
capitals, "!" and emoji):

1. ``at_you`` — insults in the second person ("vai se ferrar",
   "vsf"), complaints that can only be about the conversation ("não serve pra nada",
   "quantas vezes vou ter que ..."), giving up on mel ("vou voltar pra planilha", "1
   estrela na play store", "cancela minha assinatura"), sarcasm markers ("só que não",
   "obrigado por nada") — is frustration, whatever else the message says;
2. ``directed`` — a negative word aimed at mel ("que bot burro", "vc é muito lento", "que
   coisa mais ruim esse app") — is frustration; ``directed_before``, a negative word just
   before the word for mel ("lixo de app"), too, but only within one clause when the
   message is also about something else ("o chatbot da vivo é inútil, vc me diz quanto
   foi a conta?" is not at mel). Insults match in every gender, number, diminutive and
   augmentative ("burro*" in lexicon.toml: "burrinha", "burrão", "burrona");
   irony — praise, a word for mel and a wink ("super útil vc hein", "q gênio 🙃") — too;
3. an ``outburst`` (profanity, "vsf", "lixo", "não funciona", "que saco", 🤬 🙄 🙃 ...) or sarcasm
   (``praise`` and ``failure`` together: "parabéns mel 👏 conseguiu errar a fatura
   inteira"; praise applauded that is no cheer: "grande ajuda 👏👏👏") is frustration
   unless the message is about something else (``elsewhere``:
   an amount, a bill, a shop, a bank, another person, a request to record something) and
   nothing ties it to mel. Ties: ``about_mel`` ("eu pedi", "vc registrou errado", "esse
   app"), a request for a person in the same message ("cadê o atendente, porra"), or the
   couple repeating the topic of their previous unanswered message ("uber?" … "uber
   caralho"). So "pqp, a enel me cobrou 412, registra na luz" and "esse governo é um
   lixo, registra 250 no posto" are not frustration with mel;
4. capitals alone are not anger (plenty of people type everything in capitals, and "BOA
   NOITE, GOSTARIA DE FALAR COM UM ATENDENTE" is a polite request). The spec's caps-abuse
   heuristic counts only together with shouting: "!!!" in a message that is neither
   about something else nor cheering.

Before step 3, ``neutralise`` removes uses that are not outbursts: the object "lixo"
("taxa do lixo"), "saco de ...", intensifiers ("caro pra caralho"), self-criticism ("fui
burro de parcelar") and complaints whose subject is someone else ("meu marido não entende
nada de investimento").

5. When no rule says yes, the message is read as weak hints and scored (``_signals``,
   lexicon.toml [signals.*] and [score.frustration]): a judgement word in any inflection,
   a capability denied, giving up, paying for nothing, a rival, an eye-roll ... each adds
   a hand-set weight, a word pointing at mel adds, thanks, hedging and ``elsewhere`` take
   off. Phrase lists only catch the phrasings someone wrote down; the score catches the
   combinations ("fiquei arretado com tu, apagou minha meta", "tô rindo pra não chorar com
   esse aplicativo"). With a request for a person in the message it needs a higher score
   (spec 023's priority is for real anger, not a polite request that mentions a
   difficulty).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Final

from guard._blame import blamed
from guard._lexicon import Rules, Terms, rules, tokens_of
from guard._signals import FRUSTRATION, glad, score
from guard._text import emoji_set, has_emoji, laughs, normalized_words
from guard._typos import fix_typos

__all__ = ["ANY_KEYS", "EMOJI", "Message", "caps_abuse", "is_frustrated"]

AT_YOU: Final = rules("frustration.at_you")
DIRECTED: Final = rules("frustration.directed")
DIRECTED_BEFORE: Final = rules("frustration.directed_before")
OUTBURST: Final = rules("frustration.outburst")
NEUTRALISE: Final = rules("frustration.neutralise")
DISMAY: Final = rules("frustration.dismay")
LIMITS: Final = rules("frustration.limits")
CORRECTS: Final = rules("frustration.corrects")
ELSEWHERE: Final = rules("frustration.elsewhere")
ABOUT_MEL: Final = rules("frustration.about_mel")
PRAISE: Final = Terms.at("frustration.sarcasm.praise")
FAILURE: Final = Terms.at("frustration.sarcasm.failure")
CHEER: Final = rules("frustration.cheer")
IRONY: Final = Terms.at("frustration.sarcasm.irony")
RIGHT: Final = Terms.at("frustration.sarcasm.right")
IRONY_EMOJI: Final = emoji_set("frustration.sarcasm.irony_emoji")
MEL: Final = Terms.at("frustration.sarcasm.mel").words
# Words for the partner: praise with a wink next to one of them is at the partner.
PARTNER: Final = Terms.at("signals.partner.words").words
ANGRY_EMOJI: Final = emoji_set("frustration.emoji.angry")
CROSS_EMOJI: Final = emoji_set("frustration.emoji.cross")
PRAISE_EMOJI: Final = emoji_set("frustration.emoji.praise")
BANTER: Final = Terms.at("frustration.banter.words").words
LAUGHTER_EMOJI: Final = emoji_set("frustration.banter.laughter")
_OUTBURST_EMOJI: Final = ANGRY_EMOJI | CROSS_EMOJI
_WINK_EMOJI: Final = IRONY_EMOJI - PRAISE_EMOJI
#: Every emoji the detector looks at.
EMOJI: Final = _OUTBURST_EMOJI | PRAISE_EMOJI | IRONY_EMOJI
# Punctuation that ends a clause: a negative word and a word for mel in two clauses are not
# one complaint ("o chatbot da vivo é inútil demais, vc me diz quanto foi a conta?").
_CLAUSE_END: Final = re.compile(r"[,.;:!?\n]+")
_CLAUSE_MARKS: Final = ",.;:!?\n"
_SHORT: Final = max(FRUSTRATION.weights.get("short", 0.0), 0.0)

# A message with none of these words can only be frustrated through emoji or capitals.
# (Sarcasm needs a praise word or 👏 — the emoji are checked apart.)
ANY_KEYS: Final = AT_YOU.keys | DIRECTED.keys | DIRECTED_BEFORE.keys | OUTBURST.keys | PRAISE.keys


def caps_abuse(raw: str) -> bool:
    """The spec's heuristic: more than 5 chars and over half of the non-space ones upper-case."""
    if len(raw) <= 5:
        return False
    non_space = len(raw) - raw.count(" ")
    return non_space > 0 and sum(map(str.isupper, raw)) / non_space > 0.5


def _has(raw: str, emoji: frozenset[str]) -> bool:
    return not emoji.isdisjoint(raw)


def _winks(raw: str, tokens: list[str], padded: str) -> bool:
    """Whether an emoji of the message winks: 👏 only when the message does not say mel got
    it right (``RIGHT``: "vc não errou nada 👏 somou certinho" is applause)."""
    if _has(raw, _WINK_EMOJI):
        return True
    return _has(raw, IRONY_EMOJI) and not RIGHT.search(padded, tokens)


def _opens(words: list[str]) -> bool:
    """Whether a clause of at most two words only calls mel ("mel", "ô mel")."""
    return len(words) <= 2 and not MEL.isdisjoint(words)


def _directed(message: Message, text: str, tokens: list[str], padded: str) -> bool:
    """A negative word aimed at mel; one before the word for mel only within one clause of
    the raw message when the message is also about something else."""
    if DIRECTED.search(text, tokens, padded):
        return True
    if not DIRECTED_BEFORE.search(text, tokens, padded):
        return False
    raw = message.raw
    if not any(mark in raw for mark in _CLAUSE_MARKS) or not message.elsewhere():
        return True
    clauses: list[list[str]] = []
    parts = [words for part in _CLAUSE_END.split(raw) if (words := normalized_words(part))]
    for index, words in enumerate(parts):
        if clauses and len(words) <= 2 and index == len(parts) - 1:
            clauses[-1].extend(words)  # a closing vocative or tag ("..., mel?", "..., né")
        elif clauses and len(clauses[-1]) <= 2 and index > 0 and _opens(parts[index - 1]):
            clauses[-1].extend(words)  # an opening vocative ("mel, quanto temos ...")
        else:
            clauses.append(words)
    for words in clauses:
        words = fix_typos(words)
        found = " ".join(words)
        if not NEUTRALISE.keys.isdisjoint(words):
            found = NEUTRALISE.sub("  ", found, words)
            words = found.split()
        if DIRECTED_BEFORE.search(found, words, f" {found} "):
            return True
    return False


class Message:
    """The last user message, the ways the detectors look at it."""

    __slots__ = (
        "_cleaned",
        "_elsewhere",
        "_glad",
        "_human",
        "_kept",
        "_scored",
        "padded",
        "raw",
        "text",
        "tokens",
    )

    def __init__(self, raw: str, words: list[str]) -> None:
        self.raw: Final = raw
        self.text: Final = " ".join(words)
        self.tokens: Final = words  # a list: the key sets' isdisjoint() takes any iterable
        self.padded: Final = f" {self.text} "
        self._elsewhere: bool | None = None
        self._cleaned: str | None = None
        self._kept: list[str] | None = None
        self._human: bool | None = None
        self._glad: bool | None = None
        self._scored: tuple[float, dict[str, int]] | None = None

    def asks_for_person(self, wants_human: Callable[[str, Collection[str]], bool]) -> bool:
        """``wants_human`` of this message (computed once)."""
        if self._human is None:
            self._human = wants_human(self.text, self.tokens)
        return self._human

    def cleaned(self) -> str:
        """Its text without the uses that are not outbursts (``NEUTRALISE``; with laughter,
        the ``BANTER`` words): each leaves a double space, which no pattern matches across
        (computed once)."""
        if self._cleaned is None:
            text, words = self.text, self.tokens
            if not NEUTRALISE.keys.isdisjoint(words):
                text = NEUTRALISE.sub("  ", text, words)
            if not BANTER.isdisjoint(words) and (
                laughs(self.raw) or has_emoji(self.raw, LAUGHTER_EMOJI)
            ):
                text = " ".join("" if word in BANTER else word for word in text.split(" "))
            self._cleaned = text
        return self._cleaned

    def kept(self) -> list[str]:
        """The words of ``cleaned`` (computed once)."""
        if self._kept is None:
            cleaned = self.cleaned()
            self._kept = self.tokens if cleaned == self.text else cleaned.split()
        return self._kept

    def scored(self) -> tuple[float, dict[str, int]]:
        """Its weak signals' score and the signals it was made of (``_signals.score`` of
        ``kept``; computed once)."""
        if self._scored is None:
            self._scored = score(FRUSTRATION, self.kept(), self.raw, self.elsewhere)
        return self._scored

    def elsewhere(self) -> bool:
        """Whether it is (also) about something other than mel (computed once)."""
        if self._elsewhere is None:
            tokens = tokens_of(self.tokens, self.text)
            self._elsewhere = ELSEWHERE.search(self.text, tokens, self.padded)
        return self._elsewhere


def is_frustrated(
    message: Message, wants_human: Callable[[str, Collection[str]], bool]
) -> bool | None:
    """Whether the last user message shows frustration with mel.

    ``None`` means "an outburst about something else": frustration only if the message
    repeats the couple's previous unanswered message (the caller knows the history).
    ``wants_human`` is the human-request detector, consulted only when an outburst needs
    tying to mel.
    """
    verdict = _by_rules(message, wants_human)
    if verdict and _only_limits(message, wants_human):
        verdict = False  # the reason for a request for a person, the score decides
    elif verdict:
        return True
    # no phrase rule: the weak signals' score (see ``_signals``)
    # (before the rules have set words aside, all of them: those can only take signals off,
    # and make a shorter message gain the weight of a short one)
    known = message._kept
    words, margin = (message.tokens, _SHORT) if known is None else (known, 0.0)
    if FRUSTRATION.bound(words, message.raw) + margin < FRUSTRATION.threshold:
        return verdict
    total, counts = message.scored()
    if total < FRUSTRATION.threshold or glad(FRUSTRATION, counts):
        return verdict
    if not message.asks_for_person(wants_human):
        return True
    # with a request for a person, only a higher score is frustration, and what mel cannot do
    # given as its reason does not count ("vc não consegue ler PDF né? tem alguém da equipe
    # que consiga importar?")
    rest = _without_limits(message)
    if rest is not None:
        total = rest.scored()[0]
    return total >= FRUSTRATION.threshold + FRUSTRATION.with_request or verdict


def _glad(message: Message) -> bool:
    """Whether the message praises or thanks with nothing sour (``_signals.glad``; computed
    once)."""
    if message._glad is None:
        message._glad = FRUSTRATION.may_be_glad(message.kept(), message.raw) and glad(
            FRUSTRATION, message.scored()[1]
        )
    return message._glad


def _only_limits(message: Message, wants_human: Callable[[str, Collection[str]], bool]) -> bool:
    """Whether the rules' only frustration is a calm statement of what mel cannot do, given
    as the reason for a request for a person in the same message (``LIMITS``)."""
    rest = _without_limits(message)
    return (
        rest is not None
        and message.asks_for_person(wants_human)
        and not _by_rules(rest, wants_human)
    )


def _without_limits(message: Message) -> Message | None:
    """The message without its calm statements of what mel cannot do (``LIMITS``), or None
    when it has none."""
    if not LIMITS.search(message.text, message.tokens, message.padded):
        return None
    return Message(message.raw, _without(LIMITS, message.text, message.tokens)[1])


def _without(rules: Rules, text: str, words: list[str]) -> tuple[str, list[str], str]:
    """``text`` without what ``rules`` match (a double space each), as ``Rules.search`` takes
    it: text, words, padded."""
    text = rules.sub("  ", text, words)
    return text, text.split(), f" {text} "


def _by_rules(message: Message, wants_human: Callable[[str, Collection[str]], bool]) -> bool | None:
    """``is_frustrated`` by the phrase rules of lexicon.toml [frustration.*]."""
    raw, text, tokens, padded = message.raw, message.text, message.tokens, message.padded
    emoji = has_emoji(raw, EMOJI)
    worded = not ANY_KEYS.isdisjoint(tokens)
    outburst = emoji and _has(raw, _OUTBURST_EMOJI)
    # sarcasm looks at the words left after ``NEUTRALISE`` ("vc não erra uma 👏" is praise)
    sarcasm_padded, sarcasm_tokens = padded, tokens
    if worded:
        cleaned, kept = message.cleaned(), message.kept()
        padded_kept = padded if kept is tokens else f" {cleaned} "
        sarcasm_padded, sarcasm_tokens = padded_kept, kept
        if AT_YOU.search(cleaned, kept, padded_kept):
            return True
        if _directed(message, cleaned, kept, padded_kept) and not _glad(message):
            return True  # (not "caralho mel, ficou perfeito esse gráfico 😍")
        if not outburst and OUTBURST.search(cleaned, kept, padded_kept):
            # a cry of dismay in a request for a person is no outburst ("misericórdia, fui
            # cobrado 2 vezes, quem do financeiro eu procuro?")
            outburst = not (
                not DISMAY.keys.isdisjoint(kept)
                and message.asks_for_person(wants_human)
                and not OUTBURST.search(*_without(DISMAY, cleaned, kept))
            )
        # praise aimed at mel with a wink is irony ("super útil vc hein", "q gênio 🙃")
        if (
            not PRAISE.keys.isdisjoint(kept)
            and not MEL.isdisjoint(tokens)
            and PARTNER.isdisjoint(tokens)  # "muito útil né amor 🙄": at the partner
            and (IRONY.search(padded, tokens) or (emoji and _winks(raw, tokens, padded)))
            and PRAISE.search(padded_kept, kept)
        ):
            return True
    if outburst and _glad(message):
        outburst = False  # an exclamation of joy: "meu deus, que app bom", "pqp, que rápido vc é"
    elif not outburst and (worded or emoji):
        # sarcasm: praise (or 👏) next to a failure, or praise applauded that is no cheer
        # ("grande ajuda 👏👏👏", not "parabéns, batemos a meta 👏"); the praise is the
        # sarcasm, so no gladness undoes it ("obrigado por apagar minha meta, ajudou demais")
        praised = PRAISE.search(padded, tokens)
        clapped = emoji and _has(raw, PRAISE_EMOJI)
        failed = FAILURE.search(sarcasm_padded, sarcasm_tokens)
        outburst = ((praised or clapped) and failed) or (
            praised and clapped and not CHEER.search(text, tokens, padded) and not _glad(message)
        )
    if outburst:
        # (what ties it to mel is looked for in the words left after ``NEUTRALISE``: not in
        # "vou te mandar o extrato, aquele app é uma porcaria")
        if (
            not message.elsewhere()
            or ABOUT_MEL.search(sarcasm_padded[1:-1], sarcasm_tokens, sarcasm_padded)
            # what mel did ("importei o extrato e duplicou tudo. de novo. pela terceira vez")
            or blamed(sarcasm_tokens, raw)
            or message.asks_for_person(wants_human)
        ):
            return True
        return None
    if raw == raw.lower():  # no capitals at all: the common case
        return False
    if not caps_abuse(raw) or CHEER.search(text, tokens, padded):
        return False
    # shouting: "!!!" (not about something else), or capitals that correct what mel was
    # told ("EU FALEI QUARENTA E DOIS REAIS, NÃO QUATROCENTOS E DOIS")
    if raw.count("!") >= 3:
        return not message.elsewhere() or ABOUT_MEL.search(text, tokens, padded)
    return CORRECTS.search(text, tokens, padded)
