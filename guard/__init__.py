"""ConversationGuard (spec 023): a pure, deterministic pre-LLM guard for mel.

    >>> from guard import ConversationGuard, GuardInput
    >>> class Msg:
    ...     role, content = "user", "quero falar com uma pessoa, não com bot"
    >>> ConversationGuard.evaluate(GuardInput(messages=[Msg()])).kind
    'human-request'

See ``guard._guard`` for the choices made where the spec contradicts its scenarios,
``guard/lexicon.toml`` for every word list, phrase pattern and synonym group (and how to
extend them), ``accepts_human_offer`` for the yes to the loop reply's offer of a person, and
``python -m guard.eval CORPUS.jsonl`` to score the guard on a labelled corpus.

Behind the rules sits a small trained model (``guard._model``, ``guard/model.json``). It is
asked only when no rule fires on a message that holds something a rule looks at, and it may
then say frustrated or human-request, with the same reply; it reads the words and the rules'
signals (``guard._features``), and never takes back what a rule set aside. After adding
corpus lines, retrain it with ``python -m guard.train tests/data/guard_corpus.jsonl``.

``make`` compiles the guard with mypyc (``guard.native``): the same verdicts in about half
the time. ``COMPILED`` says whether this process runs that build; it does only when it was
built from the sources as they are, else the guard runs as the Python it is written in.
"""

from guard.native import use_compiled as _use_compiled

#: Whether the guard runs compiled (``guard.native``); decided before any module is imported.
COMPILED: bool = _use_compiled(__path__)

# (below the choice: the modules are imported from the build or from the sources)
from guard._asks import asks_for_person  # noqa: E402
from guard._guard import (  # noqa: E402
    ConversationGuard,
    GuardInput,
    GuardKind,
    GuardVerdict,
    MessageLike,
)
from guard._offer import accepts_human_offer  # noqa: E402
from guard._responses import (  # noqa: E402
    GUARD_RESPONSE_FRUSTRATED,
    GUARD_RESPONSE_HUMAN_REQUEST,
    GUARD_RESPONSE_LOOP,
)

__all__ = [
    "COMPILED",
    "GUARD_RESPONSE_FRUSTRATED",
    "GUARD_RESPONSE_HUMAN_REQUEST",
    "GUARD_RESPONSE_LOOP",
    "ConversationGuard",
    "GuardInput",
    "GuardKind",
    "GuardVerdict",
    "MessageLike",
    "accepts_human_offer",
    "asks_for_person",
]
