"""Meta payloads seen in real traffic (wire shapes from Meta's docs, tests/data/meta) and
hostile bodies: what is parsed, what is rejected and why, and that nothing crashes."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from channels import MalformedPayload, ParsedDelivery, mask_thread_id, parse_meta_payload
from tests.fakes.payloads import (
    fixture_bytes,
    meta_body,
    meta_edit_message,
    meta_flow_message,
    meta_payload,
    meta_revoke_message,
    meta_status,
    meta_text_message,
    meta_unsupported_message,
    meta_welcome_message,
    new_wamid,
)

BSUID = "BR.1502576394655843"


def fixture(name: str) -> ParsedDelivery:
    return parse_meta_payload(fixture_bytes(f"meta/{name}"))


def parse(payload: dict[str, Any]) -> ParsedDelivery:
    return parse_meta_payload(meta_body(payload))


def refused(body: bytes) -> str:
    with pytest.raises(MalformedPayload) as info:
        parse_meta_payload(body)
    assert info.value.http_status == 400
    return info.value.reason


# --------------------------------------------------------------------------- usernames (BSUID)


def test_message_from_a_username_user_is_keyed_by_the_bsuid() -> None:
    [msg] = fixture("bsuid_only_text.json").messages
    assert msg.user_number == BSUID
    assert msg.user_bsuid == BSUID
    assert msg.thread_id == f"meta:+15550783881:{BSUID}"
    assert msg.profile_name == "Bia"
    assert msg.text == "gastei 120 no mercado"
    assert msg.answerable


def test_bsuid_only_in_contacts_is_enough() -> None:
    [msg] = fixture("bsuid_contact_only_text.json").messages
    assert msg.user_number == msg.user_bsuid == "BR.8830127744019928"
    assert msg.profile_name == "Caio"


def test_phone_stays_the_key_when_both_are_given() -> None:
    [msg] = fixture("bsuid_with_phone_text.json").messages
    assert msg.user_number == "+5511999990000"
    assert msg.user_bsuid == "BR.1234567890123456"
    assert msg.thread_id == "meta:+15550783881:+5511999990000"


def test_a_bsuid_where_the_phone_usually_is_is_taken_as_the_bsuid() -> None:
    payload = meta_payload([meta_text_message(from_=BSUID)])
    [msg] = parse(payload).messages
    assert (msg.user_number, msg.user_bsuid) == (BSUID, BSUID)


def test_a_thread_keyed_by_bsuid_is_masked_in_logs() -> None:
    [msg] = fixture("bsuid_only_text.json").messages
    masked = mask_thread_id(msg.thread_id)
    assert masked == "meta:+15550783881:BR.****5843"
    assert "1502576394" not in masked


@pytest.mark.parametrize("bad", ["BR:123", "brasil.123", "BR." + "9" * 129, "BR.12 34"])
def test_a_bsuid_that_cannot_be_a_thread_key_is_rejected(bad: str) -> None:
    delivery = parse(meta_payload([meta_text_message(from_=None, user_id=bad)]))
    assert delivery.messages == ()
    [item] = delivery.rejected
    assert item.reason.startswith("from_user_id is not a business-scoped user id")
    assert "99999" not in item.reason  # never quoted whole in a reason (it reaches logs)


def test_a_change_without_its_field_name_is_rejected() -> None:
    payload = meta_payload([meta_text_message("fica")])
    payload["entry"][0]["changes"].append({"value": {}})
    delivery = parse(payload)
    assert [m.text for m in delivery.messages] == ["fica"]
    assert [(r.path, r.reason) for r in delivery.rejected] == [
        ("entry[0].changes[1]", "missing field field")
    ]


def test_status_for_a_username_user() -> None:
    [status] = fixture("bsuid_statuses.json").statuses
    assert status.recipient == BSUID
    assert status.recipient_bsuid == BSUID
    assert status.status == "read"


# --------------------------------------------------------------------------- groups, errors


def test_group_statuses_are_recorded_with_the_group_id() -> None:
    sent, failed = fixture("group_statuses.json").statuses
    group = "Y2FwaV9ncm91cDoxNzA1NTU1MDEzOToxMjAzNjM0MDQ2OTQyMzM4MjAZD"
    assert (sent.recipient, sent.recipient_type, sent.status) == (group, "group", "sent")
    assert (failed.status, failed.error_code) == ("failed", "131009")


def test_a_group_id_with_spaces_is_rejected_alone() -> None:
    payload = meta_payload(
        statuses=[
            meta_status(new_wamid(), recipient="not a group", recipient_type="group"),
            meta_status(new_wamid()),
        ]
    )
    delivery = parse(payload)
    assert len(delivery.statuses) == 1
    assert delivery.rejected[0].reason.startswith("recipient_id is not a group id")


def test_interactive_without_its_object_is_unsupported_with_the_error() -> None:
    [msg] = fixture("interactive_without_object.json").messages
    assert msg.kind == "unsupported"
    assert msg.raw_type == "interactive"
    assert (msg.error_code, msg.error_message) == ("131000", "Something went wrong")
    assert not msg.answerable


# --------------------------------------------------------------------------- one bad item


def test_one_bad_item_does_not_refuse_the_batch() -> None:
    delivery = fixture("batch_with_bad_items.json")
    assert [m.provider_message_id for m in delivery.messages] == [
        "wamid.BATCH-OK-1",
        "wamid.BATCH-OK-2",
    ]
    assert [s.provider_message_id for s in delivery.statuses] == ["wamid.BATCH-STATUS-OK"]
    assert [(r.path, r.reason, r.provider_message_id) for r in delivery.rejected] == [
        (
            "entry[0].changes[0].value.messages[1]",
            "timestamp is not a unix time: 'ontem'",
            "wamid.BATCH-BAD-TIMESTAMP",
        ),
        (
            "entry[0].changes[0].value.statuses[1]",
            "missing field status",
            "wamid.BATCH-STATUS-BAD",
        ),
        (
            "entry[0].changes[1].value",
            "missing field metadata.display_phone_number",
            None,
        ),
        ("entry[1]", "is not an object, got 'not an entry'", None),
    ]


def test_changes_that_are_not_lists_are_rejected_alone() -> None:
    payload = meta_payload([meta_text_message("fica")])
    payload["entry"].append({"id": "x", "changes": {"field": "messages"}})
    payload["entry"][0]["changes"][0]["value"]["statuses"] = "nope"
    delivery = parse(payload)
    assert [m.text for m in delivery.messages] == ["fica"]
    assert [(r.path, r.reason) for r in delivery.rejected] == [
        ("entry[0].changes[0].value.statuses", "is not a list, got 'nope'"),
        ("entry[1].changes", "is not a list, got a JSON object"),
    ]


# --------------------------------------------------------------------------- edits, deletes


def test_an_edit_is_an_answerable_correction_of_the_original() -> None:
    [msg] = fixture("edit.json").messages
    assert msg.kind == "edit"
    assert msg.edit_of == "wamid.HBgNNTUxMTk5OTk5MDAwMBUCABIYFjNFQjBPUklHSU5BTC01MAA="
    assert msg.text == "gastei 500 no mercado"
    assert msg.answerable
    assert msg.agent_text() == (
        '[o usuário corrigiu uma mensagem anterior; texto corrigido: "gastei 500 no mercado"]'
    )


def test_an_edited_caption_is_the_new_text() -> None:
    original = new_wamid()
    message = meta_edit_message(original)
    message["edit"]["message"] = {"type": "image", "image": {"caption": "nota de 500"}}
    [msg] = parse(meta_payload([message])).messages
    assert (msg.kind, msg.edit_of, msg.text) == ("edit", original, "nota de 500")


def test_a_delete_is_recorded_not_answered() -> None:
    [msg] = fixture("revoke.json").messages
    assert msg.kind == "delete"
    assert msg.deleted_id == "wamid.HBgNNTUxMTk5OTk5MDAwMBUCABIYFjNFQjBPUklHSU5BTC01MAA="
    assert not msg.answerable
    assert msg.agent_text() == "[o usuário apagou uma mensagem anterior]"


def test_edit_and_poll_cloud_api_cannot_show_stay_unsupported() -> None:
    edit, poll = fixture("unsupported_edit_and_poll.json").messages
    assert (edit.kind, edit.raw_type, edit.error_code) == (
        "unsupported",
        "unsupported.edit",
        "131051",
    )
    assert poll.raw_type == "unsupported.poll_creation"
    assert not edit.answerable
    assert not poll.answerable
    assert edit.agent_text() == "[mensagem editada (o novo texto não chegou)]"
    assert poll.agent_text() == "[enquete]"


def test_builders_round_trip_through_the_parser() -> None:
    original = new_wamid()
    edit, revoke = parse(
        meta_payload([meta_edit_message(original, "gastei 500"), meta_revoke_message(original)])
    ).messages
    assert (edit.kind, edit.edit_of, edit.text) == ("edit", original, "gastei 500")
    assert (revoke.kind, revoke.deleted_id) == ("delete", original)


# --------------------------------------------------------------------------- the rest


def test_request_welcome_is_answered_with_the_greeting() -> None:
    [msg] = fixture("request_welcome.json").messages
    assert msg.kind == "welcome"
    assert msg.answerable
    assert msg.agent_text() == "[o usuário abriu a conversa pela primeira vez]"


def test_a_submitted_flow_is_parsed_and_answerable() -> None:
    [msg] = fixture("flow_nfm_reply.json").messages
    assert msg.kind == "flow"
    assert msg.payload is not None
    assert msg.payload["response"] == {
        "flow_token": "AQAAAAACS5FpgQ_cAAAAAD0QI3s.",
        "categoria": "mercado",
        "valor": "120,50",
    }
    assert msg.reply_to == "wamid.HBgNMTU1NTA3ODM4ODEVAgARGBJGTE9XLVNFTlQtMDAxAA=="
    assert msg.answerable
    assert msg.agent_text() == "[formulário enviado: categoria: mercado; valor: 120,50]"


@pytest.mark.parametrize("response", ["not json", "[1, 2]", "[" * 100 + "]" * 100, ""])
def test_a_flow_with_an_unreadable_response_keeps_the_message(response: str) -> None:
    [msg] = parse(meta_payload([meta_flow_message(response)])).messages
    assert msg.kind == "flow"
    assert msg.payload is not None
    assert msg.payload["response"] == {}
    assert msg.agent_text() == "[formulário enviado]"


def test_stickers_are_recorded_not_answered() -> None:
    [msg] = fixture("sticker.json").messages
    assert msg.kind == "media"
    assert msg.media[0].kind == "sticker"
    assert not msg.answerable
    assert msg.agent_text() == "[figurinha recebida]"


def test_a_system_message_without_contacts_is_recorded() -> None:
    [msg] = fixture("system_user_changed_user_id.json").messages
    assert msg.kind == "unsupported"
    assert msg.raw_type == "system.user_changed_user_id"
    assert msg.user_number == "BR.7700112233445566"
    assert not msg.answerable


def test_builders_for_welcome_and_unsupported_subtypes() -> None:
    welcome, poll = parse(
        meta_payload([meta_welcome_message(), meta_unsupported_message(subtype="poll_update")])
    ).messages
    assert welcome.kind == "welcome"
    assert poll.raw_type == "unsupported.poll_update"


# --------------------------------------------------------------------------- hostile bodies


def test_deeply_nested_arrays_are_refused_with_a_reason() -> None:
    body = b"[" * 5000 + b"]" * 5000
    assert refused(body) == "body is nested deeper than 32 levels"


def test_deep_nesting_inside_a_message_is_refused_before_parsing() -> None:
    payload = meta_payload([meta_text_message()])
    payload["entry"][0]["changes"][0]["value"]["messages"][0]["extra"] = "PLACEHOLDER"
    body = meta_body(payload).replace(b'"PLACEHOLDER"', b"[" * 900 + b"]" * 900)
    assert refused(body) == "body is nested deeper than 32 levels"


def test_unbalanced_deep_nesting_is_refused_with_a_reason() -> None:
    assert refused(b"[" * 5000).startswith("body is ")


def test_brackets_inside_texts_are_not_nesting() -> None:
    [msg] = parse(meta_payload([meta_text_message("[" * 200 + "oi" + "]" * 200)])).messages
    assert msg.text.startswith("[[[")


def test_a_huge_integer_is_refused_with_a_reason() -> None:
    body = meta_body(meta_payload([meta_text_message()])).replace(
        b'"messaging_product"', b'"big":' + b"9" * 5000 + b',"messaging_product"'
    )
    assert refused(body).startswith("body is not JSON: Exceeds the limit (4300 digits)")


def test_a_huge_integer_as_timestamp_rejects_that_message_only() -> None:
    ok = meta_text_message("fica")
    bad = meta_text_message("sai", timestamp="9" * 4000)
    delivery = parse(meta_payload([ok, bad]))
    assert [m.text for m in delivery.messages] == ["fica"]
    assert delivery.rejected[0].reason.startswith("timestamp is not a unix time")


def test_a_lone_surrogate_is_repaired_and_the_delivery_kept() -> None:
    payload = meta_payload([meta_text_message("gastei 50 PLACEHOLDER"), meta_text_message("ok")])
    body = meta_body(payload).replace(b"PLACEHOLDER", b"\\ud800")
    bad, good = parse_meta_payload(body).messages
    assert bad.text == "gastei 50 \ufffd"
    assert good.text == "ok"
    json.dumps(bad.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")  # Redis-safe


def test_surrogates_in_keys_names_and_ids_are_repaired() -> None:
    payload = meta_payload([meta_text_message("oi")], profiles={"+5511999990000": "PLACEHOLDER"})
    payload["entry"][0]["changes"][0]["value"]["messages"][0]["KEYHOLDER"] = 1
    body = (
        meta_body(payload).replace(b"PLACEHOLDER", b"Ana \\udfff").replace(b"KEYHOLDER", b"\\udc80")
    )
    [msg] = parse_meta_payload(body).messages
    assert msg.profile_name == "Ana \ufffd"


def test_valid_escaped_pairs_are_kept() -> None:
    body = meta_body(meta_payload([meta_text_message("PLACEHOLDER")])).replace(
        b"PLACEHOLDER", b"\\ud83d\\udcb0 pago"
    )
    [msg] = parse_meta_payload(body).messages
    assert msg.text == "💰 pago"


def test_invalid_utf8_bytes_are_repaired() -> None:
    body = meta_body(meta_payload([meta_text_message("PLACEHOLDER")])).replace(
        b"PLACEHOLDER", b"caf\xe9 \xed\xa0\x80"
    )
    [msg] = parse_meta_payload(body).messages
    assert msg.text.startswith("caf\ufffd")
    msg.text.encode("utf-8")


def test_a_large_flat_delivery_parses_quickly() -> None:
    messages = [meta_text_message(f"m{i}") for i in range(2000)]
    body = meta_body(meta_payload(messages))
    started = time.perf_counter()
    delivery = parse_meta_payload(body)
    assert len(delivery.messages) == 2000
    assert time.perf_counter() - started < 5  # generous: about 0.1 s on a laptop


def test_timestamps_stay_timezone_aware() -> None:
    [msg] = fixture("request_welcome.json").messages
    assert msg.timestamp == datetime.fromtimestamp(1780488480, UTC)
