"""Meta Cloud API webhooks: signature, subscription handshake and payload parsing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from channels import (
    MalformedPayload,
    SignatureError,
    parse_meta_payload,
    verify_meta_signature,
    verify_meta_subscription,
)
from tests.fakes.payloads import (
    META_PHONE_NUMBER_ID,
    meta_body,
    meta_button_message,
    meta_change,
    meta_contacts_message,
    meta_delivery,
    meta_entry,
    meta_interactive_message,
    meta_location_message,
    meta_media_message,
    meta_message,
    meta_payload,
    meta_reaction_message,
    meta_status,
    meta_text_message,
    meta_text_payload,
    meta_unsupported_message,
    new_wamid,
    sign_meta,
)

SECRET = "app-secret"


def parse(payload: dict[str, Any]) -> Any:
    return parse_meta_payload(meta_body(payload))


def reason(payload: dict[str, Any] | bytes) -> str:
    """Why a body that is not a delivery at all is refused (400)."""
    body = payload if isinstance(payload, bytes) else meta_body(payload)
    with pytest.raises(MalformedPayload) as info:
        parse_meta_payload(body)
    assert info.value.http_status == 400
    return info.value.reason


def rejected(payload: dict[str, Any]) -> tuple[str, str]:
    """The path and reason of the one item of ``payload``, rejected alone."""
    delivery = parse(payload)
    assert delivery.messages == delivery.statuses == ()
    [item] = delivery.rejected
    return item.path, item.reason


# --------------------------------------------------------------------------- signature


def test_valid_signature() -> None:
    body = meta_body(meta_text_payload())
    verify_meta_signature(SECRET, body, sign_meta(SECRET, body))


def test_signature_hex_case_does_not_matter() -> None:
    body = meta_body(meta_text_payload())
    verify_meta_signature(SECRET, body, "sha256=" + sign_meta(SECRET, body)[7:].upper())


def test_signature_is_over_the_raw_bytes() -> None:
    payload = meta_text_payload("olá")
    raw = json.dumps(payload, indent=2).encode()  # same JSON, other bytes
    with pytest.raises(SignatureError, match="does not match"):
        verify_meta_signature(SECRET, raw, sign_meta(SECRET, meta_body(payload)))


def test_invalid_signature() -> None:
    body = meta_body(meta_text_payload())
    with pytest.raises(SignatureError, match="does not match") as info:
        verify_meta_signature(SECRET, body, sign_meta("other-secret", body))
    assert info.value.http_status == 403
    assert info.value.provider == "meta"


def test_tampered_body() -> None:
    body = meta_body(meta_text_payload("oi"))
    signature = sign_meta(SECRET, body)
    with pytest.raises(SignatureError):
        verify_meta_signature(SECRET, body.replace(b'"oi"', b'"ok"'), signature)


@pytest.mark.parametrize("header", ["sha1=abc", "abc", "SHA256=", "sha256"])
def test_wrong_prefix(header: str) -> None:
    with pytest.raises(SignatureError, match="does not start with sha256="):
        verify_meta_signature(SECRET, b"{}", header)


@pytest.mark.parametrize("header", [None, ""])
def test_missing_signature(header: str | None) -> None:
    with pytest.raises(SignatureError, match="missing X-Hub-Signature-256"):
        verify_meta_signature(SECRET, b"{}", header)


def test_non_ascii_signature_is_rejected_not_crashing() -> None:
    with pytest.raises(SignatureError):
        verify_meta_signature(SECRET, b"{}", "sha256=ção")


def test_no_app_secret_never_validates() -> None:
    with pytest.raises(SignatureError, match="no Meta app secret"):
        verify_meta_signature("", b"{}", sign_meta("", b"{}"))


# --------------------------------------------------------------------------- subscription


def test_subscription_returns_the_challenge() -> None:
    assert verify_meta_subscription("tok", "subscribe", "tok", "1158201444") == "1158201444"


@pytest.mark.parametrize(
    ("mode", "token", "match"),
    [
        ("subscribe", "wrong", "does not match"),
        ("subscribe", None, "does not match"),
        ("unsubscribe", "tok", "hub.mode"),
        (None, "tok", "hub.mode"),
    ],
)
def test_subscription_rejected(mode: str | None, token: str | None, match: str) -> None:
    with pytest.raises(SignatureError, match=match):
        verify_meta_subscription("tok", mode, token, "123")


def test_subscription_without_configured_token() -> None:
    with pytest.raises(SignatureError):
        verify_meta_subscription("", "subscribe", "", "123")


def test_subscription_without_challenge() -> None:
    with pytest.raises(MalformedPayload, match=r"hub\.challenge"):
        verify_meta_subscription("tok", "subscribe", "tok", None)


# --------------------------------------------------------------------------- messages


def test_text_message() -> None:
    wamid = new_wamid()
    delivery = parse(
        meta_text_payload(
            "Gastei 50 no mercado",
            from_="+5511999990000",
            profile_name="Bia",
            id=wamid,
            timestamp=1780488000,
        )
    )
    assert delivery.statuses == ()
    [msg] = delivery.messages
    assert msg.channel == "meta"
    assert msg.provider_message_id == wamid
    assert msg.user_number == "+5511999990000"
    assert msg.business_number == "+14155238886"
    assert msg.thread_id == "meta:+14155238886:+5511999990000"
    assert msg.phone_number_id == META_PHONE_NUMBER_ID
    assert msg.kind == "text"
    assert msg.text == "Gastei 50 no mercado"
    assert msg.profile_name == "Bia"
    assert msg.timestamp == datetime.fromtimestamp(1780488000, UTC)
    assert msg.reply_to is None
    assert msg.answerable


def test_display_phone_number_with_formatting_is_normalised() -> None:
    [msg] = parse(meta_text_payload(display_phone_number="+1 (555) 078-3881")).messages
    assert msg.business_number == "+15550783881"


@pytest.mark.parametrize("kind", ["image", "audio", "video", "document", "sticker"])
def test_media_messages(kind: str) -> None:
    caption = "nota do mercado" if kind in ("image", "video", "document") else None
    filename = "fatura.pdf" if kind == "document" else None
    [msg] = parse(
        meta_payload(
            [
                meta_media_message(
                    kind,
                    media_id="1234567890",
                    mime_type="x/y",
                    caption=caption,
                    filename=filename,
                )
            ]
        )
    ).messages
    assert msg.kind == "media"
    [media] = msg.media
    assert (media.kind, media.media_id, media.mime_type) == (kind, "1234567890", "x/y")
    assert media.caption == caption
    assert media.filename == filename
    assert msg.text == (caption or "")


def test_location_message() -> None:
    [msg] = parse(
        meta_payload(
            [meta_location_message(-23.5614, -46.6559, name="MASP", address="Av. Paulista, 1578")]
        )
    ).messages
    assert msg.kind == "location"
    assert msg.location is not None
    assert (msg.location.latitude, msg.location.longitude) == (-23.5614, -46.6559)
    assert (msg.location.name, msg.location.address) == ("MASP", "Av. Paulista, 1578")


def test_contacts_message() -> None:
    [msg] = parse(
        meta_payload(
            [meta_contacts_message([("Ana Souza", "+5511988887777"), ("Bruno", "+5521977776666")])]
        )
    ).messages
    assert msg.kind == "contacts"
    assert [c["name"]["formatted_name"] for c in msg.contacts] == ["Ana Souza", "Bruno"]
    assert msg.contacts[0]["phones"][0]["phone"] == "+5511988887777"


@pytest.mark.parametrize("reply_type", ["button_reply", "list_reply"])
def test_interactive_replies(reply_type: str) -> None:
    [msg] = parse(
        meta_payload([meta_interactive_message("fatura", "Ver fatura", reply_type=reply_type)])
    ).messages
    assert msg.kind == "interactive"
    assert msg.payload == {"id": "fatura", "title": "Ver fatura"}
    assert msg.text == "Ver fatura"


def test_list_reply_keeps_the_description() -> None:
    [msg] = parse(
        meta_payload(
            [meta_interactive_message("m", "Maio", reply_type="list_reply", description="R$ 10")]
        )
    ).messages
    assert msg.payload == {"id": "m", "title": "Maio", "description": "R$ 10"}


def test_unknown_interactive_reply_is_unsupported() -> None:
    message = meta_message("interactive", {"type": "brand_new_reply", "brand_new_reply": {}})
    [msg] = parse(meta_payload([message])).messages
    assert msg.kind == "unsupported"
    assert msg.raw_type == "interactive.brand_new_reply"
    assert not msg.answerable


def test_template_button() -> None:
    [msg] = parse(meta_payload([meta_button_message("VER_FATURA", "Ver fatura")])).messages
    assert msg.kind == "button"
    assert msg.payload == {"id": "VER_FATURA", "title": "Ver fatura"}
    assert msg.text == "Ver fatura"


def test_reaction_and_removed_reaction() -> None:
    target = new_wamid()
    added, removed = parse(
        meta_payload(
            [meta_reaction_message(target, "❤️"), meta_reaction_message(target, emoji=None)]
        )
    ).messages
    assert added.kind == removed.kind == "reaction"
    assert added.reaction == {"message_id": target, "emoji": "❤️"}
    assert removed.reaction == {"message_id": target, "emoji": None}
    assert not added.answerable


@pytest.mark.parametrize("type_", ["unsupported", "system", "order", "brand_new_type"])
def test_unsupported_and_unknown_types(type_: str) -> None:
    [msg] = parse(meta_payload([meta_unsupported_message(type_)])).messages
    assert msg.kind == "unsupported"
    assert msg.raw_type == type_
    assert not msg.answerable


def test_context_becomes_reply_to() -> None:
    original = new_wamid()
    [msg] = parse(meta_payload([meta_text_message("e esse?", context_id=original)])).messages
    assert msg.reply_to == original


def test_profile_name_matched_by_wa_id() -> None:
    payload = meta_payload(
        [
            meta_text_message("oi", from_="+5511911111111"),
            meta_text_message("olá", from_="+5511922222222"),
        ],
        profiles={"+5511911111111": "Ana", "+5511922222222": "Bruno"},
    )
    payload["entry"][0]["changes"][0]["value"]["contacts"].reverse()
    ana, bruno = parse(payload).messages
    assert (ana.profile_name, bruno.profile_name) == ("Ana", "Bruno")


def test_profile_name_absent_when_no_contact_matches() -> None:
    payload = meta_text_payload()
    payload["entry"][0]["changes"][0]["value"]["contacts"][0]["wa_id"] = "15550000000"
    [msg] = parse(payload).messages
    assert msg.profile_name is None


def test_every_entry_change_and_message_is_handled_in_order() -> None:
    ids = [new_wamid() for _ in range(6)]
    sent = new_wamid()
    payload = meta_delivery(
        meta_entry(
            meta_change([meta_text_message("1", id=ids[0]), meta_text_message("2", id=ids[1])]),
            meta_change([], [meta_status(sent, "delivered")]),
            meta_change(
                [meta_text_message("3", id=ids[2])],
                [meta_status(sent, "read")],
                display_phone_number="+5511300000000",
                phone_number_id="999",
            ),
        ),
        meta_entry(
            meta_change(
                [
                    meta_text_message("4", id=ids[3], from_="+5521988880000"),
                    meta_media_message("image", id=ids[4]),
                    meta_reaction_message(ids[0], id=ids[5]),
                ]
            ),
            waba_id="another-waba",
        ),
    )
    delivery = parse(payload)
    assert [m.provider_message_id for m in delivery.messages] == ids
    assert [m.text for m in delivery.messages[:4]] == ["1", "2", "3", "4"]
    assert delivery.messages[2].business_number == "+5511300000000"
    assert delivery.messages[2].phone_number_id == "999"
    assert delivery.messages[3].user_number == "+5521988880000"
    assert [s.status for s in delivery.statuses] == ["delivered", "read"]


def test_changes_for_other_fields_are_ignored() -> None:
    payload = meta_delivery(
        meta_entry(
            {"field": "message_template_status_update", "value": {"event": "APPROVED"}},
            {"field": "account_update", "value": "anything"},
            meta_change([meta_text_message("oi")]),
        )
    )
    assert [m.text for m in parse(payload).messages] == ["oi"]


def test_unknown_extra_fields_are_accepted() -> None:
    payload = meta_text_payload()
    payload["brand_new"] = {"x": 1}
    payload["entry"][0]["time"] = 1780488000
    value = payload["entry"][0]["changes"][0]["value"]
    value["new_thing"] = [1, 2]
    value["metadata"]["extra"] = True
    value["messages"][0]["text"]["preview_url"] = False
    value["messages"][0]["referral"] = {"source_url": "https://x"}
    [msg] = parse(payload).messages
    assert msg.text == "oi"


def test_empty_delivery() -> None:
    delivery = parse(meta_delivery())
    assert delivery.messages == ()
    assert delivery.statuses == ()


# --------------------------------------------------------------------------- statuses


def test_statuses() -> None:
    wamid = new_wamid()
    delivered, failed = parse(
        meta_payload(
            statuses=[
                meta_status(wamid, "delivered", timestamp=1780488000),
                meta_status(
                    wamid, "failed", error_code=131047, error_title="Re-engagement message"
                ),
            ]
        )
    ).statuses
    assert delivered.channel == "meta"
    assert delivered.provider_message_id == wamid
    assert delivered.status == "delivered"
    assert delivered.recipient == "+5511999990000"
    assert delivered.timestamp == datetime.fromtimestamp(1780488000, UTC)
    assert delivered.error_code is None
    assert failed.status == "failed"
    assert failed.error_code == "131047"
    assert failed.error_message == "Re-engagement message"


# --------------------------------------------------------------------------- not a delivery (400)


def test_not_json() -> None:
    assert reason(b"{not json").startswith("body is not JSON")


def test_not_an_object() -> None:
    assert reason(b"[1, 2]") == "body is not a JSON object"


def test_wrong_object() -> None:
    payload = meta_text_payload()
    payload["object"] = "page"
    assert reason(payload) == "object is 'page', expected 'whatsapp_business_account'"


def test_missing_object_and_entry() -> None:
    assert reason(b"{}").startswith("missing field object")
    assert reason(b'{"object": "whatsapp_business_account"}') == "missing field entry"


def test_entry_that_is_not_a_list() -> None:
    assert reason(b'{"object": "whatsapp_business_account", "entry": "nope"}') == (
        "entry is not a list, got 'nope'"
    )


# --------------------------------------------------------------------------- rejected items


def test_missing_sender() -> None:
    payload = meta_text_payload()
    value = payload["entry"][0]["changes"][0]["value"]
    del value["messages"][0]["from"], value["contacts"]
    assert rejected(payload) == (
        "entry[0].changes[0].value.messages[0]",
        "missing field from (and no business-scoped user id)",
    )


def test_missing_from_is_taken_from_the_only_contact() -> None:
    payload = meta_text_payload(from_="+5511988887777")
    del payload["entry"][0]["changes"][0]["value"]["messages"][0]["from"]
    [msg] = parse(payload).messages
    assert msg.user_number == "+5511988887777"


def test_bad_timestamp_names_the_path_and_keeps_the_rest() -> None:
    payload = meta_delivery(
        meta_entry(
            meta_change([meta_text_message("1")]),
            meta_change([meta_text_message("2"), meta_text_message(timestamp="17x")]),
        )
    )
    delivery = parse(payload)
    assert [m.text for m in delivery.messages] == ["1", "2"]
    [item] = delivery.rejected
    assert item.path == "entry[0].changes[1].value.messages[1]"
    assert item.reason == "timestamp is not a unix time: '17x'"
    assert (
        item.provider_message_id == payload["entry"][0]["changes"][1]["value"]["messages"][1]["id"]
    )


def test_bad_status_timestamp() -> None:
    payload = meta_payload(statuses=[meta_status(new_wamid(), timestamp="yesterday")])
    path, why = rejected(payload)
    assert path == "entry[0].changes[0].value.statuses[0]"
    assert why.startswith("timestamp is not a unix time")


def test_sender_that_is_not_a_number() -> None:
    payload = meta_payload([meta_text_message(from_="abc")])
    assert rejected(payload) == (
        "entry[0].changes[0].value.messages[0]",
        "from is not a phone number: 'abc'",
    )


def test_status_recipient_that_is_not_a_number() -> None:
    payload = meta_payload(statuses=[meta_status(new_wamid(), recipient="x")])
    path, why = rejected(payload)
    assert path == "entry[0].changes[0].value.statuses[0]"
    assert why.startswith("recipient_id is not a phone number")


def test_missing_metadata() -> None:
    payload = meta_text_payload()
    del payload["entry"][0]["changes"][0]["value"]["metadata"]
    assert rejected(payload) == ("entry[0].changes[0].value", "missing field metadata")


def test_missing_change_value() -> None:
    payload = meta_delivery(meta_entry({"field": "messages"}))
    assert rejected(payload) == ("entry[0].changes[0].value", "missing field value")


@pytest.mark.parametrize(
    ("message", "path"),
    [
        (meta_message("text"), "text"),
        (meta_message("text", {"preview_url": False}), "text.body"),
        (meta_message("image"), "image"),
        (meta_message("image", {"mime_type": "image/jpeg"}), "image.id"),
        (meta_message("location", {"latitude": 1.0}), "location.longitude"),
        (meta_message("contacts"), "contacts"),
        (meta_message("interactive"), "interactive"),
        (meta_message("interactive", {"type": "button_reply"}), "interactive.button_reply"),
        (meta_message("button", {"payload": "X"}), "button.text"),
        (meta_message("reaction", {"emoji": "👍"}), "reaction.message_id"),
        (meta_message("edit", {"message": {}}), "edit.original_message_id"),
        (meta_message("revoke"), "revoke"),
        (meta_message("text", {"body": "x"}, id=None) | {"id": None}, "id"),
    ],
)
def test_missing_type_object_names_the_field(message: dict[str, Any], path: str) -> None:
    item_path, got = rejected(meta_payload([message]))
    assert item_path == "entry[0].changes[0].value.messages[0]"
    assert got in (f"missing field {path}",) or got.startswith(f"{path}:")


def test_location_out_of_range() -> None:
    _, got = rejected(meta_payload([meta_location_message(91.0, 0.0)]))
    assert got.startswith("location.latitude: input should")


def test_wrong_type_names_the_field_and_value() -> None:
    payload = meta_text_payload()
    payload["entry"][0]["changes"][0]["value"]["messages"][0]["text"]["body"] = 42
    assert rejected(payload)[1] == "text.body: input should be a valid string, got 42"


def test_several_problems_are_counted() -> None:
    payload = meta_text_payload()
    message = payload["entry"][0]["changes"][0]["value"]["messages"][0]
    del message["id"], message["timestamp"]
    assert rejected(payload)[1].endswith("(and 1 more problem)")
