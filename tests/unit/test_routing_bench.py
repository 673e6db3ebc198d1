"""The stickiness benchmark's script and its RESULTS.md section (the run itself is
``python -m bench.stickiness_bench``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bench import stickiness_bench as bench
from tests.fakes.llm import Reply


def test_the_script_is_long_realistic_and_untouched_by_the_guard() -> None:
    turns = [turn for conversation in bench.CONVERSATIONS for turn in conversation.turns]
    index = bench._script_index()  # raises on a duplicate message or a guard preempt

    assert len(turns) >= 30
    assert len(index) == len(turns)
    decisions = Counter(turn.decision for turn in turns)
    assert decisions["CONTINUE"] >= 10
    assert decisions["ROUTE"] >= 8
    assert decisions["END_SESSION"] >= 3
    assert decisions["HUMAN_HANDOFF"] >= 1
    assert any(t.decision == "CONTINUE" and t.confidence < 0.9 for t in turns)  # unsure
    assert {turn.agent for turn in turns} == {"budget_agent", "savings_agent", "invoice_agent"}


def test_the_responder_answers_from_the_script_not_from_the_text() -> None:
    responder = bench.ScriptResponder()
    turn = bench.CONVERSATIONS[0].turns[1]
    payload = json.dumps({"current_message": turn.text})

    classifier = responder({"model": "bench-continuity", "messages": [{"content": payload}]})
    router = responder({"model": "bench-router", "messages": [{"content": payload}]})
    first = responder(
        {"model": "bench-agent", "messages": [{"role": "user", "content": turn.text}]}
    )

    assert isinstance(classifier, Reply)
    assert json.loads(classifier.content or "") == {"decision": "CONTINUE", "confidence": 0.96}
    assert isinstance(router, Reply)
    assert json.loads(router.content or "")["route"] == "budget_agent"
    assert isinstance(first, Reply)
    assert [call.name for call in first.tool_calls] == ["spendingByCategory"]


def test_results_md_gets_only_its_own_section_replaced(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    bench.write_results("## Route stickiness\n\nfirst\n", path)
    assert path.read_text() == "# Benchmark results\n\n## Route stickiness\n\nfirst\n"

    path.write_text(path.read_text() + "\n## Guard\n\nguard figures\n")
    bench.write_results("## Route stickiness\n\nsecond\n", path)

    assert path.read_text() == (
        "# Benchmark results\n\n## Route stickiness\n\nsecond\n\n## Guard\n\nguard figures\n"
    )


def test_percentiles_interpolate_between_ranks() -> None:
    values = [float(v) for v in range(1, 101)]

    assert bench.percentile(values, 50) == 50.5
    assert bench.percentile(values, 99) == 99.01
    assert bench.percentile([7.0], 95) == 7.0
