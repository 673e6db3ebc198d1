"""The termination classifier: a pure pattern match over the gateway's close reasons."""

from __future__ import annotations

import pytest

from agent.psychologist import (
    SESSION_CLOSED,
    SESSION_CLOSED_ABNORMALLY,
    TERMINATION_CAUSES,
    classify_termination,
)


@pytest.mark.parametrize(
    ("reason", "cause", "detail"),
    [
        ("user_ended", "user_ended", None),
        ("idle_timeout", "idle_timeout", None),
        ("support_closed", "support_closed", None),
        ("  idle_timeout\n", "idle_timeout", None),
        (
            "error: RuntimeError: ledger unavailable",
            "processing_error",
            "RuntimeError: ledger unavailable",
        ),
        ("error:", "processing_error", None),
        ("error", "processing_error", None),
        ("worker_lost", "worker_lost", None),
        (
            "worker_lost: worker w-2 stopped heartbeating mid-turn",
            "worker_lost",
            "worker w-2 stopped heartbeating mid-turn",
        ),
        ("kernel panic", "unknown", "kernel panic"),
        ("user_ended: twice", "unknown", "user_ended: twice"),
        (None, "unknown", None),
        ("", "unknown", None),
    ],
)
def test_every_reason_maps_to_its_cause(reason: str | None, cause: str, detail: str | None) -> None:
    termination = classify_termination(reason, SESSION_CLOSED)

    assert termination.cause == cause
    assert termination.detail == detail
    assert termination.reason == reason
    assert termination.event_type == SESSION_CLOSED


def test_every_cause_is_reachable_and_described() -> None:
    reasons = ["user_ended", "idle_timeout", "support_closed", "error: boom", "worker_lost", "?"]
    causes = [classify_termination(reason, SESSION_CLOSED).cause for reason in reasons]

    assert sorted(causes) == sorted(TERMINATION_CAUSES)
    descriptions = {classify_termination(r, SESSION_CLOSED).description for r in reasons}
    assert len(descriptions) == len(reasons)


@pytest.mark.parametrize("reason", ["user_ended", "idle_timeout", "support_closed", None, "odd"])
def test_a_normal_close_is_not_abnormal(reason: str | None) -> None:
    assert classify_termination(reason, SESSION_CLOSED).abnormal is False


@pytest.mark.parametrize("reason", ["error: boom", "worker_lost", "worker_lost: pid 7"])
def test_an_error_or_a_lost_worker_is_abnormal_even_on_session_closed(reason: str) -> None:
    assert classify_termination(reason, SESSION_CLOSED).abnormal is True


@pytest.mark.parametrize(
    "reason", ["user_ended", "idle_timeout", "support_closed", "error: boom", "worker_lost", None]
)
def test_session_closed_abnormally_is_abnormal_whatever_the_reason(reason: str | None) -> None:
    termination = classify_termination(reason, SESSION_CLOSED_ABNORMALLY)

    assert termination.abnormal is True
    assert termination.event_type == SESSION_CLOSED_ABNORMALLY


def test_the_error_message_is_the_detail_and_appears_in_the_description() -> None:
    termination = classify_termination("error: TimeoutError: ledger", SESSION_CLOSED_ABNORMALLY)

    assert termination.cause == "processing_error"
    assert termination.detail == "TimeoutError: ledger"
    assert "TimeoutError: ledger" in termination.description
    assert termination.as_dict()["cause"] == "processing_error"


def test_a_huge_reason_is_clipped() -> None:
    termination = classify_termination("error: " + "x" * 5000, SESSION_CLOSED_ABNORMALLY)

    assert termination.detail is not None
    assert len(termination.detail) <= 500


def test_another_event_type_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match=r"message\.received"):
        classify_termination("user_ended", "message.received")
