"""``export --redact``: numbers and names masked, consistently, bodies still parseable."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from gateway.replay import RawDelivery, Redactor
from gateway.replay.records import twilio_params
from tests.fakes.payloads import (
    meta_body,
    meta_location_message,
    meta_message,
    meta_payload,
    meta_status,
    meta_text_message,
    twilio_inbound_params,
)

USER = "+5511999990000"
BUSINESS = "+14155238886"
# A fixed key for the tests that look for the original digits in the output: a random one
# made a pseudonym contain "98888" by chance (about once in 10,000 runs)
KEY = b"test-redaction-key"


def raw(provider: str, body: bytes, **kw: object) -> RawDelivery:
    values: dict[str, object] = {
        "id": "1-0",
        "received_at": "2026-06-03T00:00:00Z",
        "provider": provider,
        "method": "POST",
        "path": f"/webhooks/{provider}",
        "query": "",
        "headers": {"x-forwarded-for": "203.0.113.9", "content-type": "x"},
        "body": body,
        "status": 200,
    }
    values.update(kw)
    return RawDelivery(**values)  # type: ignore[arg-type]


def test_twilio_numbers_and_names_are_masked_and_the_body_still_parses() -> None:
    params = twilio_inbound_params(
        from_=USER,
        to=BUSINESS,
        profile_name="Ana Souza",
        body="Oi, aqui é a Ana. Meu outro número é (11) 98888-7777, CPF 123.456.789-09",
    )
    d = raw(
        "twilio",
        urlencode(params).encode(),
        thread_ids=(f"twilio:{BUSINESS}:{USER}",),
        message_ids=(params["MessageSid"],),
        replies={params["MessageSid"]: {"text": "Oi Ana! Tudo certo?", "status": "sent"}},
    )
    r = Redactor(KEY).delivery(d)
    out = dict(twilio_params(r.body))
    text = r.body.decode()
    for secret in ("5511999990000", "Ana", "Souza", "98888", "123.456", "203.0.113.9"):
        assert secret not in text + json.dumps(dict(r.headers)) + json.dumps(r.replies)
    assert out["To"] == f"whatsapp:{BUSINESS}"  # the business number is not personal
    assert out["From"].startswith("whatsapp:+999")
    assert len(out["From"]) == len(params["From"])
    assert out["WaId"] == out["From"].removeprefix("whatsapp:+")  # same number, same mask
    assert out["ProfileName"].startswith("Contato ")
    assert out["ProfileName"] in out["Body"]  # the name in the text got the same pseudonym
    assert out["MessageSid"] == params["MessageSid"]
    assert r.redacted
    assert r.parsed is not None  # still a valid delivery
    [message] = r.parsed.messages
    assert r.thread_ids == (message.thread_id,)
    assert r.replies[params["MessageSid"]]["text"].startswith("Oi Contato ")


def test_the_same_number_gets_the_same_pseudonym_across_one_export_only() -> None:
    body = urlencode(twilio_inbound_params(from_=USER)).encode()
    one = Redactor()
    first, second = one.delivery(raw("twilio", body)), one.delivery(raw("twilio", body))
    other = Redactor().delivery(raw("twilio", body))
    assert first.body == second.body
    assert dict(twilio_params(first.body))["From"] != dict(twilio_params(other.body))["From"]


def test_meta_payload_keeps_its_structure() -> None:
    payload = meta_payload(
        [
            meta_text_message("me liga no 11 97777-6666, Ana", from_=USER),
            meta_location_message(-23.561414, -46.655881, name="Casa", address="Rua X, 10"),
            meta_message(
                "contacts",
                [
                    {
                        "name": {"formatted_name": "Bruno Lima", "first_name": "Bruno"},
                        "phones": [{"phone": "+55 11 96666-5555", "wa_id": "5511966665555",
                                    "type": "CELL"}],
                        "emails": [{"email": "bruno@example.com", "type": "HOME"}],
                    }
                ]
            ),
        ],
        [meta_status("wamid.OUT", "read", recipient=USER)],
        profiles={USER: "Ana Souza"},
    )  # fmt: skip
    d = raw("meta", meta_body(payload), thread_ids=(f"meta:{BUSINESS}:{USER}",))
    r = Redactor(KEY).delivery(d)
    text = r.body.decode()
    for secret in ("5511999990000", "Ana", "97777", "Bruno", "96666", "bruno@", "Rua X", "Casa"):
        assert secret not in text, secret
    data = json.loads(r.body)
    value = data["entry"][0]["changes"][0]["value"]
    assert value["metadata"]["display_phone_number"] == BUSINESS.removeprefix("+")
    text_msg, location, contacts = value["messages"]
    assert text_msg["from"].startswith("999")
    assert value["contacts"][0]["wa_id"] == text_msg["from"]
    assert value["statuses"][0]["recipient_id"] == text_msg["from"]
    assert location["location"]["latitude"] == -23.56
    card = contacts["contacts"][0]
    assert card["phones"][0]["type"] == "CELL"
    assert card["name"]["formatted_name"].startswith("Contato ")
    assert r.parsed is not None
    assert len(r.parsed.messages) == 3
    assert r.thread_ids == (r.parsed.messages[0].thread_id,)


def test_a_body_that_is_not_json_is_masked_as_text() -> None:
    r = Redactor().delivery(raw("meta", b"not json from +5511999990000"))
    assert b"5511999990000" not in r.body
