"""A session's events as the console shows them: messages by author, decisions between."""

from __future__ import annotations

from typing import Any

from gateway.http.console.transcript import transcript


def env(n: int, type_: str, **data: Any) -> dict[str, Any]:
    return {"id": f"{n}-0", "type": type_, "at": "2026-06-03T12:00:00Z", "data": data}


def test_messages_and_decisions_in_event_order() -> None:
    events = [
        env(1, "session.started", channel="twilio"),
        env(2, "message.received", text="<img src=x onerror=alert(1)>"),
        env(3, "guard.preempted", kind="human_request"),
        env(
            4, "session.human_handoff.requested", source="guard", support="available",
            guard_kind="human_request",
        ),
        env(5, "message.sent", author="bot", text="Vou encaminhar.", in_reply_to="SM1"),
        env(6, "message.status", status="delivered"),
        env(7, "support.claimed", by="ana", request="open"),
        env(8, "support.replied", reply_id="support-1", text="Oi!", by="ana"),
        env(9, "message.sent", author="support:ana", text="Oi!", in_reply_to="support-1"),
        env(10, "router.routed", route="budget_agent", method="llm", confidence=0.9),
        env(11, "support.released", reason="support", by="ana"),
        env(12, "something.new"),
    ]  # fmt: skip
    items = transcript(events)
    assert [(i["kind"], i.get("author")) for i in items] == [
        ("decision", None),
        ("message", "couple"),
        ("decision", None),
        ("decision", None),
        ("message", "mel"),
        ("decision", None),
        ("message", "support"),
        ("decision", None),
        ("decision", None),
        ("decision", None),
    ]
    assert items[1]["text"] == "<img src=x onerror=alert(1)>"  # data: the page renders text
    assert items[2]["text"] == "guard: human_request"
    assert "human_request" in items[3]["text"]
    assert items[5]["text"] == "assumido por ana"
    assert items[6] == {
        "id": "8-0", "at": "2026-06-03T12:00:00Z", "type": "support.replied",
        "kind": "message", "author": "support", "by": "ana", "text": "Oi!", "delivered": True,
    }  # fmt: skip
    assert items[7]["text"] == "roteador → budget_agent (llm, 90%)"
    assert items[8]["text"] == "devolvido à mel (support) por ana"
    assert items[9]["text"] == "something.new"
    assert [i["id"] for i in items][:2] == ["1-0", "2-0"]
