"""Webhook edge: signatures, bad input, limits, disabled providers, Redis down."""

from __future__ import annotations

import json
import uuid
from typing import Any

import aiohttp
import pytest

from gateway.store.embedded import EmbeddedRedis
from tests.e2e.conftest import AUTH_TOKEN, BUSINESS, Gateway, agent_calls
from tests.fakes.llm import FakeLLM
from tests.fakes.payloads import meta_payload, meta_text_message, twilio_inbound_params


async def test_valid_twilio_delivery_is_stored_then_acknowledged_with_empty_twiml(
    gateway: Gateway,
) -> None:
    resp = await gateway.twilio("qual o total do mês?", sid="SM" + "a" * 32)
    assert resp.status == 200
    assert resp.content_type == "text/xml"
    assert "<Response/>" in await resp.text()
    raw = await gateway.store.redis.xrange(gateway.store.keys.raw)
    assert len(raw) == 1
    meta = json.loads(raw[0][1][b"meta"])
    assert meta["status"] == 200
    assert meta["provider"] == "twilio"
    assert meta["headers"]["x-twilio-signature"]
    assert b"qual+o+total" in raw[0][1][b"body"]
    assert meta["message_ids"] == ["SM" + "a" * 32]


@pytest.mark.parametrize(
    ("signature", "reason"), [("", "missing"), ("bm90LXRoZS1zaWduYXR1cmU=", "invalid")]
)
async def test_bad_or_missing_twilio_signature_is_403_and_nothing_is_answered(
    gateway: Gateway, fake_llm: FakeLLM, signature: str, reason: str
) -> None:
    resp = await gateway.twilio("oi", signature=signature)
    assert resp.status == 403, reason
    await gateway.idle()
    assert await gateway.events("message.received") == []
    assert len(agent_calls(fake_llm)) == 0


async def test_signature_with_another_token_is_403(gateway: Gateway) -> None:
    resp = await gateway.twilio("oi", token="someone-elses-token")
    assert resp.status == 403


async def test_signed_but_malformed_twilio_delivery_is_400_with_reason(gateway: Gateway) -> None:
    params = {"MessageSid": "SM" + "b" * 32, "From": "whatsapp:+5511999990000", "Body": "oi"}
    resp = await gateway.twilio(params=params)
    assert resp.status == 400
    body = await resp.json()
    assert "To" in body["error"]
    await gateway.idle()
    assert await gateway.events("message.received") == []


async def test_unknown_twilio_fields_are_accepted(gateway: Gateway) -> None:
    params = twilio_inbound_params(
        sid="SM" + "c" * 32, from_="+5511999990000", to=BUSINESS, body="oi"
    )
    params["SomeFieldTwilioAddsTomorrow"] = "x"
    resp = await gateway.twilio(params=params)
    assert resp.status == 200


async def test_twilio_body_over_limit_is_413(start_gateway: Any) -> None:
    gw: Gateway = await start_gateway(MEL_MAX_BODY_TWILIO=2048)
    resp = await gw.twilio("x" * 5000)
    assert resp.status == 413
    assert await gw.events("message.received") == []


async def test_meta_body_over_limit_is_413_without_reading_it(start_gateway: Any) -> None:
    gw: Gateway = await start_gateway(MEL_MAX_BODY_META=1024)
    body = json.dumps({"object": "whatsapp_business_account", "pad": "x" * 4096}).encode()
    resp = await gw.meta(body)
    assert resp.status == 413


async def test_meta_bad_signature_is_403(gateway: Gateway) -> None:
    payload = meta_payload(messages=[meta_text_message("oi")])
    resp = await gateway.meta(payload, secret="wrong-secret")
    assert resp.status == 403


async def test_meta_signed_but_malformed_is_400_with_reason(gateway: Gateway) -> None:
    resp = await gateway.meta(b'{"object": "whatsapp_business_account", "entry": "nope"}')
    assert resp.status == 400
    assert "entry" in (await resp.json())["error"]
    resp = await gateway.meta(b"{not json")
    assert resp.status == 400


