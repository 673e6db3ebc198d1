"""Recorded deliveries: reading stream entries, filtering, and the export file format."""

from __future__ import annotations

import base64
import io
import json
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import pytest

from gateway.replay import (
    EXPORT_FORMAT,
    ExportLineError,
    Filters,
    RawDelivery,
    export_line,
    parse_speed,
    parse_status,
    parse_when,
    read_export,
)
from gateway.replay.records import RecordError, select_from_export
from tests.fakes.payloads import meta_body, meta_status, meta_text_payload, twilio_inbound_params

NOW = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)


def twilio_delivery(
    body: str = "qual o total de junho?",
    *,
    id: str = "1780488000000-0",
    user: str = "+5511999990000",
    status: int = 200,
    received_at: str = "2026-06-03T00:00:00.000Z",
    sid: str = "SM" + "a" * 32,
) -> RawDelivery:
    params = twilio_inbound_params(sid=sid, from_=user, body=body, profile_name="Ana Souza")
    return RawDelivery(
        id=id,
        received_at=received_at,
        provider="twilio",
        method="POST",
        path="/webhooks/twilio",
        query="",
        headers={"content-type": "application/x-www-form-urlencoded", "x-twilio-signature": "x"},
        body=urlencode(params).encode(),
        status=status,
        thread_ids=(f"twilio:+14155238886:{user}",) if status == 200 else (),
        message_ids=(sid,) if status == 200 else (),
    )


def meta_delivery(text: str = "oi", *, id: str = "1780488000001-0") -> RawDelivery:
    body = meta_body(meta_text_payload(text, id="wamid.ABC", from_="+5521988887777"))
    return RawDelivery(
        id=id,
        received_at="2026-06-03T00:00:01.000Z",
        provider="meta",
        method="POST",
        path="/webhooks/meta",
        query="",
        headers={"content-type": "application/json", "x-hub-signature-256": "sha256=00"},
        body=body,
        status=200,
        thread_ids=("meta:+14155238886:+5521988887777",),
        message_ids=("wamid.ABC",),
    )


# --- times, statuses, speeds -----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "delta"),
    [("30m", timedelta(minutes=30)), ("2h", timedelta(hours=2)), ("3d", timedelta(days=3)),
     ("1w", timedelta(weeks=1)), ("45s", timedelta(seconds=45)), ("1.5h", timedelta(minutes=90))],
)  # fmt: skip
def test_relative_times_count_back_from_now(value: str, delta: timedelta) -> None:
    assert parse_when(value, now=NOW) == NOW - delta


def test_iso_times_with_and_without_offset() -> None:
    assert parse_when("2026-06-02T21:00:00-03:00") == datetime(2026, 6, 3, 0, 0, tzinfo=UTC)
    assert parse_when("2026-06-03T00:00:00Z") == datetime(2026, 6, 3, 0, 0, tzinfo=UTC)
    local = parse_when("2026-06-02T21:00")
    assert local.tzinfo is not None  # a naive time is taken as this machine's local time
    assert local.replace(tzinfo=None) == datetime(2026, 6, 2, 21, 0)


def test_a_bad_time_says_what_is_accepted() -> None:
    with pytest.raises(ValueError, match="relative one"):
        parse_when("yesterday-ish")


@pytest.mark.parametrize(
    ("spec", "accepted", "refused"),
    [
        ("5xx", [500, 503], [200, 403]),
        ("403", [403], [400, 200]),
        ("2xx", [200, 204], [403]),
        ("ok", [200], [500]),
        ("failed", [400, 403, 500, 503], [200, 201]),
        ("403,5xx", [403, 502], [400, 200]),
    ],
)
def test_status_filters(spec: str, accepted: list[int], refused: list[int]) -> None:
    status = parse_status(spec)
    assert all(status(s) for s in accepted)
    assert not any(status(s) for s in refused)
    assert str(status) == spec


@pytest.mark.parametrize("spec", ["6xx", "abc", "20", ""])
def test_bad_status_filters_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="status"):
        parse_status(spec)


def test_speed() -> None:
    assert parse_speed("10x") == 10
    assert parse_speed("1") == 1
    assert parse_speed("0.5x") == 0.5
    with pytest.raises(ValueError, match="factor"):
        parse_speed("fast")
    with pytest.raises(ValueError, match="more than 0"):
        parse_speed("0x")


# --- deliveries ------------------------------------------------------------------------


def test_a_stream_entry_reads_back_as_the_gateway_wrote_it() -> None:
    meta = {
        "received_at": "2026-06-03T00:00:00.000Z",
        "provider": "twilio",
        "method": "POST",
        "path": "/webhooks/twilio",
        "query": "",
        "headers": {"x-twilio-signature": "sig"},
        "status": 403,
        "error": "X-Twilio-Signature does not match",
        "thread_ids": [],
        "message_ids": [],
        "elapsed_ms": 1.5,
    }
    body = urlencode(twilio_inbound_params(body="oi", from_="+5511977776666")).encode()
    d = RawDelivery.from_stream("1-0", {b"meta": json.dumps(meta).encode(), b"body": body})
    assert (d.status, d.error, d.elapsed_ms) == (403, meta["error"], 1.5)
    # a refused delivery recorded no thread, but the body still says whose it is
    assert d.threads == ("twilio:+14155238886:+5511977776666",)
    assert d.preview() == "oi"


