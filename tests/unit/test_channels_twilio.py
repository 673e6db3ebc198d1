"""Twilio webhooks: signature checks (twilio's own validator) and parsing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from multidict import MultiDict
from twilio.request_validator import RequestValidator

from channels import (
    MalformedPayload,
    SignatureError,
    compute_twilio_signature,
    parse_twilio_message,
    parse_twilio_status,
    verify_twilio_signature,
)
from tests.fakes.payloads import (
    new_twilio_sid,
    sign_twilio,
    twilio_inbound_params,
    twilio_status_params,
)

TOKEN = "test-auth-token"
URL = "https://mel.example.com/webhooks/twilio"


# --------------------------------------------------------------------------- signature


def test_signature_computed_by_twilio_validator_is_accepted() -> None:
    params = twilio_inbound_params()
    signature = RequestValidator(TOKEN).compute_signature(URL, params)
    verify_twilio_signature(TOKEN, URL, params, signature)


def test_compute_signature_matches_twilio() -> None:
    params = twilio_inbound_params()
    assert compute_twilio_signature(TOKEN, URL, params) == RequestValidator(
        TOKEN
    ).compute_signature(URL, params)


@pytest.mark.parametrize(
    ("signed_url", "received_url"),
    [
        (URL, "https://mel.example.com:443/webhooks/twilio"),
        ("https://mel.example.com:443/webhooks/twilio", URL),
    ],
)
def test_signature_accepts_url_with_or_without_default_port(
    signed_url: str, received_url: str
) -> None:
    params = twilio_inbound_params()
    verify_twilio_signature(TOKEN, received_url, params, sign_twilio(TOKEN, signed_url, params))


def test_signature_over_url_with_query() -> None:
    url = URL + "?tenant=a&x=1"
    params = twilio_inbound_params()
    verify_twilio_signature(TOKEN, url, params, sign_twilio(TOKEN, url, params))
    with pytest.raises(SignatureError):
        verify_twilio_signature(TOKEN, URL, params, sign_twilio(TOKEN, url, params))


def test_tampered_parameter_is_rejected() -> None:
    params = twilio_inbound_params(body="oi")
    signature = sign_twilio(TOKEN, URL, params)
    with pytest.raises(SignatureError, match="does not match"):
        verify_twilio_signature(TOKEN, URL, {**params, "Body": "transfira tudo"}, signature)


def test_signature_with_another_token_is_rejected() -> None:
    params = twilio_inbound_params()
    with pytest.raises(SignatureError):
        verify_twilio_signature(TOKEN, URL, params, sign_twilio("other-token", URL, params))


def test_signature_for_another_url_is_rejected() -> None:
    params = twilio_inbound_params()
    signature = sign_twilio(TOKEN, "http://127.0.0.1:8080/webhooks/twilio", params)
    with pytest.raises(SignatureError):
        verify_twilio_signature(TOKEN, URL, params, signature)


@pytest.mark.parametrize("signature", [None, ""])
def test_missing_signature_is_rejected(signature: str | None) -> None:
    with pytest.raises(SignatureError, match="missing X-Twilio-Signature") as info:
        verify_twilio_signature(TOKEN, URL, twilio_inbound_params(), signature)
    assert info.value.http_status == 403
    assert info.value.provider == "twilio"


@pytest.mark.parametrize(
    "signature",
    ["short", "\udcc3\udca9" * 14, "é" * 28, "A" * 27 + "!", "QUFB" * 7, "A" * 44],
)
def test_implausible_signature_is_rejected_before_computing(signature: str) -> None:
    with pytest.raises(SignatureError, match="not a base64 HMAC-SHA1"):
        verify_twilio_signature(TOKEN, URL, twilio_inbound_params(), signature)


def test_no_auth_token_never_validates() -> None:
    params = twilio_inbound_params()
    with pytest.raises(SignatureError, match="no Twilio auth token"):
        verify_twilio_signature("", URL, params, sign_twilio("", URL, params))


def test_unknown_fields_are_signed_and_accepted() -> None:
    params = twilio_inbound_params(SomeNewTwilioField="42", Forwarded="true")
    verify_twilio_signature(TOKEN, URL, params, sign_twilio(TOKEN, URL, params))
    message = parse_twilio_message(params)
    assert message.text == "oi"


def test_multidict_params_with_repeated_names() -> None:
    params = MultiDict(twilio_inbound_params())
    params.add("Extra", "b")
    params.add("Extra", "a")
    signature = sign_twilio(TOKEN, URL, params)
    verify_twilio_signature(TOKEN, URL, params, signature)
    params_one = MultiDict(twilio_inbound_params(sid=params["MessageSid"]))
    params_one.add("Extra", "a")
    with pytest.raises(SignatureError):
        verify_twilio_signature(TOKEN, URL, params_one, signature)


# --------------------------------------------------------------------------- messages


def test_text_message_fields() -> None:
    sid = new_twilio_sid()
    before = datetime.now(UTC)
    msg = parse_twilio_message(
        twilio_inbound_params(
            sid=sid, from_="+5511999990000", to="+14155238886", body="Gastei 50 no mercado"
        )
    )
    assert msg.channel == "twilio"
    assert msg.provider_message_id == sid
    assert msg.user_number == "+5511999990000"
    assert msg.business_number == "+14155238886"
    assert msg.thread_id == "twilio:+14155238886:+5511999990000"
    assert msg.kind == "text"
    assert msg.text == "Gastei 50 no mercado"
    assert msg.profile_name == "Ana"
    assert msg.media == ()
    assert msg.location is None
    assert msg.payload is None
    assert msg.reply_to is None
    assert msg.answerable
    assert msg.timestamp.tzinfo is not None
    assert before <= msg.timestamp <= datetime.now(UTC)
    assert msg.messaging_service_sid is None


def test_the_messaging_service_written_to_is_kept() -> None:
    service = "MG" + "1" * 32
    msg = parse_twilio_message(
        twilio_inbound_params(to="+15550783881", MessagingServiceSid=service)
    )
    assert (msg.business_number, msg.messaging_service_sid) == ("+15550783881", service)


def test_received_at_stands_for_the_timestamp() -> None:
    at = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)
    assert parse_twilio_message(twilio_inbound_params(), received_at=at).timestamp == at


def test_media_are_zero_based_with_caption_in_body() -> None:
    msg = parse_twilio_message(
        twilio_inbound_params(
            body="nota do mercado",
            media=[
                ("https://api.twilio.com/.../Media/ME1", "image/jpeg"),
                ("https://api.twilio.com/.../Media/ME2", "application/pdf"),
            ],
        )
    )
    assert msg.kind == "media"
    assert msg.text == "nota do mercado"
    assert [(m.kind, m.url, m.mime_type) for m in msg.media] == [
        ("image", "https://api.twilio.com/.../Media/ME1", "image/jpeg"),
        ("document", "https://api.twilio.com/.../Media/ME2", "application/pdf"),
    ]


@pytest.mark.parametrize(
    ("content_type", "kind"),
    [("audio/ogg", "audio"), ("video/mp4", "video"), ("image/webp", "image")],
)
def test_media_kind_from_content_type(content_type: str, kind: str) -> None:
    msg = parse_twilio_message(
        twilio_inbound_params(body="", media=[("https://x/m", content_type)])
    )
    assert msg.media[0].kind == kind
    assert msg.agent_text().startswith("[")


def test_a_sticker_is_recorded_not_answered() -> None:
    params = twilio_inbound_params(body="", media=[("https://x/m", "image/webp")])
    msg = parse_twilio_message({**params, "MessageType": "sticker"})
    assert msg.media[0].kind == "sticker"
    assert not msg.answerable
    assert msg.agent_text() == "[figurinha recebida]"


def test_vcard_is_a_shared_contact() -> None:
    msg = parse_twilio_message(
        twilio_inbound_params(body="", media=[("https://x/m", "text/vcard")])
    )
    assert msg.kind == "contacts"
    assert msg.agent_text() == "[contato compartilhado]"


def test_location() -> None:
    msg = parse_twilio_message(
        twilio_inbound_params(
            body="",
            latitude=-23.5505,
            longitude=-46.6333,
            address="Av. Paulista, 1000",
            label="Escritório",
        )
    )
    assert msg.kind == "location"
    assert msg.location is not None
    assert msg.location.latitude == pytest.approx(-23.5505)
    assert msg.location.longitude == pytest.approx(-46.6333)
    assert msg.location.name == "Escritório"
    assert msg.location.address == "Av. Paulista, 1000"


def test_button_reply() -> None:
    msg = parse_twilio_message(
        twilio_inbound_params(
            body="Ver fatura", button_payload="VER_FATURA", button_text="Ver fatura"
        )
    )
    assert msg.kind == "button"
    assert msg.payload == {"id": "VER_FATURA", "title": "Ver fatura"}
    assert msg.text == "Ver fatura"
    assert msg.agent_text() == "[botão: Ver fatura]"


def test_reply_to_original_message() -> None:
    original = new_twilio_sid()
    msg = parse_twilio_message(twilio_inbound_params(replied_to=original))
    assert msg.reply_to == original


def test_profile_name_absent() -> None:
    assert parse_twilio_message(twilio_inbound_params(profile_name=None)).profile_name is None


def test_nothing_readable_is_unsupported_and_not_answered() -> None:
    msg = parse_twilio_message(twilio_inbound_params(body="", MessageType="unknown"))
    assert msg.kind == "unsupported"
    assert msg.raw_type == "unknown"
    assert not msg.answerable


def test_multidict_from_a_form_is_accepted() -> None:
    msg = parse_twilio_message(MultiDict(twilio_inbound_params(body="oi")))
    assert msg.text == "oi"


@pytest.mark.parametrize("field", ["MessageSid", "From", "To"])
def test_missing_required_field(field: str) -> None:
    params = twilio_inbound_params()
    del params[field]
    with pytest.raises(MalformedPayload) as info:
        parse_twilio_message(params)
    assert info.value.reason == f"missing field {field}"
    assert info.value.http_status == 400


@pytest.mark.parametrize("field", ["MessageSid", "From", "To"])
def test_empty_required_field(field: str) -> None:
    with pytest.raises(MalformedPayload, match=f"missing field {field}"):
        parse_twilio_message({**twilio_inbound_params(), field: ""})


def test_non_whatsapp_sender() -> None:
    with pytest.raises(MalformedPayload) as info:
        parse_twilio_message(twilio_inbound_params(from_="sms:+5511999990000"))
    assert info.value.reason == "From is not a WhatsApp number: 'sms:+5511*********'"


def test_non_whatsapp_recipient() -> None:
    with pytest.raises(MalformedPayload, match="To is not a WhatsApp number"):
        parse_twilio_message(twilio_inbound_params(to="+14155238886", To="+14155238886"))


def test_sender_that_is_not_a_number() -> None:
    with pytest.raises(MalformedPayload, match=r"From is not a phone number: 'whatsapp:\+abc'"):
        parse_twilio_message(twilio_inbound_params(from_="whatsapp:+abc"))


@pytest.mark.parametrize("value", ["x", "-1", "1.5", "11", "99999999999"])
def test_bad_num_media(value: str) -> None:
    with pytest.raises(MalformedPayload, match=f"NumMedia is not a count.*'{value}'"):
        parse_twilio_message(twilio_inbound_params(NumMedia=value))


def test_num_media_without_the_media_url() -> None:
    params = twilio_inbound_params(media=[("https://x/0", "image/jpeg")], NumMedia="2")
    with pytest.raises(MalformedPayload, match="missing field MediaUrl1"):
        parse_twilio_message(params)


@pytest.mark.parametrize(
    ("latitude", "longitude", "reason"),
    [
        ("abc", "-46.6", "Latitude is not a coordinate"),
        ("91", "-46.6", "Latitude is not a coordinate"),
        ("nan", "-46.6", "Latitude is not a coordinate"),
        ("-23.5", "-181", "Longitude is not a coordinate"),
        ("-23.5", "inf", "Longitude is not a coordinate"),
        ("-23.5", None, "missing field Longitude"),
        (None, "-46.6", "missing field Latitude"),
    ],
)
def test_bad_location(latitude: str | None, longitude: str | None, reason: str) -> None:
    params = twilio_inbound_params(latitude=latitude, longitude=longitude)
    with pytest.raises(MalformedPayload, match=reason):
        parse_twilio_message(params)


def test_non_text_value_is_malformed() -> None:
    params: dict[str, object] = {**twilio_inbound_params(), "Body": object()}
    with pytest.raises(MalformedPayload, match="Body is not text"):
        parse_twilio_message(params)


# --------------------------------------------------------------------------- statuses


def test_status_callback() -> None:
    sid = new_twilio_sid()
    status = parse_twilio_status(twilio_status_params(sid=sid, status="delivered"))
    assert status.channel == "twilio"
    assert status.provider_message_id == sid
    assert status.status == "delivered"
    assert status.recipient == "+5511999990000"
    assert status.error_code is None
    assert status.error_message is None
    assert status.timestamp.tzinfo is not None


def test_failed_status_with_error() -> None:
    status = parse_twilio_status(
        twilio_status_params(
            sid=new_twilio_sid(),
            status="failed",
            error_code=63016,
            error_message="outside the allowed window",
        )
    )
    assert status.status == "failed"
    assert status.error_code == "63016"
    assert status.error_message == "outside the allowed window"


def test_status_falls_back_on_sms_fields() -> None:
    sid = new_twilio_sid()
    params = twilio_status_params(sid=sid, status="read")
    del params["MessageSid"], params["MessageStatus"]
    status = parse_twilio_status(params)
    assert (status.provider_message_id, status.status) == (sid, "read")


@pytest.mark.parametrize("field", ["MessageSid", "MessageStatus"])
def test_status_missing_field(field: str) -> None:
    params = twilio_status_params(sid=new_twilio_sid())
    del params[field], params[field.replace("Message", "Sms")]
    with pytest.raises(MalformedPayload, match=f"missing field {field}"):
        parse_twilio_status(params)


def test_status_with_bad_recipient() -> None:
    with pytest.raises(MalformedPayload, match="To is not a phone number"):
        parse_twilio_status(twilio_status_params(sid=new_twilio_sid(), To="whatsapp:nobody"))
