"""ConversationGuard benchmark: evaluations per second for typical messages, next to the
cost of the LLM round trip a preempt saves.

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

from guard import ConversationGuard, GuardInput

T = TypeVar("T")

#: An assumption, not a measurement: a typical chat-completions round trip.
ASSUMED_LLM_ROUND_TRIP_S = 0.800
#: The issue's goal for typical messages.
GOAL_PER_S = 100_000
ROUNDS = 3
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


def run() -> list[tuple[str, str]]:
    """Measure, and return the table rows as (label, value) pairs."""
    evaluate = ConversationGuard.evaluate
    texts = [_last_text(i) for i in MIX]
    mix_s = _per_call_seconds(evaluate, MIX)
    call_s = _per_call_seconds(_noop, MIX)
    lower_s = _per_call_seconds(str.lower, texts)
    rows = [("typical mix (per evaluation)", f"{1 / mix_s:,.0f}/s  {mix_s * 1e6:.2f} µs")]
    for label, inputs in (
        ("  ordinary / hard negatives", NONE_INPUTS),
        ("  frustrated", FRUSTRATED_INPUTS),
        ("  human-request", HUMAN_INPUTS),
        ("  loop (3 user turns, past_turns ≥ 2)", LOOP_INPUTS),
        ("  10 000 characters (clipped)", WORST_CASE),
    ):
        seconds = _per_call_seconds(evaluate, inputs)
        rows.append((label, f"{1 / seconds:,.0f}/s  {seconds * 1e6:.2f} µs"))
    verdict = "met" if 1 / mix_s >= GOAL_PER_S else "NOT met"
    rows += [
        (f"goal ≥ {GOAL_PER_S:,}/s on the typical mix", verdict),
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