def test_a_corrupt_stream_entry_is_a_record_error() -> None:
    with pytest.raises(RecordError, match="entry 1-0: meta is not JSON"):
        RawDelivery.from_stream("1-0", {b"meta": b"{nope", b"body": b""})


def test_preview_of_status_callbacks_media_and_long_text() -> None:
    status = RawDelivery(
        id="1-0", received_at="", provider="meta", method="POST", path="/webhooks/meta",
        query="", headers={}, body=meta_body({"object": "whatsapp_business_account", "entry": [
            {"id": "1", "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "14155238886", "phone_number_id": "1"},
                "statuses": [meta_status("wamid.X", "read")]}}]}]}),
        status=200,
    )  # fmt: skip
    assert status.preview() == "[status read]"
    long = twilio_delivery("x" * 200)
    assert len(long.preview(20)) == 20
    assert long.preview(20).endswith("…")


def test_text_search_sees_decoded_form_values_and_json_strings() -> None:
    assert "qual o total" in twilio_delivery().searchable_text  # not "qual+o+total"
    accented = meta_delivery("orçamento do mês")
    assert "orçamento do mês" in accented.searchable_text


# --- filters ---------------------------------------------------------------------------


def test_filters_combine() -> None:
    a = twilio_delivery("total de junho", user="+5511999990000")
    b = twilio_delivery("oi", user="+5511988887777", id="1780488000005-0", status=403)
    c = meta_delivery("Orçamento")
    everything = [a, b, c]

    def pick(**kw: object) -> list[str]:
        return [d.id for d in everything if Filters(**kw).matches(d)]  # type: ignore[arg-type]

    assert pick() == [a.id, b.id, c.id]
    assert pick(provider="meta") == [c.id]
    assert pick(status=parse_status("failed")) == [b.id]
    assert pick(text="ORÇAMENTO") == [c.id]
    assert pick(thread="+55 11 98888-7777") == [b.id]  # a number, in any format
    assert pick(thread="twilio:+14155238886:+5511999990000") == [a.id]
    assert pick(message_id="wamid.ABC") == [c.id]
    assert pick(since=datetime(2026, 6, 3, 0, 0, 0, 500000, tzinfo=UTC)) == [c.id]
    assert pick(until=datetime(2026, 6, 3, 0, 0, 0, 500000, tzinfo=UTC)) == [a.id, b.id]
    assert pick(ids=(b.id,)) == [b.id]
    assert pick(only_messages=True) == [a.id, c.id]  # accepted inbound messages only


# --- export file -----------------------------------------------------------------------


def test_export_line_round_trips_every_field() -> None:
    d = twilio_delivery()
    line = export_line(d)
    data = json.loads(line)
    assert data["format"] == EXPORT_FORMAT
    assert base64.b64decode(data["body"]) == d.body
    assert data["body_text"] == d.body.decode()
    [back] = list(read_export(io.StringIO(line + "\n")))
    assert isinstance(back, RawDelivery)
    assert (back.id, back.body, back.headers, back.thread_ids, back.message_ids, back.status) == (
        d.id, d.body, d.headers, d.thread_ids, d.message_ids, d.status,
    )  # fmt: skip


def test_binary_bodies_have_no_body_text_and_survive() -> None:
    d = twilio_delivery().with_body(b"\xff\xfe\x00binary")
    data = json.loads(export_line(d))
    assert "body_text" not in data
    [back] = list(read_export(io.StringIO(export_line(d))))
    assert isinstance(back, RawDelivery)
    assert back.body == b"\xff\xfe\x00binary"


def test_body_text_wins_so_a_hand_edited_export_sends_the_edit() -> None:
    data = json.loads(export_line(twilio_delivery("antes")))
    data["body_text"] = data["body_text"].replace("antes", "depois")
    [back] = list(read_export(io.StringIO(json.dumps(data))))
    assert isinstance(back, RawDelivery)
    assert back.texts == ("depois",)


def test_corrupt_lines_are_reported_by_number_and_the_rest_is_read() -> None:
    good = export_line(twilio_delivery())
    text = "\n".join(
        [
            good,
            "{not json",
            "",
            json.dumps({"format": "other/9", "id": "1-0"}),
            json.dumps({"id": "2-0", "provider": "sms", "path": "/x", "body": ""}),
            json.dumps({"id": "3-0", "provider": "meta", "path": "/webhooks/meta"}),
            json.dumps({"id": "4-0", "provider": "meta", "path": "/m", "body": "***"}),
            export_line(meta_delivery()),
        ]
    )
    items = list(read_export(io.StringIO(text)))
    errors = [str(i) for i in items if isinstance(i, ExportLineError)]
    assert [isinstance(i, RawDelivery) for i in items] == [
        True, False, False, False, False, False, True,
    ]  # fmt: skip
    assert errors[0].startswith("line 2: not valid JSON")
    assert "line 4: format 'other/9'" in errors[1]
    assert "line 5: provider 'sms'" in errors[2]
    assert "line 6: missing field 'body'" in errors[3]
    assert "line 7: body is not base64" in errors[4]
    problems: list[str] = []
    chosen = select_from_export(items, Filters(ids=("1780488000001-0", "9-9")), problems)
    assert [d.id for d in chosen] == ["1780488000001-0"]
    assert "no delivery with id 9-9 in the file" in problems
    assert len(problems) == 6
