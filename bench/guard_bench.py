"""ConversationGuard benchmark: evaluations per second for typical messages, next to the
cost of the LLM round trip a preempt saves, and the current guard against v1.

``bench/guard_v1`` is a frozen copy of the first guard; both are timed on the same inputs in
the same run, so the v2 / v1 ratio holds even on a noisy machine. v1 runs as pure Python; v2
as ``make`` builds it (compiled with mypyc, ``guard.native``) unless ``MEL_GUARD_PURE`` is set:
the table says which.

The machine is shared and noisy, so besides absolute figures (best of a few rounds, as
``timeit`` does) the table gives ratios against baselines measured in the same run: a
trivial Python function call and ``str.lower()`` over the same messages.

Run it with ``python -m bench.guard_bench`` (``make bench`` runs every benchmark).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from bench import guard_v1
from guard import COMPILED, ConversationGuard, GuardInput, _loop
from guard.eval import load_corpus

T = TypeVar("T")

#: An assumption, not a measurement: a typical chat-completions round trip.
ASSUMED_LLM_ROUND_TRIP_S = 0.800
#: The issue's goal for a typical evaluation, in µs.
GOAL_US = 10
ROUNDS = 5
ROUND_SECONDS = 0.12


@dataclass(frozen=True, slots=True)
class _Msg:
    role: str
    content: str


def _user(text: str) -> _Msg:
    return _Msg("user", text)


def _bot(text: str) -> _Msg:
    return _Msg("assistant", text)


def _conversation(*texts: str) -> list[_Msg]:
    """User messages with an assistant reply between each two, oldest first."""
    out: list[_Msg] = []
    for text in texts:
        if out:
            out.append(_bot("Entendi! Deixa eu ver aqui."))
        out.append(_user(text))
    return out


# What a gateway sees most: ordinary finance talk.
ORDINARY_INPUTS = [
    GuardInput([_user("qual o total do mês?")]),
    GuardInput([_user("gastei 45 no ifood ontem, anota aí")]),
    GuardInput([_user("Quanto falta pra meta da viagem?")], 0),
    GuardInput([_user("GASTEI 200 NO POSTO")]),
    GuardInput(_conversation("e a luz?", "e o mercado?", "e o aluguel?"), 2),
    GuardInput([_user("mel anota aí cento e vinte de farmácia")]),
]
# Less often: negative words, other people and other companies' support that are not the
# kinds (v1's and v2's hard negatives).
HARD_NEGATIVE_INPUTS = [
    GuardInput([_user("paguei a taxa do lixo, 80 reais")]),
    GuardInput([_user("o cartão não funciona no mercado")]),
    GuardInput([_user("vou falar com a minha esposa e te aviso kkk")]),
    GuardInput([_user("pqp, a enel me cobrou 412,37 esse mes, registra na luz")]),
    GuardInput([_user("a moça do suporte da vivo disse q vai estornar os 49,90")]),
]
NONE_INPUTS = ORDINARY_INPUTS + HARD_NEGATIVE_INPUTS
FRUSTRATED_INPUTS = [
    GuardInput([_user("esse bot é uma porra, não funciona NADA")]),
    GuardInput([_user("vc não serve pra nada")]),
    GuardInput([_user("que raiva desse robô")]),
    GuardInput([_user("muito útil vc hein... só q não 🙃")]),
]
HUMAN_INPUTS = [
    GuardInput([_user("quero falar com uma pessoa, não com bot")]),
    GuardInput([_user("tem algum atendente?")]),
    GuardInput([_user("me passa pra um humano")]),
    GuardInput([_user("qual o 0800 de vcs?")]),
]
LOOP_INPUTS = [
    GuardInput(_conversation("qual o saldo?", "saldo?", "saldo mesmo?"), 2),
    GuardInput(
        _conversation(
            "quanto gastei em mercado", "quanto eu gastei no mercado?", "mercado quanto gastei"
        ),
        3,
    ),
    GuardInput(
        _conversation(
            "quanto gastamos de farmacia esse mes?",
            "qual foi o total com remedio?",
            "farmacia deu quanto ate agora",
        ),
        2,
    ),
]
#: The typical mix: mostly ordinary messages (≈ 60 %), hard negatives and the three kinds
#: now and then.
MIX = (
    ORDINARY_INPUTS * 8
    + HARD_NEGATIVE_INPUTS * 2
    + FRUSTRATED_INPUTS * 2
    + HUMAN_INPUTS * 2
    + LOOP_INPUTS * 2
)
#: Another assumption: the typical mix gives the three kinds 28 % of the turns, far more than a
#: guard that preempts them should meet; here 90 % ordinary, 5 % hard negatives, 5 % the kinds.
MOSTLY_ORDINARY_MIX = (
    ORDINARY_INPUTS * 30 + HARD_NEGATIVE_INPUTS * 2 + FRUSTRATED_INPUTS + HUMAN_INPUTS + LOOP_INPUTS
)
WORST_CASE = [GuardInput([_user("gastei muito esse mês com mercado e farmácia, " * 220)], 2)]
#: The guard's labelled corpus: text written to be hard for it, by others and blind, and
#: longer than the mix's (a median of 51 characters to the last message against 30).
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "guard_corpus.jsonl"
CORPUS_STEP = 10


def corpus_sample() -> list[GuardInput]:
    """Every ``CORPUS_STEP``-th case of the corpus, as the guard is asked about it."""
    return [
        GuardInput(_conversation(*case.messages), case.past_turns)
        for case in load_corpus(CORPUS)[::CORPUS_STEP]
    ]


def _per_call_seconds(function: Callable[[T], object], items: Sequence[T]) -> float:
    """Best-of-``ROUNDS`` seconds per call of ``function`` over ``items``."""
    start = time.perf_counter()
    for item in items:
        function(item)
    once = max(time.perf_counter() - start, 1e-9)
    loops = max(1, int(ROUND_SECONDS / once))
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(loops):
            for item in items:
                function(item)
        best = min(best, time.perf_counter() - start)
    return best / (loops * len(items))


def _last_text(guard_input: GuardInput) -> str:
    return guard_input.messages[-1].content or ""


def _noop(value: object) -> object:
    return value


def _as_v1(inputs: Sequence[GuardInput]) -> list[guard_v1.GuardInput]:
    return [guard_v1.GuardInput(i.messages, i.past_turns_without_tool_call) for i in inputs]


def _paired_seconds(
    first: Callable[[T], object],
    first_items: Sequence[T],
    second: Callable[[T], object],
    second_items: Sequence[T],
) -> tuple[float, float]:
    """Best-of seconds per call of two functions, rounds interleaved so that both see the
    same machine noise."""
    best = [float("inf"), float("inf")]
    pairs = ((first, first_items), (second, second_items))
    for function, items in pairs:  # warm caches and calibrate
        for item in items:
            function(item)
    start = time.perf_counter()
    for item in second_items:
        second(item)
    loops = max(1, int(ROUND_SECONDS / max(time.perf_counter() - start, 1e-9)))
    for _ in range(ROUNDS * 2):
        for index, (function, items) in enumerate(pairs):
            start = time.perf_counter()
            for _ in range(loops):
                for item in items:
                    function(item)
            best[index] = min(best[index], time.perf_counter() - start)
    return best[0] / (loops * len(first_items)), best[1] / (loops * len(second_items))


def _timing(label: str, inputs: Sequence[GuardInput]) -> tuple[tuple[str, str], float]:
    """One row: µs per evaluation for v1 and the current guard, and their ratio (and the
    current guard's seconds per evaluation)."""
    v1_s, v2_s = _paired_seconds(
        guard_v1.ConversationGuard.evaluate, _as_v1(inputs), ConversationGuard.evaluate, inputs
    )
    row = (label, f"v1 {v1_s * 1e6:6.2f} µs   v2 {v2_s * 1e6:6.2f} µs   v2/v1 {v2_s / v1_s:4.2f}")
    return row, v2_s


def _clear_caches() -> None:
    guard_v1._loop._stem.cache_clear()
    _loop.meaning.cache_clear()
    _loop._root.cache_clear()
    _loop._normalized.cache_clear()
    _loop._topics_conflict.cache_clear()


def _cold_loop_row() -> tuple[str, str]:
    """The loop inputs with every cache emptied before each evaluation (the cost of
    emptying them measured alone and taken off)."""

    def v1_cold(guard_input: guard_v1.GuardInput) -> object:
        _clear_caches()
        return guard_v1.ConversationGuard.evaluate(guard_input)

    def v2_cold(guard_input: GuardInput) -> object:
        _clear_caches()
        return ConversationGuard.evaluate(guard_input)

    clear_s = _per_call_seconds(lambda _: _clear_caches(), LOOP_INPUTS)
    v1_s, v2_s = _paired_seconds(v1_cold, _as_v1(LOOP_INPUTS), v2_cold, LOOP_INPUTS)
    v1_s, v2_s = v1_s - clear_s, v2_s - clear_s
    return (
        "  loop, caches emptied every evaluation",
        f"v1 {v1_s * 1e6:6.2f} µs   v2 {v2_s * 1e6:6.2f} µs   v2/v1 {v2_s / v1_s:4.2f}",
    )


def run() -> list[tuple[str, str]]:
    """Measure, and return the table rows as (label, value) pairs."""
    texts = [_last_text(i) for i in MIX]
    mix_row, mix_s = _timing("typical mix: µs per evaluation (same inputs, same run)", MIX)
    call_s = _per_call_seconds(_noop, MIX)
    lower_s = _per_call_seconds(str.lower, texts)
    rows = [
        ("v2 runs", "compiled with mypyc (guard.native)" if COMPILED else "as pure Python"),
        mix_row,
        ("typical mix, current guard", f"{1 / mix_s:,.0f} evaluations/s"),
    ]
    for label, inputs in (
        ("mix of 90 % ordinary messages (an assumption)", MOSTLY_ORDINARY_MIX),
        ("  ordinary", ORDINARY_INPUTS),
        ("  hard negatives", HARD_NEGATIVE_INPUTS),
        ("  frustrated", FRUSTRATED_INPUTS),
        ("  human-request", HUMAN_INPUTS),
        ("  loop (3 user turns, past_turns ≥ 2)", LOOP_INPUTS),
        ("  10 000 characters (clipped)", WORST_CASE),
        (f"labelled corpus, every {CORPUS_STEP}th case (written to be hard)", corpus_sample()),
    ):
        rows.append(_timing(label, inputs)[0])
    rows.append(_cold_loop_row())
    verdict = "met" if mix_s <= GOAL_US * 1e-6 else "NOT met"
    rows += [
        (f"goal ≤ {GOAL_US} µs per evaluation on the typical mix", verdict),
        ("ratio guard / trivial Python call (same run)", f"{mix_s / call_s:.0f}x"),
        ("ratio guard / str.lower() of the message (same run)", f"{mix_s / lower_s:.0f}x"),
        (
            f"LLM round trip saved per preempt (assumed {ASSUMED_LLM_ROUND_TRIP_S * 1000:.0f} ms)",
            f"≈ {ASSUMED_LLM_ROUND_TRIP_S / mix_s:,.0f} guard evaluations",
        ),
    ]
    return rows


def main() -> None:
    """Print the guard's table."""
    rows = run()
    width = max(len(label) for label, _ in rows)
    print("\n== guard ==")
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


if __name__ == "__main__":
    main()
