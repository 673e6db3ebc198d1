"""Frustration: the couple is angry or fed up with mel.

What the words are lives in ``guard/lexicon.toml`` ([frustration.*]); here is only how they
combine, on the normalised last user message (``_text.normalize``) plus its raw text (for
capitals, "!" and emoji):

1. ``at_you`` — insults in the second person ("vai se ferrar",
   "vsf"), complaints that can only be about the conversation ("não serve pra nada",
   "quantas vezes vou ter que ..."), giving up on mel ("vou voltar pra planilha", "1
   estrela na play store", "cancela minha assinatura"), sarcasm markers ("só que não",
   "obrigado por nada") — is frustration, whatever else the message says;
2. ``directed`` — a negative word aimed at mel ("que bot burro", "lixo de app", "vc é
   muito lento") — is frustration;
3. an ``outburst`` (profanity, "vsf", "lixo", "não funciona", "que saco", 🤬 🙄 🙃 ...) or sarcasm
   (``praise`` and ``failure`` together: "parabéns mel 👏 conseguiu errar a fatura
   inteira") is frustration unless the message is about something else (``elsewhere``:
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
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Final

from guard._data import string
from guard._lexicon import Terms, rules, tokens_of

__all__ = ["ANY_KEYS", "EMOJI", "Message", "caps_abuse", "is_frustrated"]

AT_YOU: Final = rules("frustration.at_you")
DIRECTED: Final = rules("frustration.directed")
OUTBURST: Final = rules("frustration.outburst")
NEUTRALISE: Final = rules("frustration.neutralise")
ELSEWHERE: Final = rules("frustration.elsewhere")
ABOUT_MEL: Final = rules("frustration.about_mel")
PRAISE: Final = Terms.at("frustration.sarcasm.praise")
FAILURE: Final = Terms.at("frustration.sarcasm.failure")
CHEER: Final = rules("frustration.cheer")
ANGRY_EMOJI: Final = frozenset(string("frustration.emoji.angry"))
CROSS_EMOJI: Final = frozenset(string("frustration.emoji.cross"))
PRAISE_EMOJI: Final = frozenset(string("frustration.emoji.praise"))
_OUTBURST_EMOJI: Final = ANGRY_EMOJI | CROSS_EMOJI
#: Every emoji the detector looks at.
EMOJI: Final = _OUTBURST_EMOJI | PRAISE_EMOJI

# A message with none of these words can only be frustrated through emoji or capitals.
# (Sarcasm needs a praise word or 👏 — the emoji are checked apart.)
ANY_KEYS: Final = AT_YOU.keys | DIRECTED.keys | OUTBURST.keys | PRAISE.keys


def caps_abuse(raw: str) -> bool:
    """The spec's heuristic: more than 5 chars and over half of the non-space ones upper-case."""
    if len(raw) <= 5:
        return False
    non_space = len(raw) - raw.count(" ")
    return non_space > 0 and sum(map(str.isupper, raw)) / non_space > 0.5


def _has(raw: str, emoji: frozenset[str]) -> bool:
    return not emoji.isdisjoint(raw)


class Message:
    """The last user message, the ways the detectors look at it."""

    __slots__ = ("padded", "raw", "text", "tokens")

    def __init__(self, raw: str, words: list[str]) -> None:
        self.raw: Final = raw
        self.text: Final = " ".join(words)
        self.tokens: Final = words  # a list: the key sets' isdisjoint() takes any iterable
        self.padded: Final = f" {self.text} "

    def elsewhere(self) -> bool:
        """Whether it is (also) about something other than mel."""
        return ELSEWHERE.search(self.text, tokens_of(self.tokens, self.text), self.padded)


def is_frustrated(
    message: Message, wants_human: Callable[[str, Collection[str]], bool]
) -> bool | None:
    """Whether the last user message shows frustration with mel.

    ``None`` means "an outburst about something else": frustration only if the message
    repeats the couple's previous unanswered message (the caller knows the history).
    ``wants_human`` is the human-request detector, consulted only when an outburst needs
    tying to mel.
    """
    raw, text, tokens, padded = message.raw, message.text, message.tokens, message.padded
    emoji = not raw.isascii() and not EMOJI.isdisjoint(raw)
    worded = not ANY_KEYS.isdisjoint(tokens)
    outburst = emoji and _has(raw, _OUTBURST_EMOJI)
    if worded:
        cleaned, kept, padded_kept = text, tokens, padded
        if not NEUTRALISE.keys.isdisjoint(tokens):
            # removed phrases leave a double space, which no pattern matches across
            cleaned = NEUTRALISE.sub("  ", text, tokens)
            kept, padded_kept = cleaned.split(), f" {cleaned} "
        if AT_YOU.search(cleaned, kept, padded_kept) or DIRECTED.search(cleaned, kept, padded_kept):
            return True
        outburst = outburst or OUTBURST.search(cleaned, kept, padded_kept)
    if not outburst and (worded or emoji):
        # sarcasm: praise (or 👏) next to a failure
        outburst = (
            PRAISE.search(padded, tokens) or (emoji and _has(raw, PRAISE_EMOJI))
        ) and FAILURE.search(padded, tokens)
    if outburst:
        if (
            not message.elsewhere()
            or ABOUT_MEL.search(text, tokens, padded)
            or wants_human(text, tokens)
        ):
            return True
        return None
    if raw == raw.lower():  # no capitals at all: the common case
        return False
    return (
        raw.count("!") >= 3
        and caps_abuse(raw)
        and not message.elsewhere()
        and not CHEER.search(text, tokens, padded)
    )
