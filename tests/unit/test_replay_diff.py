"""Comparing replies, and following the event log for a set of inbound messages."""

from __future__ import annotations

from typing import Any

from gateway.replay import ReplyTracker, compare


def event(kind: str, **data: Any) -> dict[str, Any]:
    return {"id": "1-0", "type": kind, "data": data}


def test_compare_outcomes() -> None:
    assert compare("oi", "oi") == ("identical", "")
    assert compare(None, None) == ("identical", "")
    assert compare("oi", None) == ("missing", "")
    assert compare(None, "oi") == ("new", "")
    result, diff = compare("linha 1\nlinha 2", "linha 1\nlinha dois")
    assert result == "changed"
    assert diff.splitlines() == [
        "--- original",
        "+++ target",
        "@@ -1,2 +1,2 @@",
        " linha 1",
        "-linha 2",
        "+linha dois",
    ]


def test_tracker_follows_a_reply_to_its_delivery() -> None:
    t = ReplyTracker({"SM1"})
    t.feed(event("message.received", message_id="SM1"))
    t.feed(event("agent.replied", in_reply_to="SM1", text="decidido"))
    assert not t.resolved("SM1")  # decided, not delivered yet
    assert t.reply("SM1") == "decidido"
    t.feed(event("message.sent", in_reply_to="SM1", text="enviado"))
    assert t.resolved("SM1")
    assert t.reply("SM1") == "enviado"


def test_a_turn_without_a_reply_is_resolved_as_no_reply() -> None:
    t = ReplyTracker({"SM1", "SM2"})
    t.feed(event("message.received", message_id="SM1"))  # muted thread: nothing else
    assert t.resolved("SM1")
    assert t.reply("SM1") is None
    assert not t.resolved("SM2")  # never seen


def test_a_failed_delivery_keeps_the_decided_text() -> None:
    t = ReplyTracker({"SM1"})
    t.feed(event("message.received", message_id="SM1"))
    t.feed(event("agent.failed", in_reply_to="SM1", outcome="error", text="Desculpa…"))
    t.feed(event("message.failed", in_reply_to="SM1", error="63016"))
    assert t.resolved("SM1")
    assert t.reply("SM1") == "Desculpa…"


def test_other_messages_are_ignored() -> None:
    t = ReplyTracker({"SM1"})
    t.feed(event("message.sent", in_reply_to="SM9", text="x"))
    t.feed(event("message.status", in_reply_to=None))
    assert t.states == {}
