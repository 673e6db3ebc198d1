"""The guard holds its quality target on the shipped labelled corpus and on the held-out
batches, and the ``python -m guard.eval`` harness reports and fails the way it says it does."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from guard import eval as guard_eval

CORPUS = Path(__file__).resolve().parents[1] / "data" / "guard_corpus.jsonl"
HELDOUT = CORPUS.with_name("guard_heldout.jsonl")


@pytest.fixture(scope="module")
def cases() -> list[guard_eval.Case]:
    return guard_eval.load_corpus(CORPUS)


def test_corpus_is_big_varied_and_well_labelled(cases: list[guard_eval.Case]) -> None:
    assert len(cases) >= 200
    counts = Counter(case.label for case in cases)
    assert set(counts) <= set(guard_eval.LABELS)
    assert counts["frustrated"] >= 60
    assert counts["human-request"] >= 60
    assert counts["loop"] >= 40
    assert counts["none"] >= 100
    assert all(len(case.messages) >= 3 for case in cases if case.label == "loop")
    assert all(
        case.past_turns is not None and case.past_turns >= 2
        for case in cases
        if case.label == "loop"
    )
    # repeats without the caller's signal and follow-ups with it are in the corpus
    assert any(
        case.label == "none" and case.past_turns in (None, 0, 1) and len(case.messages) == 3
        for case in cases
    )
    assert any(
        case.label == "none" and case.past_turns == 2 and len(case.messages) == 3 for case in cases
    )


def test_the_gate_is_the_issue_target() -> None:
    assert guard_eval.MIN_PRECISION == 0.95
    assert guard_eval.MIN_RECALL == 0.90


@pytest.mark.parametrize("kind", guard_eval.KINDS)
def test_quality_target_per_kind(cases: list[guard_eval.Case], kind: str) -> None:
    score = guard_eval.score(cases).scores[kind]
    assert score.precision >= guard_eval.MIN_PRECISION, score
    assert score.recall >= guard_eval.MIN_RECALL, score


def test_the_target_holds_on_blind_text_never_read_tuned_or_trained_on(
    cases: list[guard_eval.Case],
) -> None:
    """``guard_heldout.jsonl``: batches written blind and never read while the guard was
    changed (docs/guard-blind-batches.md), none of whose cases is in the corpus."""
    heldout = guard_eval.load_corpus(HELDOUT)
    assert len(heldout) >= 2_000
    assert Counter(case.label for case in heldout).keys() == set(guard_eval.LABELS)
    assert {case.messages for case in cases}.isdisjoint(case.messages for case in heldout)

    report = guard_eval.score(heldout)

    assert report.meets_target(), report.scores


def test_eval_cli_prints_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert guard_eval.main([str(CORPUS), "--check"]) == 0
    out = capsys.readouterr().out
    for kind in guard_eval.LABELS:
        assert kind in out
    assert "precision" in out
    assert "recall" in out
    assert "confusion (rows = gold, columns = predicted)" in out
    assert "misses (" in out


def test_eval_lists_misses_and_check_fails_below_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        '{"messages": ["qual o total do mês?"], "past_turns": null, "label": "frustrated"}\n'
        "\n"
        '{"messages": ["que bot burro"], "past_turns": null, "label": "frustrated"}\n',
        encoding="utf-8",
    )
    assert guard_eval.main([str(corpus)]) == 0
    out = capsys.readouterr().out
    assert "line 1: gold=frustrated predicted=none  'qual o total do mês?'" in out
    assert guard_eval.main([str(corpus), "--check"]) == 1


def test_eval_ignores_extra_keys(tmp_path: Path) -> None:
    corpus = tmp_path / "batch.jsonl"
    corpus.write_text(
        '{"messages": ["que bot burro"], "past_turns": null, "label": "frustrated", '
        '"family": "insult", "note": "blind"}\n',
        encoding="utf-8",
    )
    (case,) = guard_eval.load_corpus(corpus)
    assert case.label == "frustrated"
    assert guard_eval.score([case]).scores["frustrated"].recall == 1.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            '{"messages": ["oi"], "past_turns": null, "label": "none"}\n{oops\n',
            ":2: not valid JSON",
        ),
        ('["oi"]\n', ":1: expected a JSON object"),
        ('{"messages": [], "past_turns": null, "label": "none"}\n', ":1: 'messages'"),
        ('{"messages": ["oi", 3], "past_turns": null, "label": "none"}\n', ":1: 'messages'"),
        ('{"messages": ["oi"], "past_turns": "2", "label": "none"}\n', ":1: 'past_turns'"),
        ('{"messages": ["oi"], "past_turns": true, "label": "none"}\n', ":1: 'past_turns'"),
        ('{"messages": ["oi"], "past_turns": 2, "label": "angry"}\n', ":1: 'label'"),
        ("\n\n", "holds no cases"),
    ],
)
def test_eval_rejects_a_bad_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text(content, encoding="utf-8")
    assert guard_eval.main([str(corpus)]) == 2
    assert message in capsys.readouterr().err


def test_eval_rejects_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert guard_eval.main([str(tmp_path / "nope.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
