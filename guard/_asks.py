"""Whether one message asks for a person, whatever else it does (the gateway needs it when
the guard's verdict is ``frustrated``: spec 023's priority answers the anger first, and the
request must not be lost)."""

from __future__ import annotations

from guard._frustration import Message
from guard._human import wants_human
from guard._text import clip, normalized_words
from guard._typos import MAX_WORDS as TYPO_MAX_WORDS
from guard._typos import MEL_WORDS, fix_typos

__all__ = ["asks_for_person"]


def asks_for_person(text: object) -> bool:
    """True when ``text`` asks to talk to a person (the guard's human-request detector on
    one message, without the priority of frustration). Never raises."""
    if not isinstance(text, str) or not text.strip():
        return False
    words = normalized_words(clip(text))
    if len(words) <= TYPO_MAX_WORDS or not MEL_WORDS.isdisjoint(words):
        words = fix_typos(words)
    message = Message(clip(text), words)
    return wants_human(message.text, message.tokens)
