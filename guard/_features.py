"""What the guard's fallback model (``guard._model``) reads of a message, shared by the
guard at run time and by ``guard.train``."""

from __future__ import annotations

from typing import Final

from guard._frustration import Message
from guard._model import may_call, signal_bound
from guard._signals import FRUSTRATION, glad

__all__ = ["SIGNAL", "model_input", "model_may_call"]

#: How a signal's token starts (no normalised word has it).
SIGNAL: Final = "§"
#: Signals the model does not read: capitals are not anger (the rules decide when they are),
#: and a model that read them learnt "ESTOU APENAS TESTANDO O APLICATIVO" as frustration.
UNREAD: Final = frozenset(("capitals",))


def model_input(
    raw: str, words: list[str], message: Message | None = None
) -> tuple[list[str], bool]:
    """What the model reads of a message: its normalised ``words`` (before typo fixes) and a
    ``§name`` token per signal of the rules' frustration score (``Message.scored``) but the
    ``UNREAD`` ones; and whether those signals are praise or thanks with nothing sour
    (``guard._signals.glad``: the rules never call such a message frustrated). ``message``,
    when given, is the guard's reading of the same words (what it computed is reused)."""
    if message is None:
        message = Message(raw, words)
    counts = message.scored()[1]
    signals = [SIGNAL + name for name in sorted(counts) if name not in UNREAD]
    return words + signals, glad(FRUSTRATION, counts)


def model_may_call(raw: str, words: list[str], scored: list[str]) -> bool:
    """Whether the model could give ``model_input(raw, words)`` a kind, from the signals
    the message may have (``Score.possible`` of ``scored``, the words its score reads, or
    more) rather than those it has: when not, they need no reading."""
    possible = FRUSTRATION.possible(scored, raw)
    bound = _BOUNDS.get(possible)
    if bound is None:
        if len(_BOUNDS) > _BOUNDS_LIMIT:
            _BOUNDS.clear()
        tokens = [SIGNAL + name for name in possible if name not in UNREAD]
        bound = _BOUNDS[possible] = signal_bound(tokens)
    return may_call(words, bound)


_BOUNDS: Final[dict[frozenset[str], tuple[float, float, int]]] = {}
_BOUNDS_LIMIT: Final = 4096
