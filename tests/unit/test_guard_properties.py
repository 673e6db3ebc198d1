"""Property tests: the guard is total, deterministic, pure, and its verdicts consistent."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard import (
    GUARD_RESPONSE_FRUSTRATED,
    GUARD_RESPONSE_HUMAN_REQUEST,
    GUARD_RESPONSE_LOOP,
    ConversationGuard,
    GuardInput,
    GuardVerdict,
    _frustration,
    _human,
    _loop,
    _text,
)
from guard._lexicon import Pattern, Rules, tokens_of

RESPONSES = {
    "frustrated": GUARD_RESPONSE_FRUSTRATED,
    "human-request": GUARD_RESPONSE_HUMAN_REQUEST,
    "loop": GUARD_RESPONSE_LOOP,
}


@dataclass(frozen=True, slots=True)
class Msg:
    role: object
    content: object


class MutableMsg:
    def __init__(self, role: object, content: object) -> None:
        self.role = role
        self.content = content


GATED_RULES: list[Rules] = [
    _frustration.AT_YOU,
    _frustration.DIRECTED,
    _frustration.OUTBURST,
    _frustration.NEUTRALISE,
    _frustration.ELSEWHERE,
    _frustration.ABOUT_MEL,
]
PATTERNS: list[Pattern] = [p for rules in GATED_RULES for p in rules.patterns]
PATTERNS += list(_human.RULES)

COMMON_WORDS = (
    "nao que o a um uma com pra de do da me vai ta to tem quero falar voce vc isso "
    "saldo fatura gastei 50 reais mercado mesmo de novo ja maio junho 55"
)
# Words the detectors care about, so generated texts actually reach the rules.
LEXICON = sorted(
    frozenset().union(*(rules.keys for rules in GATED_RULES))
    | frozenset().union(*(p.keys | p.requires for p in PATTERNS))
    | _frustration.ELSEWHERE.terms.keys
    | _human.KEYS
    | frozenset(COMMON_WORDS.split())
)
lexicon_text = st.lists(st.sampled_from(LEXICON), max_size=8).map(" ".join)
any_text = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200),
    lexicon_text,
    lexicon_text.map(str.upper),
    st.builds(
        lambda n, s: s * n, st.integers(0, 2_000), st.sampled_from(["a", "😡", "porra ", "\x00"])
    ),
)
contents = st.one_of(any_text, st.none(), st.integers(), st.binary(max_size=10), st.just(["x"]))
roles = st.one_of(
    st.sampled_from(["user", "assistant", "system", "tool", "USER", " user"]), st.text(max_size=8)
)
messages = st.lists(st.builds(Msg, roles, contents), max_size=8)
past_turns = st.one_of(st.none(), st.integers(-(10**12), 10**12))


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(messages, past_turns)
def test_never_raises_and_verdicts_are_consistent(msgs: list[Msg], past: int | None) -> None:
    verdict = ConversationGuard.evaluate(GuardInput(msgs, past))
    assert isinstance(verdict, GuardVerdict)
    assert verdict.preempt == (verdict.kind is not None) == (verdict.response is not None)
    if verdict.kind is not None:
        assert verdict.response == RESPONSES[verdict.kind]


@given(messages, past_turns)
def test_deterministic(msgs: list[Msg], past: int | None) -> None:
    first = ConversationGuard.evaluate(GuardInput(msgs, past))
    assert ConversationGuard.evaluate(GuardInput(list(msgs), past)) == first
    assert ConversationGuard.evaluate(GuardInput(tuple(msgs), past)) == first


@given(st.lists(st.tuples(roles, contents), max_size=8), past_turns)
def test_inputs_are_not_mutated(pairs: list[tuple[object, object]], past: int | None) -> None:
    msgs = [MutableMsg(role, content) for role, content in pairs]
    snapshot = [(id(m), m.role, m.content) for m in msgs]
    ConversationGuard.evaluate(GuardInput(msgs, past))
    assert [(id(m), m.role, m.content) for m in msgs] == snapshot


@given(st.lists(any_text, min_size=3, max_size=6), st.one_of(st.none(), st.integers(-100, 1)))
def test_loop_never_fires_below_two_past_turns(texts: list[str], past: int | None) -> None:
    msgs = [Msg("user", t) for t in texts]
    assert ConversationGuard.evaluate(GuardInput(msgs, past)).kind != "loop"


@given(st.lists(lexicon_text, min_size=3, max_size=3))
def test_same_message_three_times_is_a_loop_only_with_content(texts: list[str]) -> None:
    """Three copies of one message are a loop iff it has content and nothing outranks it."""
    msgs = [Msg("user", texts[0])] * 3
    verdict = ConversationGuard.evaluate(GuardInput(msgs, 2))
    if _loop.has_content(_text.normalize(texts[0])):
        assert verdict.kind is not None
    else:
        assert verdict.kind != "loop"


@given(any_text)
def test_normalize_is_idempotent_and_canonical(text: str) -> None:
    once = _text.normalize(text)
    assert _text.normalize(once) == once
    assert re.fullmatch(r"(?:[a-z0-9]+(?: [a-z0-9]+)*)?", once)


@given(st.one_of(lexicon_text, any_text))
def test_every_rule_needs_one_of_its_keys(text: str) -> None:
    """The key gates never hide a match: a pattern only matches text holding a key."""
    norm = _text.normalize(text)
    tokens = tokens_of(norm.split(), norm)
    for pattern in PATTERNS:
        if pattern.regex.search(norm):
            assert pattern.keys & tokens, (pattern.regex.pattern[:80], norm)
            if pattern.requires and pattern.necessary:
                assert pattern.requires & tokens, (pattern.regex.pattern[:80], norm)
    if _human.BARE.fullmatch(norm):
        assert _human.KEYS & tokens, norm
        assert _human.BARE_KEYS & tokens, norm
    if any(p.regex.search(norm) for p in _human.RULES):
        assert _human.KEYS & tokens, norm


@given(st.lists(lexicon_text, min_size=2, max_size=2))
def test_loop_similarity_is_symmetric(texts: list[str]) -> None:
    a, b = (_loop.meaning(_text.normalize(t)) for t in texts)
    assert _loop.similar(a, b) == _loop.similar(b, a)
    assert _loop.similar(a, a) == a.content


@given(any_text)
def test_a_message_is_never_frustrated_only_by_a_neutralised_phrase(text: str) -> None:
    """Removing neutralised phrases never creates words that were not in the message."""
    norm = _text.normalize(text)
    cleaned = _frustration.NEUTRALISE.sub("  ", norm, tokens_of(norm.split(), norm))
    assert set(cleaned.split()) <= set(norm.split())
