"""Re-signing for another URL and other secrets; fresh ids, consistent within a run."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from multidict import MultiDict

from channels import SignatureError, verify_meta_signature, verify_twilio_signature
from gateway.replay import FreshIds, RawDelivery, Redactor, Secrets, prepare, target_url
from gateway.replay.records import twilio_params
from tests.fakes.payloads import (
    meta_body,
    meta_payload,
    meta_reaction_message,
    meta_text_message,
    sign_meta,
    sign_twilio,
    twilio_inbound_params,
)

OLD_URL = "https://mel.example.com/webhooks/twilio"
TARGET = "http://127.0.0.1:8081"


def twilio_raw(sid: str = "SM" + "1" * 32, *, query: str = "") -> RawDelivery:
    params = twilio_inbound_params(sid=sid, body="oi")
    return RawDelivery(
        id="1-0", received_at="2026-06-03T00:00:00Z", provider="twilio", method="POST",
        path="/webhooks/twilio", query=query,
        headers={"x-twilio-signature": sign_twilio("old-token", OLD_URL, params),
                 "content-type": "application/x-www-form-urlencoded",
                 "i-twilio-idempotency-token": "abc", "x-forwarded-for": "1.2.3.4"},
        body=urlencode(params).encode(), status=200, message_ids=(sid,),
    )  # fmt: skip


def meta_raw(*messages: dict[str, object]) -> RawDelivery:
    body = meta_body(meta_payload(list(messages)))
    return RawDelivery(
        id="2-0", received_at="2026-06-03T00:00:01Z", provider="meta", method="POST",
        path="/webhooks/meta", query="",
        headers={"x-hub-signature-256": sign_meta("old-secret", body),
                 "content-type": "application/json"},
        body=body, status=200,
    )  # fmt: skip


def test_twilio_is_signed_for_the_target_url_with_the_targets_token() -> None:
    p = prepare(twilio_raw(query="a=1"), TARGET + "/", Secrets(twilio_auth_token="new"))
    assert p.url == f"{TARGET}/webhooks/twilio?a=1"
    assert p.signature == "recomputed"
    params = MultiDict(twilio_params(p.body))
    verify_twilio_signature("new", p.url, params, p.headers["x-twilio-signature"])
    with pytest.raises(SignatureError):
        verify_twilio_signature("old-token", p.url, params, p.headers["x-twilio-signature"])
    assert "x-forwarded-for" not in p.headers
    assert "i-twilio-idempotency-token" not in p.headers
    assert p.headers["x-mel-replay-of"] == "1-0"


def test_meta_is_signed_over_the_body_with_the_targets_secret() -> None:
    p = prepare(meta_raw(meta_text_message("oi")), TARGET, Secrets(meta_app_secret="s2"))
    verify_meta_signature("s2", p.body, p.headers["x-hub-signature-256"])
    assert p.body == p.original.body  # nothing rewritten: the bytes go out as received


def test_without_a_secret_the_original_headers_go_and_say_so() -> None:
    d = twilio_raw()
    p = prepare(d, TARGET, Secrets())
    assert p.problem is None
    assert p.signature == "original"
    assert p.headers["x-twilio-signature"] == d.headers["x-twilio-signature"]


def test_without_a_secret_a_rewritten_body_is_not_sent() -> None:
    p = prepare(twilio_raw(), TARGET, Secrets(meta_app_secret="only-meta"), FreshIds())
    assert p.problem is not None
    assert "TWILIO_AUTH_TOKEN" in p.problem
    assert "fresh ids" in p.problem
    redacted = Redactor().delivery(meta_raw(meta_text_message("oi")))
    q = prepare(redacted, TARGET, Secrets(twilio_auth_token="only-twilio"))
    assert q.problem is not None
    assert "META_APP_SECRET" in q.problem
    assert "redacted" in q.problem


def test_a_redacted_delivery_signed_again_is_accepted() -> None:
    redacted = Redactor().delivery(twilio_raw())
    p = prepare(redacted, TARGET, Secrets(twilio_auth_token="t"))
    verify_twilio_signature(
        "t", p.url, MultiDict(twilio_params(p.body)), p.headers["x-twilio-signature"]
    )


def test_fresh_twilio_ids_replace_every_sid_field_consistently() -> None:
    fresh = FreshIds()
    sid = "SM" + "1" * 32
    first = prepare(twilio_raw(sid), TARGET, Secrets(twilio_auth_token="t"), fresh)
    again = prepare(twilio_raw(sid), TARGET, Secrets(twilio_auth_token="t"), fresh)
    params = dict(twilio_params(first.body))
    new = params["MessageSid"]
    assert new != sid
    assert len(new) == len(sid)
    assert new.startswith("SM")
    assert params["SmsMessageSid"] == params["SmsSid"] == new
    assert first.delivery.message_ids == (new,)
    assert dict(twilio_params(again.body))["MessageSid"] == new  # same original, same new
    assert fresh.mapping == {sid: new}
    verify_twilio_signature(
        "t", first.url, MultiDict(twilio_params(first.body)), first.headers["x-twilio-signature"]
    )


def test_fresh_meta_ids_follow_references_within_the_run() -> None:
    fresh = FreshIds()
    original = meta_text_message("oi", id="wamid.ONE")
    reaction = meta_reaction_message("wamid.ONE", "👍", id="wamid.TWO")
    unknown = meta_reaction_message("wamid.SENT_BY_US", "❤️", id="wamid.THREE")
    p = prepare(meta_raw(original, reaction, unknown), TARGET, Secrets(meta_app_secret="s"), fresh)
    messages = json.loads(p.body)["entry"][0]["changes"][0]["value"]["messages"]
    ids = [m["id"] for m in messages]
    assert all(i.startswith("wamid.") for i in ids)
    assert ids == [fresh.mapping["wamid.ONE"], fresh.mapping["wamid.TWO"],
                   fresh.mapping["wamid.THREE"]]  # fmt: skip
    assert messages[1]["reaction"]["message_id"] == fresh.mapping["wamid.ONE"]
    assert messages[2]["reaction"]["message_id"] == "wamid.SENT_BY_US"  # not ours to renew
    verify_meta_signature("s", p.body, p.headers["x-hub-signature-256"])


def test_target_url_keeps_a_path_prefix() -> None:
    d = twilio_raw()
    assert target_url("https://staging.example.com/mel/", d) == (
        "https://staging.example.com/mel/webhooks/twilio"
    )
