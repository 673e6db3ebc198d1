"""ConversationGuard (spec 023): a pure, deterministic pre-LLM guard for mel.

    >>> from guard import ConversationGuard, GuardInput
    >>> class Msg:
    ...     role, content = "user", "quero falar com uma pessoa, não com bot"
    >>> ConversationGuard.evaluate(GuardInput(messages=[Msg()])).kind
    'human-request'

See ``guard._guard`` for the choices made where the spec contradicts its scenarios, and
``python -m guard.eval CORPUS.jsonl`` to score the guard on a labelled corpus.
"""

from guard._guard import ConversationGuard, GuardInput, GuardKind, GuardVerdict, MessageLike
from guard._responses import (
    GUARD_RESPONSE_FRUSTRATED,
    GUARD_RESPONSE_HUMAN_REQUEST,
    GUARD_RESPONSE_LOOP,
)

__all__ = [
    "GUARD_RESPONSE_FRUSTRATED",
    "GUARD_RESPONSE_HUMAN_REQUEST",
    "GUARD_RESPONSE_LOOP",
    "ConversationGuard",
    "GuardInput",
    "GuardKind",
    "GuardVerdict",
    "MessageLike",
]
