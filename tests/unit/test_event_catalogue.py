"""The event catalogue: every domain event has a payload model, and logs never reuse an
event's name (a log line is not an event a consumer could mistake for one)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from events import CATALOGUE, MessageFailed, SessionClosed, payload_type

ROOT = Path(__file__).resolve().parents[2]
LOG_CALL = re.compile(
    r"\b_?log\.(?:debug|info|warning|error|exception|critical)\(\s*f?\"([^\"]+)\""
)


def test_every_log_event_name_differs_from_every_domain_event_type() -> None:
    names: dict[str, str] = {}
    for package in ("agent", "channels", "events", "gateway", "guard"):
        for path in (ROOT / package).rglob("*.py"):
            for match in LOG_CALL.finditer(path.read_text(encoding="utf-8")):
                names[match[1]] = str(path.relative_to(ROOT))
    assert len(names) > 50  # the scan found the project's log calls
    clashes = {name: where for name, where in names.items() if name in CATALOGUE}
    assert clashes == {}


def test_the_catalogue_maps_types_to_their_models() -> None:
    assert payload_type("session.closed") is SessionClosed
    assert {"message.received", "guard.preempted", "psychologist.analysis_failed"} <= set(CATALOGUE)
    with pytest.raises(KeyError):
        payload_type("session.opened")


def test_a_payload_refuses_unknown_fields_and_leaves_out_unset_optional_ones() -> None:
    event = MessageFailed(in_reply_to="SM1", channel="twilio", author="bot", reason="x")
    assert event.data() == {
        "in_reply_to": "SM1",
        "channel": "twilio",
        "author": "bot",
        "reason": "x",
    }
    with pytest.raises(ValidationError):
        MessageFailed(in_reply_to="SM1", channel="twilio", author="bot", reson="typo")  # type: ignore[call-arg]
