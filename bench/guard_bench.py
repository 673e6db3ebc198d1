"""ConversationGuard benchmark: evaluations per second for typical messages, next to the
cost of the LLM round trip a preempt saves, and the current guard against v1.

``bench/guard_v1`` is a frozen copy of the first guard; both are timed on the same inputs in
the same run, so the v2 / v1 ratio holds even on a noisy machine.

The machine is shared and noisy, so besides absolute figures (best of a few rounds, as
``timeit`` does) the table gives ratios against baselines measured in the same run: a
trivial Python function call and ``str.lower()`` over the same messages.

Run it with ``python -m bench.guard_bench`` (``make bench`` runs every benchmark).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from bench import guard_v1
from guard import ConversationGuard, GuardInput

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


# What a gateway sees most: ordinary finance talk, some of it the hard negatives.
NONE_INPUTS = [
    GuardInput([_user("qual o total do mês?")]),
    GuardInput([_user("gastei 45 no ifood ontem, anota aí")]),
    GuardInput([_user("Quanto falta pra meta da viagem?")], 0),
    GuardInput([_user("paguei a taxa do lixo, 80 reais")]),
    GuardInput([_user("o cartão não funciona no mercado")]),
    GuardInput([_user("GASTEI 200 NO POSTO")]),
    GuardInput([_user("vou falar com a minha esposa e te aviso kkk")]),
    GuardInput(_conversation("e a luz?", "e o mercado?", "e o aluguel?"), 2),
]
FRUSTRATED_INPUTS = [
    GuardInput([_user("esse bot é uma porra, não funciona NADA")]),
    GuardInput([_user("vc não serve pra nada")]),
    GuardInput([_user("que raiva desse robô")]),
]
HUMAN_INPUTS = [
    GuardInput([_user("quero falar com uma pessoa, não com bot")]),
    GuardInput([_user("tem algum atendente?")]),
    GuardInput([_user("me passa pra um humano")]),
]
LOOP_INPUTS = [
    GuardInput(_conversation("qual o saldo?", "saldo?", "saldo mesmo?"), 2),
    GuardInput(
        _conversation(
            "quanto gastei em mercado", "quanto eu gastei no mercado?", "mercado quanto gastei"
        ),
        3,
    ),
]
#: The typical mix: mostly ordinary messages, the three kinds now and then.
MIX = NONE_INPUTS * 6 + FRUSTRATED_INPUTS * 2 + HUMAN_INPUTS * 2 + LOOP_INPUTS * 2
WORST_CASE = [GuardInput([_user("gastei muito esse mês com mercado e farmácia, " * 220)], 2)]


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


def _timing(label: str, inputs: Sequence[GuardInput]) -> tuple[str, str]:
    """One row: µs per evaluation for v1 and the current guard, and their ratio."""
    v1_s, v2_s = _paired_seconds(
        guard_v1.ConversationGuard.evaluate, _as_v1(inputs), ConversationGuard.evaluate, inputs
    )
    return (
        label,
        f"v1 {v1_s * 1e6:6.2f} µs   v2 {v2_s * 1e6:6.2f} µs   v2/v1 {v2_s / v1_s:4.2f}",
    )


def run() -> list[tuple[str, str]]:
    """Measure, and return the table rows as (label, value) pairs."""
    evaluate = ConversationGuard.evaluate
    texts = [_last_text(i) for i in MIX]
    mix_s = _per_call_seconds(evaluate, MIX)
    call_s = _per_call_seconds(_noop, MIX)
    lower_s = _per_call_seconds(str.lower, texts)
    rows = [
        ("typical mix (per evaluation)", f"{1 / mix_s:,.0f}/s  {mix_s * 1e6:.2f} µs"),
        _timing("typical mix, v1 vs v2 (same inputs, same run)", MIX),
    ]
    for label, inputs in (
        ("  ordinary / hard negatives", NONE_INPUTS),
        ("  frustrated", FRUSTRATED_INPUTS),
        ("  human-request", HUMAN_INPUTS),
        ("  loop (3 user turns, past_turns ≥ 2)", LOOP_INPUTS),
        ("  10 000 characters (clipped)", WORST_CASE),
    ):
        rows.append(_timing(label, inputs))
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
