"""Hypothesis lifecycle: only a proposed hypothesis changes; each change has its event."""

from __future__ import annotations

import pytest

from agent.errors import AgentError
from agent.psychologist import (
    HYPOTHESIS_ACCEPTED,
    HYPOTHESIS_ACCEPTED_FOR_ANAMNESE,
    HYPOTHESIS_DISMISSED,
    HYPOTHESIS_PROPOSED,
    HypothesisStatus,
    InvalidTransition,
    assert_transition,
    event_for_transition,
)


@pytest.mark.parametrize("target", ["accepted", "dismissed"])
def test_a_proposed_hypothesis_can_be_accepted_or_dismissed(target: str) -> None:
    assert_transition(HypothesisStatus.PROPOSED, target)
    assert_transition("proposed", HypothesisStatus(target))


@pytest.mark.parametrize(
    ("current", "target"),
    [
        ("accepted", "accepted"),  # the double accept: a 409
        ("accepted", "dismissed"),
        ("dismissed", "accepted"),
        ("dismissed", "dismissed"),
        ("proposed", "proposed"),
        ("accepted", "proposed"),
    ],
)
def test_anything_else_is_an_invalid_transition(current: str, target: str) -> None:
    with pytest.raises(InvalidTransition) as caught:
        assert_transition(current, target, hypothesis_id="h-1")

    assert (caught.value.current, caught.value.target) == (current, target)
    assert caught.value.hypothesis_id == "h-1"
    assert isinstance(caught.value, AgentError)
    assert current in str(caught.value)
    assert target in str(caught.value)


def test_an_unknown_status_is_a_bug_not_a_conflict() -> None:
    with pytest.raises(ValueError, match="approved"):
        assert_transition("proposed", "approved")


def test_events_of_each_transition() -> None:
    assert event_for_transition("accepted") == [HYPOTHESIS_ACCEPTED]
    assert event_for_transition(HypothesisStatus.DISMISSED) == [HYPOTHESIS_DISMISSED]
    assert event_for_transition("proposed") == [HYPOTHESIS_PROPOSED]


def test_accepting_for_the_anamnese_adds_a_distinct_event_type() -> None:
    events = event_for_transition("accepted", for_anamnese=True)

    assert events == [HYPOTHESIS_ACCEPTED, HYPOTHESIS_ACCEPTED_FOR_ANAMNESE]
    assert HYPOTHESIS_ACCEPTED_FOR_ANAMNESE == "psychologist.hypothesis_accepted_for_anamnese"


def test_only_an_accepted_hypothesis_goes_to_the_anamnese() -> None:
    with pytest.raises(ValueError, match="dismissed"):
        event_for_transition("dismissed", for_anamnese=True)
