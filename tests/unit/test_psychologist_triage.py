"""Triage: fewer than 20 events → the light tier, otherwise the heavy one."""

from __future__ import annotations

import pytest

from agent.profiles import PROFILE_NAMES
from agent.psychologist import HEAVY, HEAVY_THRESHOLD, LIGHT, tier_named, triage


@pytest.mark.parametrize("count", [0, 1, 19])
def test_fewer_than_20_events_is_light(count: int) -> None:
    assert triage(count) == LIGHT


@pytest.mark.parametrize("count", [20, 21, 500])
def test_20_events_or_more_is_heavy(count: int) -> None:
    assert triage(count) == HEAVY


def test_the_boundary_is_between_19_and_20() -> None:
    assert HEAVY_THRESHOLD == 20
    assert (triage(19).name, triage(20).name) == ("light", "heavy")


def test_the_tiers_differ_in_profile_bound_and_budget() -> None:
    assert (LIGHT.name, LIGHT.profile, LIGHT.max_iterations, LIGHT.budget_micro_usd) == (
        "light",
        "psychologist_light",
        4,
        50_000,
    )
    assert (HEAVY.name, HEAVY.profile, HEAVY.max_iterations, HEAVY.budget_micro_usd) == (
        "heavy",
        "psychologist",
        8,
        300_000,
    )
    assert {LIGHT.profile, HEAVY.profile} <= set(PROFILE_NAMES)


def test_tiers_by_name() -> None:
    assert tier_named("light") is LIGHT
    assert tier_named("heavy") is HEAVY
    with pytest.raises(ValueError, match="medium"):
        tier_named("medium")


def test_a_negative_count_is_a_bug() -> None:
    with pytest.raises(ValueError, match="-1"):
        triage(-1)
