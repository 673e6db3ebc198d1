"""ConversationGuard (spec 023): preempt the LLM on frustration, human requests and loops.

A pure domain service: no I/O, no state, no mutation of its input, deterministic, and it
never raises, whatever the messages hold (``None`` or non-string content, objects whose
attributes blow up, 10 000 characters, emoji, control characters, any
``past_turns_without_tool_call``). Detectors run in the spec's fixed priority:

1. **frustrated** — the last user message (``_frustration``);
2. **human-request** — the last user message (``_human``);
3. **loop** — ``past_turns_without_tool_call >= 2`` and the last three user messages
   similar (``_loop``).

Where spec 023 contradicts its own scenarios, the scenarios win:

(a) Its human-request regex ``/falar com (humano|pessoa|atendente|gente|alguém)/`` does
    not match its own example "quero falar com uma pessoa, não com bot". Articles and
    determiners are allowed between ("com uma pessoa", "com algum atendente", "com
    alguém de verdade"), and the request forms are widened well beyond "falar com".
(b) Its loop measure, whitespace-token Jaccard > 0.7, scores 0.33 / 0.5 / 0.25 on its own
    example ("qual o saldo?", "saldo?", "saldo mesmo?") and would never fire. Jaccard
    > 0.7 is kept as one path; the other compares content stems (stop words removed,
    accents stripped, light stemming) with the overlap coefficient > 0.7 — see
    ``_loop``. All three messages must be pairwise similar.

Further choices, from issue 13 rather than the spec: capitals are not anger (the spec's
caps heuristic counts only with "!!!": "BOA NOITE, GOSTARIA DE FALAR COM UM ATENDENTE" is
a request); swearing or negative words about something other than mel ("pqp, a enel me
cobrou 412, registra na luz", "taxa do lixo") are not frustration; asking whether mel is a
person or a robot is a human request; and loops are compared by meaning — see
``_frustration``, ``_human`` and ``_loop``. Frustration and requests for a person are
also read as weak hints with hand-set weights (``_signals``), for the phrasings no pattern
names. Every word list, phrase pattern, synonym group and weight is in
``guard/lexicon.toml``.

Behind the rules sits a small trained model (``_model``, weights in ``guard/model.json``,
made by ``python -m guard.train``): only when no rule fires may it call the last user message
frustrated or a request for a person, with the same canonical reply. It reads the message's
words and the rules' signals (``_features``), and only messages with something a rule looks at
(a key word, an emoji, "!!!", a weak signal): on the corpus and eight unseen batches, messages
with none of those gave it 2 right verdicts in 12,944, at twice the cost of each. It never
overrides a rule, and it never says loop. Nor is it asked when the signals the message may have
could not make it give a kind (``_model.may_call``): about half the messages that reach it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from guard._features import model_input, model_may_call
from guard._frustration import ANY_KEYS, CORRECTS, EMOJI, Message, is_frustrated
from guard._human import KEYS, talks_of_others, wants_human
from guard._loop import is_loop, repeats
from guard._model import model_kind
from guard._responses import (
    GUARD_RESPONSE_FRUSTRATED,
    GUARD_RESPONSE_HUMAN_REQUEST,
    GUARD_RESPONSE_LOOP,
)
from guard._signals import FRUSTRATION, HUMAN, loud
from guard._text import MAX_CHARS, clip, has_emoji, normalized_words
from guard._typos import MAX_WORDS as TYPO_MAX_WORDS
from guard._typos import MEL_WORDS, fix_typos

__all__ = ["ConversationGuard", "GuardInput", "GuardKind", "GuardVerdict", "MessageLike"]

GuardKind = Literal["frustrated", "loop", "human-request"]

#: The loop detector needs at least this many turns without a tool call.
LOOP_MIN_PAST_TURNS: Final = 2


class MessageLike(Protocol):
    """Anything with a role and a content, e.g. ``agent.ChatMessage``.

    Anything is tolerated (hence ``object``, which the compiled guard checks no further): a
    message whose role is not ``"user"`` (or an Enum member of that value) is skipped, a
    content that is not a string counts as empty.
    """

    @property
    def role(self) -> object: ...

    @property
    def content(self) -> object: ...


@dataclass(frozen=True, slots=True)
class GuardInput:
    """What the guard looks at: the conversation so far and the caller's loop signal."""

    messages: Sequence[MessageLike]
    past_turns_without_tool_call: int | None = None


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """The guard's decision. ``kind`` and ``response`` are set exactly when ``preempt``."""

    preempt: bool
    kind: GuardKind | None = None
    response: str | None = None

    def __post_init__(self) -> None:
        if self.preempt != (self.kind is not None) or self.preempt != (self.response is not None):
            raise ValueError("kind and response are set exactly when preempt is True")


_PASS: Final = GuardVerdict(preempt=False)
# Words some frustration or human-request rule needs: a message with none of them (and no
# emoji, no "!!!" or "???") can only be a loop.
_KEY_WORDS: Final = ANY_KEYS | KEYS
_F_QUIET: Final = FRUSTRATION.quiet_words
_H_QUIET: Final = HUMAN.quiet_words
_F_THRESHOLD: Final = FRUSTRATION.threshold
_H_THRESHOLD: Final = HUMAN.threshold
_FRUSTRATED: Final = GuardVerdict(True, "frustrated", GUARD_RESPONSE_FRUSTRATED)
_HUMAN_REQUEST: Final = GuardVerdict(True, "human-request", GUARD_RESPONSE_HUMAN_REQUEST)
_LOOP: Final = GuardVerdict(True, "loop", GUARD_RESPONSE_LOOP)


