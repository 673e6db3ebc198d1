"""The guard benchmark's inputs (the run itself is ``python -m bench.guard_bench``)."""

from __future__ import annotations

from collections import Counter

from bench import guard_bench as bench
from guard.eval import load_corpus


def test_the_corpus_row_times_every_tenth_case_as_the_guard_is_asked_about_it() -> None:
    cases = load_corpus(bench.CORPUS)[:: bench.CORPUS_STEP]
    sample = bench.corpus_sample()

    assert len(sample) == len(cases) > 2_000
    assert Counter(case.label for case in cases).keys() == {
        "none",
        "frustrated",
        "human-request",
        "loop",
    }
    for case, guard_input in zip(cases, sample, strict=True):
        users = [m.content for m in guard_input.messages if m.role == "user"]
        assert tuple(users) == case.messages
        assert guard_input.past_turns_without_tool_call == case.past_turns
        # an assistant reply between each two user messages, as in a real conversation
        assert len(guard_input.messages) == 2 * len(case.messages) - 1
