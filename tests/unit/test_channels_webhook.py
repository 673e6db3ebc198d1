"""The WebhookAdapter port: Twilio (inbound, status callbacks) and Meta adapters, plain
data in and out, and the cheap checks that come before any parsing."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest

from channels import (
    MAX_FORM_FIELDS,
    ChannelError,
    MalformedPayload,
    MetaWebhook,
    ParsedDelivery,
    PayloadTooLarge,
    SignatureError,
    SubscriptionHandshake,
    TwilioWebhook,
    WebhookAdapter,
    WebhookRequest,
)
from tests.fakes.payloads import (
    fixture_bytes,
    meta_body,
    meta_payload,
    meta_status,
    meta_text_message,
    new_wamid,
    sign_meta,
    sign_twilio,
    twilio_inbound_params,
    twilio_status_params,
)

TOKEN = "test-auth-token"
SECRET = "app-secret"
URL = "https://mel.example.com/webhooks/twilio"
STATUS_URL = URL + "/status"


def twilio_request(
    params: dict[str, str] | None = None,
    *,
    body: bytes | None = None,
    url: str = URL,
    signature: str | None = None,
    received_at: datetime | None = None,
) -> WebhookRequest:
    """A Twilio POST as the web layer hands it over, signed unless ``signature`` is given."""
    if body is None:
        body = urlencode(params or twilio_inbound_params()).encode()
    if signature is None:
        signature = sign_twilio(TOKEN, url, WebhookRequest(url, body=body).form)
    return WebhookRequest(
        url=url,
        headers={
            "content-type": "application/x-www-form-urlencoded",
            "x-twilio-signature": signature,
        },
        body=body,
        received_at=received_at,
    )


def meta_request(body: bytes, *, secret: str = SECRET) -> WebhookRequest:
    headers = {"content-type": "application/json", "x-hub-signature-256": sign_meta(secret, body)}
    return WebhookRequest(url="https://mel.example.com/webhooks/meta", headers=headers, body=body)


def accept(adapter: WebhookAdapter, request: WebhookRequest) -> ParsedDelivery:
    adapter.verify(request)
    return adapter.parse(request)


# --------------------------------------------------------------------------- the port


def test_every_adapter_has_the_one_shape() -> None:
    adapters: list[WebhookAdapter] = [
        TwilioWebhook(TOKEN),
        TwilioWebhook(TOKEN, status_callback=True),
        MetaWebhook(SECRET, "verify-me"),
    ]
    assert all(isinstance(a, WebhookAdapter) for a in adapters)
    assert [a.provider for a in adapters] == ["twilio", "twilio", "meta"]
    assert [isinstance(a, SubscriptionHandshake) for a in adapters] == [False, False, True]


def test_acks_are_plain_data() -> None:
    twiml = TwilioWebhook(TOKEN).ack()
    assert (twiml.status, twiml.content_type) == (200, "text/xml")
    assert b"<Response/>" in twiml.body
    ok = MetaWebhook(SECRET).ack()
    assert (ok.status, ok.content_type, ok.body) == (200, "application/json", b'{"status":"ok"}')


def test_errors_carry_the_http_status_the_web_layer_answers() -> None:
    assert [e.http_status for e in (SignatureError("x"), MalformedPayload("x"))] == [403, 400]
    too_large = PayloadTooLarge("x")
    assert isinstance(too_large, ChannelError)
    assert too_large.http_status == 413


# --------------------------------------------------------------------------- Twilio


def test_twilio_inbound_from_a_recorded_form() -> None:
    body = fixture_bytes("twilio/inbound_messaging_service.form")
    when = datetime(2026, 6, 3, 12, tzinfo=UTC)
    parsed = accept(TwilioWebhook(TOKEN), twilio_request(body=body, received_at=when))
    [msg] = parsed.messages
    assert msg.text == "gastei 50 no mercado"
    assert msg.business_number == "+15550783881"
    assert msg.messaging_service_sid == "MG" + "9" * 32
    assert msg.timestamp == when
    assert msg.thread_id == "twilio:+15550783881:+5511999990000"


def test_twilio_status_callback_from_a_recorded_form() -> None:
    body = fixture_bytes("twilio/status_read.form")
    request = twilio_request(body=body, url=STATUS_URL)
    parsed = accept(TwilioWebhook(TOKEN, status_callback=True), request)
    [status] = parsed.statuses
    assert (status.provider_message_id, status.status) == (
        "SMa1b2c3d4e5f60718293a4b5c6d7e8f90",
        "read",
    )
    assert status.recipient == "+5511999990000"


def test_twilio_status_adapter_on_status_params() -> None:
    sid = "SM" + "b" * 32
    request = twilio_request(
        twilio_status_params(sid=sid, status="failed", error_code=63016), url=STATUS_URL
    )
    [status] = accept(TwilioWebhook(TOKEN, status_callback=True), request).statuses
    assert (status.status, status.error_code) == ("failed", "63016")


def test_twilio_signature_over_another_url_is_refused() -> None:
    request = twilio_request(url=URL)
    moved = WebhookRequest(
        url="https://other.example.com/webhooks/twilio", headers=request.headers, body=request.body
    )
    with pytest.raises(SignatureError, match="does not match"):
        TwilioWebhook(TOKEN).verify(moved)


def test_twilio_malformed_after_a_good_signature_is_400() -> None:
    params = {"MessageSid": "SM" + "c" * 32, "From": "whatsapp:+5511999990000", "Body": "oi"}
    request = twilio_request(params)
    adapter = TwilioWebhook(TOKEN)
    adapter.verify(request)
    with pytest.raises(MalformedPayload, match="missing field To") as info:
        adapter.parse(request)
    assert info.value.http_status == 400


def test_twilio_repeated_fields_are_signed_as_received() -> None:
    body = urlencode(twilio_inbound_params()).encode() + b"&Extra=b&Extra=a"
    accept(TwilioWebhook(TOKEN), twilio_request(body=body))


@pytest.mark.parametrize(
    ("signature", "match"),
    [
        ("", "missing X-Twilio-Signature"),
        ("bm90LXRoZS1zaWduYXR1cmU=", "not a base64 HMAC-SHA1"),  # 24 characters
        ("!" * 28, "not a base64 HMAC-SHA1"),
        ("\udcc3\udca9" * 14, "not a base64 HMAC-SHA1"),  # undecodable bytes, as aiohttp hands them
        ("é" * 28, "not a base64 HMAC-SHA1"),
        ("A" * 27 + "=", "does not match"),  # plausible: checked, and wrong
    ],
)
def test_twilio_bad_signature_headers_are_403_never_a_crash(signature: str, match: str) -> None:
    request = WebhookRequest(URL, headers={"x-twilio-signature": signature}, body=b"Body=oi")
    with pytest.raises(SignatureError, match=match) as info:
        TwilioWebhook(TOKEN).verify(request)
    assert info.value.http_status == 403


def test_twilio_without_a_token_never_validates() -> None:
    request = twilio_request()
    with pytest.raises(SignatureError, match="no Twilio auth token"):
        TwilioWebhook("").verify(request)


def test_a_non_ascii_url_is_a_signature_error() -> None:
    request = twilio_request(
        url="https://mel.example.com/webhooks/twilio", signature="A" * 27 + "="
    )
    odd = WebhookRequest(
        "https://m\udce9l.example.com/webhooks/twilio", headers=request.headers, body=request.body
    )
    with pytest.raises(SignatureError):
        TwilioWebhook(TOKEN).verify(odd)


def test_150000_unsigned_fields_are_refused_before_parsing() -> None:
    body = b"&".join(b"f%d=x" % i for i in range(150_000))
    request = WebhookRequest(URL, headers={"x-twilio-signature": "A" * 27 + "="}, body=body)
    adapter = TwilioWebhook(TOKEN, max_body=len(body) + 1)
    started = time.perf_counter()
    with pytest.raises(PayloadTooLarge, match=f"more than {MAX_FORM_FIELDS}") as info:
        adapter.verify(request)
    assert time.perf_counter() - started < 0.2  # parsing them all takes most of a second
    assert info.value.http_status == 413
    assert info.value.provider == "twilio"


def test_150000_fields_without_a_signature_are_refused_first() -> None:
    body = b"&".join(b"f%d=x" % i for i in range(150_000))
    with pytest.raises(SignatureError, match="missing"):
        TwilioWebhook(TOKEN).verify(WebhookRequest(URL, body=body))


def test_a_twilio_body_over_the_limit_is_413_before_parsing() -> None:
    body = b"Body=" + b"x" * 70_000
    request = WebhookRequest(URL, headers={"x-twilio-signature": "A" * 27 + "="}, body=body)
    with pytest.raises(PayloadTooLarge, match="exceeds 65536"):
        TwilioWebhook(TOKEN).verify(request)


def test_the_form_is_parsed_once() -> None:
    request = twilio_request()
    assert request.form is request.form


def test_form_bytes_that_are_not_utf8_become_replacement_characters() -> None:
    params = twilio_inbound_params()
    body = urlencode(params).encode().replace(b"Body=oi", b"Body=caf%E9+%ED%A0%80")
    [msg] = accept(TwilioWebhook(TOKEN), twilio_request(body=body)).messages
    assert msg.text.startswith("caf\ufffd")
    msg.text.encode("utf-8")


# --------------------------------------------------------------------------- Meta


def test_meta_verify_and_parse() -> None:
    body = meta_body(meta_payload([meta_text_message("oi")], [meta_status(new_wamid())]))
    parsed = accept(MetaWebhook(SECRET), meta_request(body))
    assert [m.text for m in parsed.messages] == ["oi"]
    assert len(parsed.statuses) == 1


def test_meta_bad_signature_is_403() -> None:
    body = meta_body(meta_payload([meta_text_message("oi")]))
    with pytest.raises(SignatureError, match="does not match"):
        MetaWebhook(SECRET).verify(meta_request(body, secret="wrong"))


def test_meta_signature_header_with_undecodable_bytes_is_403() -> None:
    request = WebhookRequest(
        "https://x/webhooks/meta", headers={"x-hub-signature-256": "sha256=\udcff"}, body=b"{}"
    )
    with pytest.raises(SignatureError):
        MetaWebhook(SECRET).verify(request)


def test_meta_hostile_body_after_a_good_signature_is_400_with_reason() -> None:
    body = b"[" * 5000 + b"]" * 5000
    adapter = MetaWebhook(SECRET)
    request = meta_request(body)
    adapter.verify(request)
    with pytest.raises(MalformedPayload, match="nested deeper") as info:
        adapter.parse(request)
    assert info.value.http_status == 400


def test_meta_bad_items_are_reported_and_the_rest_kept() -> None:
    body = fixture_bytes("meta/batch_with_bad_items.json")
    parsed = accept(MetaWebhook(SECRET), meta_request(body))
    assert len(parsed.messages) == 2
    assert len(parsed.rejected) == 4


def test_meta_handshake_echoes_the_challenge() -> None:
    query = {
        "hub.mode": "subscribe",
        "hub.verify_token": "verify-me",
        "hub.challenge": "1158201444",
    }
    answer = MetaWebhook(SECRET, "verify-me").handshake(
        WebhookRequest("https://x", method="GET", query=query)
    )
    assert (answer.status, answer.content_type, answer.body) == (200, "text/plain", b"1158201444")


@pytest.mark.parametrize(
    ("query", "error", "status"),
    [
        (
            {"hub.mode": "subscribe", "hub.verify_token": "nope", "hub.challenge": "1"},
            SignatureError,
            403,
        ),
        (
            {"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": ""},
            MalformedPayload,
            400,
        ),
        ({"hub.mode": "subscribe", "hub.verify_token": "verify-me"}, MalformedPayload, 400),
        (
            {"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "<b>\n"},
            MalformedPayload,
            400,
        ),
        (
            {"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "9" * 300},
            MalformedPayload,
            400,
        ),
        ({"hub.verify_token": "verify-me", "hub.challenge": "1"}, SignatureError, 403),
    ],
)
def test_meta_handshake_refusals(
    query: dict[str, str], error: type[ChannelError], status: int
) -> None:
    with pytest.raises(error) as info:
        MetaWebhook(SECRET, "verify-me").handshake(
            WebhookRequest("https://x", method="GET", query=query)
        )
    assert info.value.http_status == status


def test_meta_handshake_without_a_configured_token_is_403() -> None:
    query = {"hub.mode": "subscribe", "hub.verify_token": "", "hub.challenge": "1"}
    with pytest.raises(SignatureError):
        MetaWebhook(SECRET).handshake(WebhookRequest("https://x", method="GET", query=query))
