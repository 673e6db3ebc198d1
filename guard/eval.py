"""Score the guard on a labelled corpus: ``python -m guard.eval CORPUS.jsonl``.

The corpus is JSON Lines, one case a line (blank lines are skipped)::

    {"messages": ["older user text", "...", "newest"], "past_turns": 2, "label": "loop"}

``messages`` are the couple's messages, oldest first (all role ``user``); ``past_turns``
is ``past_turns_without_tool_call`` (an integer or null); ``label`` is one of
``frustrated``, ``human-request``, ``loop`` or ``none``. Other keys (a batch's
``"family"``, a note) are ignored.

Prints precision, recall, F1 and support per kind, the confusion matrix (gold rows ×
predicted columns) and every miss. Exit status: 0 after a report, 2 when the file cannot
be read or a line is malformed (the message names the line), and with ``--check`` 1 when
a kind is below the target (precision ≥ 0.95, recall ≥ 0.90).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO

from guard._guard import ConversationGuard, GuardInput

__all__ = [
    "KINDS",
    "LABELS",
    "MIN_PRECISION",
    "MIN_RECALL",
    "Case",
    "CorpusError",
    "KindScore",
    "Report",
    "load_corpus",
    "main",
    "predict",
    "score",
]

KINDS: Final = ("frustrated", "human-request", "loop")
LABELS: Final = (*KINDS, "none")
MIN_PRECISION: Final = 0.95
MIN_RECALL: Final = 0.90


class CorpusError(ValueError):
    """The corpus file cannot be read, or one of its lines is malformed."""


@dataclass(frozen=True, slots=True)
class _Message:
    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Case:
    """One labelled conversation."""

    line: int
    messages: tuple[str, ...]
    past_turns: int | None
    label: str


@dataclass(frozen=True, slots=True)
class KindScore:
    """Precision, recall and F1 of one kind (1.0 when there is nothing to get wrong)."""

    kind: str
    precision: float
    recall: float
    f1: float
    support: int


@dataclass(frozen=True, slots=True)
class Report:
    """The outcome of scoring a corpus."""

    cases: int
    scores: dict[str, KindScore]
    confusion: dict[str, dict[str, int]]
    misses: list[tuple[Case, str]] = field(default_factory=list)

    def meets_target(self) -> bool:
        """Whether every kind reaches ``MIN_PRECISION`` and ``MIN_RECALL``."""
        return all(
            self.scores[k].precision >= MIN_PRECISION and self.scores[k].recall >= MIN_RECALL
            for k in KINDS
        )


def _parse_line(where: str, number: int, line: str) -> Case:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{where}:{number}: not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise CorpusError(f"{where}:{number}: expected a JSON object")
    messages = obj.get("messages")
    if (
        not isinstance(messages, list)
        or not messages
        or not all(isinstance(m, str) for m in messages)
    ):
        raise CorpusError(f"{where}:{number}: 'messages' must be a non-empty list of strings")
    past = obj.get("past_turns")
    if past is not None and (not isinstance(past, int) or isinstance(past, bool)):
        raise CorpusError(f"{where}:{number}: 'past_turns' must be an integer or null")
    label = obj.get("label")
    if label not in LABELS:
        raise CorpusError(f"{where}:{number}: 'label' must be one of {', '.join(LABELS)}")
    return Case(number, tuple(messages), past, label)


def load_corpus(path: str | Path) -> list[Case]:
    """The cases of a JSONL corpus; raises ``CorpusError`` naming the bad line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read {path}: {exc}") from None
    cases = [
        _parse_line(str(path), number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]
    if not cases:
        raise CorpusError(f"{path} holds no cases")
    return cases


def predict(case: Case) -> str:
    """The guard's label for one case (``"none"`` when it does not preempt)."""
    messages = [_Message("user", text) for text in case.messages]
    verdict = ConversationGuard.evaluate(GuardInput(messages, case.past_turns))
    return verdict.kind or "none"


def _ratio(num: int, den: int) -> float:
    return num / den if den else 1.0


def score(cases: Sequence[Case]) -> Report:
    """Run the guard on every case and score it."""
    confusion = {gold: dict.fromkeys(LABELS, 0) for gold in LABELS}
    misses: list[tuple[Case, str]] = []
    for case in cases:
        predicted = predict(case)
        confusion[case.label][predicted] += 1
        if predicted != case.label:
            misses.append((case, predicted))
    scores: dict[str, KindScore] = {}
    for kind in LABELS:
        hit = confusion[kind][kind]
        predicted_total = sum(confusion[gold][kind] for gold in LABELS)
        support = sum(confusion[kind].values())
        precision, recall = _ratio(hit, predicted_total), _ratio(hit, support)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        scores[kind] = KindScore(kind, precision, recall, f1, support)
    return Report(len(cases), scores, confusion, misses)


def print_report(report: Report, source: str, out: TextIO) -> None:
    """The human-readable report ``main`` prints."""
    width = max(map(len, LABELS)) + 2
    out.write(f"guard eval: {source} ({report.cases} cases)\n\n")
    out.write(f"{'kind':<{width}}{'precision':>10}{'recall':>8}{'f1':>8}{'support':>9}\n")
    for kind in LABELS:
        s = report.scores[kind]
        out.write(
            f"{kind:<{width}}{s.precision:>10.3f}{s.recall:>8.3f}{s.f1:>8.3f}{s.support:>9}\n"
        )
    target = "met" if report.meets_target() else "NOT met"
    out.write(f"target (precision >= {MIN_PRECISION}, recall >= {MIN_RECALL}): {target}\n\n")
    out.write("confusion (rows = gold, columns = predicted)\n")
    out.write(" " * width + "".join(f"{label:>{width}}" for label in LABELS) + "\n")
    for gold in LABELS:
        row = "".join(f"{report.confusion[gold][p]:>{width}}" for p in LABELS)
        out.write(f"{gold:<{width}}{row}\n")
    out.write(f"\nmisses ({len(report.misses)})\n")
    for case, predicted in report.misses:
        newest = case.messages[-1].replace("\n", " ")
        out.write(f"  line {case.line}: gold={case.label} predicted={predicted}  {newest!r}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m guard.eval``."""
    parser = argparse.ArgumentParser(
        prog="python -m guard.eval", description="Score the conversation guard on a corpus."
    )
    parser.add_argument("corpus", help="JSONL file: messages, past_turns, label per line")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when a kind is below the quality target"
    )
    args = parser.parse_args(argv)
    try:
        cases = load_corpus(args.corpus)
    except CorpusError as exc:
        print(f"guard eval: {exc}", file=sys.stderr)
        return 2
    report = score(cases)
    print_report(report, args.corpus, sys.stdout)
    return 1 if args.check and not report.meets_target() else 0


if __name__ == "__main__":
    raise SystemExit(main())