def _is_user(role: object) -> bool:
    if role == "user":
        return True
    value = getattr(role, "value", role)  # a plain Enum member
    return isinstance(value, str) and value.strip().lower() == "user"


def _user_text(message: MessageLike) -> str | None:
    """The text of a user message ("" when its content is not text), else None."""
    try:
        role = message.role
        if role != "user" and not _is_user(role):
            return None
        content = message.content
    except Exception:  # a message that cannot be read is not a user message
        return None
    if type(content) is str:
        return content
    return str.__str__(content) if isinstance(content, str) else ""


def _last_user_texts(messages: Sequence[MessageLike], limit: int) -> list[str]:
    """The texts of the last ``limit`` user messages, newest first."""
    texts: list[str] = []
    try:
        ordered = reversed(messages)
    except TypeError:  # an iterable that is not a sequence
        try:
            ordered = reversed(list(messages))
        except TypeError:  # not iterable at all: nothing to look at
            return texts
    # A sequence that fails half-way through iterating: keep what was read.
    with contextlib.suppress(Exception):
        for message in ordered:
            text = _user_text(message)
            if text is not None:
                texts.append(text)
                if len(texts) == limit:
                    break
    return texts


def _last_user_texts_fast(messages: Sequence[MessageLike], limit: int) -> list[str]:
    """``_last_user_texts`` for well-formed messages (the common case), else the same
    careful walk."""
    texts: list[str] = []
    try:
        if limit == 1:  # the common case: the conversation ends with the user's message
            last = messages[-1]
            if last.role == "user":
                content = last.content
                if type(content) is str:
                    return [content]
        for message in reversed(messages):
            if message.role == "user":
                content = message.content
                if type(content) is not str:
                    return _last_user_texts(messages, limit)
                texts.append(content)
                if len(texts) == limit:
                    break
            elif _is_user(message.role):
                return _last_user_texts(messages, limit)
    except Exception:  # anything unusual: take the careful path
        return _last_user_texts(messages, limit)
    return texts


def _by_model(raw: str, plain: list[str], message: Message | None) -> GuardVerdict:
    """The model's verdict where no rule fired (the rules' own: same kinds, same replies).
    Like the rules, it never calls praise or thanks with nothing sour frustration, nor talk
    the rules set aside as no request (someone else's plan or advice, curiosity) a request
    for a person."""
    if not model_may_call(raw, plain, plain if message is None else message.kept()):
        return _PASS
    words, glad = model_input(raw, plain, message)
    kind = model_kind(words)
    if kind == "human-request":
        return _PASS if talks_of_others(" ".join(plain), plain) else _HUMAN_REQUEST
    return _FRUSTRATED if kind == "frustrated" and not glad else _PASS


class ConversationGuard:
    """The guard. Stateless: call ``ConversationGuard.evaluate(...)`` directly."""

    __slots__ = ()

    @staticmethod
    def evaluate(guard_input: GuardInput) -> GuardVerdict:
        """Decide whether to answer this turn with a canonical reply instead of the LLM."""
        past = getattr(guard_input, "past_turns_without_tool_call", None)
        turns = past if isinstance(past, int) else 0
        messages = getattr(guard_input, "messages", ())
        loop_on = turns >= LOOP_MIN_PAST_TURNS
        texts = _last_user_texts_fast(messages, 3 if loop_on else 1)
        if not texts:
            return _PASS
        raw = texts[0]
        if len(raw) > MAX_CHARS:
            raw = clip(raw)
        # the model reads the words as normalised, before typo fixes (as it was trained)
        words = plain = normalized_words(raw)
        if len(words) <= TYPO_MAX_WORDS or not MEL_WORDS.isdisjoint(words):
            words = fix_typos(words)  # "esse bot nao fucniona", "falr com atendnte"
        if (
            _KEY_WORDS.isdisjoint(words)
            # no "!!!", "???" or emoji a score counts whatever the words (then words the
            # scores filed as quiet need no bound)
            and not loud(raw)
            # capitals that correct mel need no "!!!" ("PARA DE ME MANDAR ESSE MENU")
            and (CORRECTS.keys.isdisjoint(words) or raw == raw.lower())
            and not has_emoji(raw, EMOJI)
            and (_F_QUIET.issuperset(words) or FRUSTRATION.bound(words, raw) < _F_THRESHOLD)
            and (_H_QUIET.issuperset(words) or HUMAN.bound(words, "") < _H_THRESHOLD)
        ):
            # no word, emoji or shouting any detector looks at: only a loop is possible
            if loop_on and len(texts) == 3 and is_loop(" ".join(words), texts[1], texts[2]):
                return _LOOP
            return _PASS
        message = Message(raw, words)
        frustrated = is_frustrated(message, wants_human)
        if frustrated is None and turns >= 1:
            # an outburst about something else, but the couple is repeating a message mel
            # left unanswered: it is at mel
            if len(texts) < 2:
                texts = _last_user_texts_fast(messages, 2)
            frustrated = len(texts) > 1 and repeats(message.text, texts[1])
        if frustrated:
            return _FRUSTRATED
        if message.asks_for_person(wants_human):
            return _HUMAN_REQUEST
        if loop_on and len(texts) == 3 and is_loop(message.text, texts[1], texts[2]):
            return _LOOP
        # no rule fired: the model may still
        return _by_model(raw, plain, message if words == plain else None)
