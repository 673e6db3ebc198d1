"""TwilioSender through the real twilio SDK against the fake Twilio REST API on loopback."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from channels import (
    OutsideWindowError,
    SendError,
    TwilioSender,
    parse_twilio_status,
    verify_twilio_signature,
)
from tests.fakes.twilio_api import FakeTwilioAPI

BUSINESS = "+14155238886"
USER = "+5511999990000"


@pytest.fixture
async def fake() -> AsyncIterator[FakeTwilioAPI]:
    async with FakeTwilioAPI.running() as api:
        yield api


@pytest.fixture
async def sender(fake: FakeTwilioAPI) -> AsyncIterator[TwilioSender]:
    twilio = TwilioSender(fake.account_sid, fake.auth_token, BUSINESS, api_base_url=fake.base_url)
    yield twilio
    await twilio.close()


async def test_send_returns_the_message_sid(fake: FakeTwilioAPI, sender: TwilioSender) -> None:
    result = await sender.send_text(USER, "Oi, Ana! Seu resumo de maio está pronto.")
    [message] = await fake.wait_for_messages(1)
    assert result.provider_message_ids == (message["sid"],)
    assert message["sid"].startswith("SM")
    assert len(message["sid"]) == 34
    assert message["From"] == "whatsapp:+14155238886"
    assert message["To"] == "whatsapp:+5511999990000"
    assert message["Body"] == "Oi, Ana! Seu resumo de maio está pronto."
    assert "StatusCallback" not in message
    assert fake.requests[0]["path"] == f"/2010-04-01/Accounts/{fake.account_sid}/Messages.json"


async def test_whatsapp_prefixed_numbers_are_accepted(fake: FakeTwilioAPI) -> None:
    sender = TwilioSender(
        fake.account_sid, fake.auth_token, "whatsapp:+14155238886", api_base_url=fake.base_url
    )
    try:
        await sender.send_text("whatsapp:+5511999990000", "oi")
    finally:
        await sender.close()
    [message] = await fake.wait_for_messages(1)
    assert (message["From"], message["To"]) == ("whatsapp:+14155238886", "whatsapp:+5511999990000")


async def test_long_reply_is_split_in_parts_of_at_most_1600(
    fake: FakeTwilioAPI, sender: TwilioSender
) -> None:
    text = ("Vocês gastaram R$ 1.250,00 em mercado este mês, 12% acima de abril. " * 40)[:2000]
    result = await sender.send_text(USER, text)
    messages = await fake.wait_for_messages(2)
    assert len(messages) == 2
    assert all(len(m["Body"]) <= 1600 for m in messages)
    assert result.provider_message_ids == tuple(m["sid"] for m in messages)
    assert "".join("".join(m["Body"].split()) for m in messages) == "".join(text.split())


async def test_status_callback_is_requested(fake: FakeTwilioAPI) -> None:
    callback = "https://mel.example.com/webhooks/twilio/status"
    sender = TwilioSender(
        fake.account_sid,
        fake.auth_token,
        BUSINESS,
        api_base_url=fake.base_url,
        status_callback=callback,
    )
    try:
        await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    [message] = await fake.wait_for_messages(1)
    assert message["StatusCallback"] == callback


async def test_outside_the_window(fake: FakeTwilioAPI, sender: TwilioSender) -> None:
    fake.fail_next(status=400, code=63016)
    with pytest.raises(OutsideWindowError) as info:
        await sender.send_text(USER, "oi")
    error = info.value
    assert (error.provider, error.code, error.status) == ("twilio", 63016, 400)
    assert not error.retryable
    assert "outside the allowed window" in error.reason
    assert fake.messages == []


@pytest.mark.parametrize(("status", "code"), [(429, 63018), (429, 20429), (400, 63018)])
async def test_rate_limits_are_retryable(
    fake: FakeTwilioAPI, sender: TwilioSender, status: int, code: int
) -> None:
    fake.fail_next(status=status, code=code)
    with pytest.raises(SendError) as info:
        await sender.send_text(USER, "oi")
    assert info.value.retryable
    assert not isinstance(info.value, OutsideWindowError)


async def test_auth_failure(fake: FakeTwilioAPI) -> None:
    sender = TwilioSender(fake.account_sid, "wrong-token", BUSINESS, api_base_url=fake.base_url)
    try:
        with pytest.raises(SendError) as info:
            await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    assert (info.value.code, info.value.status) == (20003, 401)
    assert not info.value.retryable
    assert fake.messages == []


async def test_no_retry_on_a_server_error(fake: FakeTwilioAPI, sender: TwilioSender) -> None:
    fake.fail_next(status=500, code=20500)
    with pytest.raises(SendError) as info:
        await sender.send_text(USER, "oi")
    assert info.value.status == 500
    assert not info.value.retryable  # the message may exist: retrying could duplicate it
    await asyncio.sleep(0.2)
    assert len(fake.requests) == 1


async def test_a_failed_part_reports_the_parts_already_sent(
    fake: FakeTwilioAPI, sender: TwilioSender
) -> None:
    fake.fail_next(status=400, code=21610, message="Attempt to send to unsubscribed", after=1)
    with pytest.raises(SendError) as info:
        await sender.send_text(USER, "Frase longa. " * 200)
    assert info.value.code == 21610
    [first] = fake.messages
    assert info.value.sent_ids == (first["sid"],)
    assert len(fake.requests) == 2


async def test_timeout_is_not_retried_and_not_retryable(fake: FakeTwilioAPI) -> None:
    fake.delay = 1.0
    sender = TwilioSender(
        fake.account_sid, fake.auth_token, BUSINESS, api_base_url=fake.base_url, timeout=0.2
    )
    try:
        with pytest.raises(SendError, match="timed out") as info:
            await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    assert not info.value.retryable
    await fake.wait_for_requests(1)
    await asyncio.sleep(1.2)
    assert len(fake.requests) == 1


async def test_connection_refused_is_retryable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sender = TwilioSender("AC" + "1" * 32, "t", BUSINESS, api_base_url=f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(SendError, match="cannot connect") as info:
            await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    assert info.value.retryable


async def test_sending_never_blocks_the_event_loop(
    fake: FakeTwilioAPI, sender: TwilioSender
) -> None:
    fake.delay = 0.3
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        await asyncio.gather(*(sender.send_text(USER, f"mensagem {i}") for i in range(5)))
    finally:
        task.cancel()
    assert ticks >= 10  # the loop kept running while 5 sends waited 0.3 s each, concurrently
    assert len(await fake.wait_for_messages(5)) == 5


async def test_close_is_idempotent_and_the_sender_reopens(
    fake: FakeTwilioAPI, sender: TwilioSender
) -> None:
    await sender.send_text(USER, "um")
    await sender.close()
    await sender.close()
    await sender.send_text(USER, "dois")
    assert [m["Body"] for m in await fake.wait_for_messages(2)] == ["um", "dois"]


async def test_blank_text_is_refused_before_any_request(
    fake: FakeTwilioAPI, sender: TwilioSender
) -> None:
    with pytest.raises(SendError, match="blank") as info:
        await sender.send_text(USER, "  \n ")
    assert not info.value.retryable
    assert fake.requests == []


async def test_fake_delivers_signed_status_callbacks(
    fake: FakeTwilioAPI, aiohttp_server: AiohttpServer
) -> None:
    received: list[object] = []

    async def status_webhook(request: web.Request) -> web.Response:
        form = await request.post()
        verify_twilio_signature(
            fake.auth_token, str(request.url), form, request.headers.get("X-Twilio-Signature")
        )
        received.append(parse_twilio_status(form))
        return web.Response(text="<Response/>", content_type="text/xml")

    app = web.Application()
    app.router.add_post("/webhooks/twilio/status", status_webhook)
    server = await aiohttp_server(app)
    callback = str(server.make_url("/webhooks/twilio/status"))
    sender = TwilioSender(
        fake.account_sid,
        fake.auth_token,
        BUSINESS,
        api_base_url=fake.base_url,
        status_callback=callback,
    )
    try:
        result = await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    [sid] = result.provider_message_ids
    assert await fake.deliver_status(sid, "delivered") == 200
    [status] = received
    assert status.provider_message_id == sid  # type: ignore[attr-defined]
    assert status.status == "delivered"  # type: ignore[attr-defined]
    assert status.recipient == USER  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- from_


async def test_reply_from_the_number_written_to(fake: FakeTwilioAPI, sender: TwilioSender) -> None:
    await sender.send_text(USER, "oi", from_="whatsapp:+5511911112222")
    await sender.send_text(USER, "de novo")  # None: the configured default
    first, second = await fake.wait_for_messages(2)
    assert first["From"] == "whatsapp:+5511911112222"
    assert second["From"] == "whatsapp:+14155238886"
    assert "MessagingServiceSid" not in first


async def test_reply_from_a_messaging_service(fake: FakeTwilioAPI, sender: TwilioSender) -> None:
    service = fake.add_messaging_service()
    result = await sender.send_text(USER, "oi", from_=service)
    [message] = await fake.wait_for_messages(1)
    assert message["MessagingServiceSid"] == service
    assert "From" not in message
    assert result.provider_message_ids == (message["sid"],)


async def test_a_messaging_service_as_the_default_sender(fake: FakeTwilioAPI) -> None:
    service = fake.add_messaging_service()
    sender = TwilioSender(fake.account_sid, fake.auth_token, service, api_base_url=fake.base_url)
    try:
        assert sender.from_number == service
        await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    [message] = await fake.wait_for_messages(1)
    assert (message["MessagingServiceSid"], message.get("From")) == (service, None)


async def test_an_unknown_messaging_service_is_refused_by_twilio(
    fake: FakeTwilioAPI, sender: TwilioSender
) -> None:
    with pytest.raises(SendError) as info:
        await sender.send_text(USER, "oi", from_="MG" + "f" * 32)
    assert (info.value.code, info.value.status) == (21701, 400)
    assert not info.value.retryable


# --------------------------------------------------------------------------- only SendError


@pytest.mark.parametrize(
    ("to", "from_", "text", "match"),
    [
        ("not a number", None, "oi", "to is not a phone number"),
        ("", None, "oi", "to is not a phone number"),
        (USER, "not a number", "oi", "from_ is not a phone number"),
        (USER, "MG123", "oi", "not a Messaging Service SID"),
        (USER, None, "", "blank"),
        ("BR.1502576394655843", None, "oi", "business-scoped user id"),
    ],
)
async def test_bad_input_is_a_non_retryable_send_error_before_any_request(
    fake: FakeTwilioAPI, sender: TwilioSender, to: str, from_: str | None, text: str, match: str
) -> None:
    with pytest.raises(SendError, match=match) as info:
        await sender.send_text(to, text, from_=from_)
    assert not info.value.retryable
    assert info.value.provider == "twilio"
    assert fake.requests == []


async def test_mark_read_takes_the_receiving_number_and_does_nothing(
    fake: FakeTwilioAPI, sender: TwilioSender
) -> None:
    await sender.mark_read("SM" + "0" * 32, typing=False, from_="whatsapp:+5511911112222")
    assert fake.requests == []