async def test_meta_verification_handshake(gateway: Gateway) -> None:
    url = gateway.url("/webhooks/meta")
    ok = {"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "12345"}
    async with gateway.session.get(url, params=ok) as resp:
        assert resp.status == 200
        assert await resp.text() == "12345"
    async with gateway.session.get(url, params={**ok, "hub.verify_token": "x"}) as resp:
        assert resp.status == 403


async def test_provider_without_secret_is_disabled_not_open(start_gateway: Any) -> None:
    only_twilio: Gateway = await start_gateway(meta_app_secret=None)
    resp = await only_twilio.meta(meta_payload(messages=[meta_text_message("oi")]))
    assert resp.status == 404
    assert "META_APP_SECRET" in (await resp.json())["error"]
    only_meta: Gateway = await start_gateway(twilio_auth_token=None)
    resp = await only_meta.twilio("oi")
    assert resp.status == 404
    assert "TWILIO_AUTH_TOKEN" in (await resp.json())["error"]


async def test_with_nothing_configured_twilio_takes_only_the_local_dev_secret(
    start_gateway: Any, tmp_path: Any
) -> None:
    from gateway.bootstrap import dev_twilio_token

    gw: Gateway = await start_gateway(meta_app_secret=None, twilio_auth_token=None)
    assert (await gw.twilio("oi", token=AUTH_TOKEN)).status == 403
    dev = dev_twilio_token(gw.settings.mel_data_dir)
    assert (await gw.twilio("oi", token=dev)).status == 200
    sent = await gw.wait_events("message.sent", 1)
    assert sent[0]["data"]["channel"] == "twilio"
    outbox = await gw.store.redis.xrange(f"{gw.settings.mel_redis_prefix}:outbox")
    assert len(outbox) == 1


async def test_redis_down_is_503_then_accepted_once_back(
    start_gateway: Any, tmp_path: Any, fake_llm: FakeLLM
) -> None:
    server = EmbeddedRedis(tmp_path / "own-redis")
    server.start()
    try:
        gw: Gateway = await start_gateway(redis_url=server.url)
        server.kill()
        sid = "SM" + uuid.uuid4().hex
        resp = await gw.twilio("qual o total do mês?", sid=sid)
        assert resp.status == 503
        async with gw.session.get(gw.url("/readyz")) as ready:
            assert ready.status == 503
        server.start()
        resp = await gw.twilio("qual o total do mês?", sid=sid)  # the provider's retry
        assert resp.status == 200
        sent = await gw.wait_events("message.sent", 1, timeout=20)
        assert [e["data"]["in_reply_to"] for e in sent] == [sid]
    finally:
        server.stop()


async def test_healthz_readyz_metrics(gateway: Gateway) -> None:
    async with gateway.session.get(gateway.url("/healthz")) as resp:
        assert resp.status == 200
    async with gateway.session.get(gateway.url("/readyz")) as resp:
        assert resp.status == 200
        assert (await resp.json())["checks"] == {"redis": "ok", "worker": "ok"}
    await gateway.twilio("oi", signature="bad")
    await gateway.twilio("quanto gastei em junho?")  # one turn: the LLM's pool opens
    await gateway.idle()
    async with gateway.session.get(gateway.url("/metrics")) as resp:
        text = await resp.text()
    assert 'mel_webhooks_total{provider="twilio",status="403"} 1.0' in text
    assert "mel_turn_seconds_bucket" in text
    # what saturates is visible: turns in flight against the concurrency, the Redis pool
    # sized from it, the event loop's lag
    concurrency = gateway.settings.mel_worker_concurrency
    assert "mel_turns_in_flight 0.0" in text
    assert f"mel_worker_concurrency {concurrency}.0" in text
    assert f'mel_redis_pool_connections{{state="max"}} {2 * concurrency + 32}.0' in text
    assert "mel_redis_pool_waits_total 0.0" in text
    assert "mel_event_loop_lag_seconds " in text
    llm_max = f'state="max"}} {concurrency + 4}.0'  # the turns' calls and the psychologist's
    assert any(line.startswith("mel_llm_pool_connections{") and line.endswith(llm_max)
               for line in text.splitlines()), text  # fmt: skip


async def test_chunked_body_over_limit_is_413(start_gateway: Any) -> None:
    gw: Gateway = await start_gateway(MEL_MAX_BODY_TWILIO=1024)

    async def gen() -> Any:
        for _ in range(10):
            yield b"Body=" + b"x" * 512

    async with (
        aiohttp.ClientSession() as s,
        s.post(gw.url("/webhooks/twilio"), data=gen(), headers={"X-Twilio-Signature": "x"}) as resp,
    ):
        assert resp.status == 413
