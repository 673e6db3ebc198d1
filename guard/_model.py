"""The guard's fallback model: a small logistic regression behind the rules.

Only when no rule fires does the guard ask ``model_kind`` whether the last user message is
frustrated or a request for a person. The model reads ``guard._features.model_input``: the
message's words as ``guard._text.normalized_words`` gives them (before typo fixes), plus one
``§name`` token per signal the rules' frustration score found in it (praise, thanks, blame,
a word for mel, something else the message is about ...; not capitals), so it weighs the
rules' readings as well as the words. The answer is that kind when its probability reaches
the kind's threshold, else ``None``; the rules are never overridden. ``may_call`` bounds both
kinds' probabilities from the words and the signals a message *may* have (``Score.possible``),
so that the guard reads the signals only when the model could give a kind.

The weights and thresholds are ``guard/model.json``, read once at import. It is generated
by ``python -m guard.train tests/data/guard_corpus.jsonl`` (see ``guard.train`` for the
model and how the thresholds are chosen); retrain after adding corpus lines or editing the
normalisation or the signals (``python -m guard.train CORPUS --check-inputs`` says when).

Each weight is one complex number: real = w_frustrated - w_other, imag = w_human - w_other,
so scoring is one complex sum over dict lookups (a known word's entry already holds its
prefix's weights; an unknown word falls back to its 4-letter prefix), and ``exp`` runs only
when a target class beats "other".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from importlib import resources
from math import exp, log, sqrt
from typing import Final, Literal

__all__ = ["ModelError", "may_call", "model_kind", "signal_bound"]

FILE: Final = "model.json"


class ModelError(ValueError):
    """``guard/model.json`` is missing something, or has a wrong type."""


def _pair(name: str, value: object) -> complex:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)
    ):
        raise ModelError(f"{FILE}: '{name}' must be a pair of numbers")
    return complex(value[0], value[1])


def _table(raw: dict[str, object], name: str) -> dict[str, complex]:
    table = raw.get(name)
    if not isinstance(table, dict):
        raise ModelError(f"{FILE}: '{name}' must be an object")
    return {str(k): _pair(f"{name}.{k}", v) for k, v in table.items()}


def _number(raw: dict[str, object], name: str) -> float:
    value = raw.get(name)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ModelError(f"{FILE}: '{name}' must be a number")
    return float(value)


def _load() -> tuple[dict[str, complex], dict[str, complex], complex, int, float, float]:
    raw = json.loads(resources.files("guard").joinpath(FILE).read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ModelError(f"{FILE}: expected a JSON object")
    features = raw.get("features")
    limits = raw.get("thresholds")
    if not isinstance(features, dict) or not isinstance(limits, dict):
        raise ModelError(f"{FILE}: 'features' and 'thresholds' must be objects")
    prefix = features.get("prefix")
    if not isinstance(prefix, int) or prefix < 1:
        raise ModelError(f"{FILE}: 'features.prefix' must be a positive integer")
    return (
        _table(raw, "words"),
        _table(raw, "prefixes"),
        _pair("bias", raw.get("bias")),
        prefix,
        _number(limits, "frustrated"),
        _number(limits, "human-request"),
    )


_WORDS, _PREFIXES, _BIAS, _PREFIX, _F_THRESHOLD, _H_THRESHOLD = _load()
_word = _WORDS.get
_prefix = _PREFIXES.get
# p_kind <= 1 / (1 + e^-z_kind): a kind needs at least its threshold's log-odds
_F_LOGIT: Final = log(_F_THRESHOLD / (1.0 - _F_THRESHOLD))
_H_LOGIT: Final = log(_H_THRESHOLD / (1.0 - _H_THRESHOLD))


def _sum(words: Iterable[str]) -> complex:
    s = 0j
    for w in words:
        v = _word(w)
        s += v if v is not None else _prefix(w[:_PREFIX], 0j)
    return s


def signal_bound(tokens: Iterable[str]) -> tuple[float, float, int]:
    """The most ``tokens`` (``§name`` signals a message may have) can add to the sums of
    the two kinds (their positive weights), and how many they are."""
    f = h = 0.0
    count = 0
    for token in tokens:
        count += 1
        v = _word(token)
        if v is not None:
            f += max(v.real, 0.0)
            h += max(v.imag, 0.0)
    return f, h, count


def may_call(words: list[str], signals: tuple[float, float, int]) -> bool:
    """Whether ``model_kind`` could give a kind to ``words`` followed by some of the
    signals ``signal_bound`` measured: an upper bound of both kinds' probabilities. A cheap
    test before the signals are read."""
    s = _sum(words)
    most_f, most_h, count = signals
    a, b = s.real + most_f, s.imag + most_h
    # (a positive sum is largest over the fewest tokens, a negative one over the most)
    few, many = sqrt(2 * max(len(words), 1)), sqrt(2 * max(len(words) + count, 1))
    return (
        _BIAS.real + a / (few if a > 0.0 else many) >= _F_LOGIT
        or _BIAS.imag + b / (few if b > 0.0 else many) >= _H_LOGIT
    )


def model_kind(words: list[str]) -> Literal["frustrated", "human-request"] | None:
    """The kind the model gives a message's normalised words, if it is sure enough."""
    if not words:
        return None
    z = _BIAS + _sum(words) / sqrt(2 * len(words))
    a = z.real
    b = z.imag
    if a <= 0.0 and b <= 0.0:  # "other" wins
        return None
    if a >= b:  # p_frustrated = 1 / (1 + e^(b - a) + e^(-a))
        return "frustrated" if 1.0 / (1.0 + exp(b - a) + exp(-a)) >= _F_THRESHOLD else None
    return "human-request" if 1.0 / (1.0 + exp(a - b) + exp(-b)) >= _H_THRESHOLD else None
