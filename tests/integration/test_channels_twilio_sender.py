"""TwilioSender (a plain aiohttp POST) against the fake Twilio REST API on loopback."""

from __future__ import annotations

import asyncio
import base64
import socket
from collections.abc import AsyncIterator, Mapping

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


# --------------------------------------------------------------------------- plain HTTP
# The sender speaks HTTP itself (no SDK): what an answer other than Twilio's JSON becomes.

MESSAGES_PATH = "/2010-04-01/Accounts/{sid}/Messages.json"


class ScriptedTwilio:
    """A Messages endpoint answering scripted ``(status, body, content_type)`` in turn
    (then 201 with a sid), recording each request's headers and form."""

    def __init__(self, *answers: tuple[int, bytes, str]) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, object]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = 0.0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            form = {key: str(value) for key, value in (await request.post()).items()}
            self.requests.append({"path": request.path, "headers": request.headers, "form": form})
            sid = f"SM{len(self.requests):032d}"
            if self.delay:
                await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        if not self.answers:
            return web.json_response({"sid": sid, "status": "queued"}, status=201)
        status, body, content_type = self.answers.pop(0)
        headers = {"Location": request.path} if 300 <= status < 400 else None
        return web.Response(status=status, body=body, content_type=content_type, headers=headers)


@pytest.fixture
async def scripted(
    aiohttp_server: AiohttpServer,
) -> AsyncIterator[tuple[ScriptedTwilio, TwilioSender]]:
    script = ScriptedTwilio()
    app = web.Application()
    app.router.add_post(MESSAGES_PATH.format(sid="{account_sid}"), script.handle)
    server = await aiohttp_server(app)
    sender = TwilioSender(
        "AC" + "1" * 32, "token", BUSINESS, api_base_url=str(server.make_url("")).rstrip("/")
    )
    yield script, sender
    await sender.close()


async def test_the_request_carries_basic_auth_and_names_mel_gateway(
    scripted: tuple[ScriptedTwilio, TwilioSender],
) -> None:
    script, sender = scripted
    await sender.send_text(USER, "oi")
    [request] = script.requests
    headers = request["headers"]
    assert isinstance(headers, Mapping)
    assert headers["Authorization"] == "Basic " + base64.b64encode(
        b"AC" + b"1" * 32 + b":token"
    ).decode("ascii")
    assert "mel-gateway" in headers["User-Agent"]
    assert "twilio-python" not in headers["User-Agent"]
    assert headers["Accept"] == "application/json"
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert request["path"] == MESSAGES_PATH.format(sid="AC" + "1" * 32)


async def test_a_non_json_502_is_a_send_error_quoting_the_body(
    scripted: tuple[ScriptedTwilio, TwilioSender],
) -> None:
    script, sender = scripted
    page = b"<html><body><h1>502 Bad Gateway</h1>" + b"x" * 5000 + b"</body></html>"
    script.answers.append((502, page, "text/html"))
    with pytest.raises(SendError) as info:
        await sender.send_text(USER, "oi")
    error = info.value
    assert not isinstance(error, OutsideWindowError)
    assert (error.provider, error.code, error.status) == ("twilio", None, 502)
    assert not error.retryable  # a proxy may have passed the create on: it may exist
    assert error.reason.startswith("HTTP 502: ")
    assert "502 Bad Gateway" in error.reason
    assert len(error.reason) < 300  # an excerpt, not the whole page
    assert error.sent_ids == ()
    await asyncio.sleep(0.1)
    assert len(script.requests) == 1  # never retried


async def test_an_empty_error_body(scripted: tuple[ScriptedTwilio, TwilioSender]) -> None:
    script, sender = scripted
    script.answers.append((503, b"", "text/plain"))
    with pytest.raises(SendError, match="HTTP 503") as info:
        await sender.send_text(USER, "oi")
    assert (info.value.code, info.value.status, info.value.retryable) == (None, 503, False)


async def test_a_non_json_429_is_retryable(scripted: tuple[ScriptedTwilio, TwilioSender]) -> None:
    script, sender = scripted
    script.answers.append((429, b"Too Many Requests", "text/plain"))
    with pytest.raises(SendError) as info:
        await sender.send_text(USER, "oi")
    assert info.value.retryable  # refused before acceptance: trying again cannot duplicate
    assert (info.value.code, info.value.status) == (None, 429)
    assert "Too Many Requests" in info.value.reason


@pytest.mark.parametrize(
    "body",
    [
        b'{"status": "queued"}',
        b'{"sid": null}',
        b'{"sid": ""}',
        b'{"sid": 123}',
        b'["SM00000000000000000000000000000001"]',
        b"queued",
        b"",
    ],
)
async def test_a_2xx_without_a_sid_is_a_send_error_keeping_the_parts_sent(
    scripted: tuple[ScriptedTwilio, TwilioSender], body: bytes
) -> None:
    script, sender = scripted
    script.answers.append((201, b'{"sid": "SM' + b"a" * 32 + b'"}', "application/json"))
    script.answers.append((201, body, "application/json"))
    with pytest.raises(SendError, match="without a message sid") as info:
        await sender.send_text(USER, "Frase longa. " * 200)  # two parts
    error = info.value
    assert error.sent_ids == ("SM" + "a" * 32,)
    assert (error.code, error.status) == (None, 201)
    assert not error.retryable  # Twilio accepted something: a retry could duplicate it
    assert len(script.requests) == 2


async def test_the_sid_is_read_from_any_2xx(scripted: tuple[ScriptedTwilio, TwilioSender]) -> None:
    script, sender = scripted
    script.answers.append((200, b'{"sid": "SM' + b"b" * 32 + b'", "x": 1}', "application/json"))
    result = await sender.send_text(USER, "oi")
    assert result.provider_message_ids == ("SM" + "b" * 32,)


async def test_an_rfc9457_error_body_is_mapped_like_twilios_legacy_one(
    scripted: tuple[ScriptedTwilio, TwilioSender],
) -> None:
    script, sender = scripted
    problem = (
        b'{"type": "https://www.twilio.com/docs/errors/63016", "title": "Outside window",'
        b' "status": 400, "code": 63016, "detail": "Failed to send freeform message"}'
    )
    script.answers.append((400, problem, "application/problem+json"))
    with pytest.raises(OutsideWindowError) as info:
        await sender.send_text(USER, "oi")
    assert (info.value.code, info.value.status) == (63016, 400)
    assert info.value.reason == "Failed to send freeform message"


async def test_a_twilio_error_reason_has_no_sdk_prefix(
    fake: FakeTwilioAPI, sender: TwilioSender
) -> None:
    fake.fail_next(status=400, code=21610, message="Attempt to send to unsubscribed recipient")
    with pytest.raises(SendError) as info:
        await sender.send_text(USER, "oi")
    assert info.value.reason == "Attempt to send to unsubscribed recipient"
    assert (info.value.code, info.value.status) == (21610, 400)


async def test_a_redirect_is_not_followed(scripted: tuple[ScriptedTwilio, TwilioSender]) -> None:
    script, sender = scripted
    script.answers.append((307, b"", "text/plain"))  # to the same URL, which then answers 201
    with pytest.raises(SendError) as info:
        await sender.send_text(USER, "oi")
    assert info.value.status == 307
    assert not info.value.retryable
    assert len(script.requests) == 1


async def test_a_dropped_connection_is_a_non_retryable_transport_error(
    aiohttp_server: AiohttpServer,
) -> None:
    requests = 0

    async def drop(request: web.Request) -> web.Response:
        nonlocal requests
        requests += 1
        await request.read()
        assert request.transport is not None
        request.transport.close()  # after the create arrived: it may have been accepted
        return web.Response()

    app = web.Application()
    app.router.add_post(MESSAGES_PATH.format(sid="{account_sid}"), drop)
    server = await aiohttp_server(app)
    sender = TwilioSender(
        "AC" + "1" * 32, "token", BUSINESS, api_base_url=str(server.make_url("")).rstrip("/")
    )
    try:
        with pytest.raises(SendError, match="transport error") as info:
            await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    assert not info.value.retryable
    await asyncio.sleep(0.1)
    assert requests == 1


async def test_the_connection_pool_is_sized_by_max_connections(
    aiohttp_server: AiohttpServer,
) -> None:
    script = ScriptedTwilio()
    script.delay = 0.1
    app = web.Application()
    app.router.add_post(MESSAGES_PATH.format(sid="{account_sid}"), script.handle)
    server = await aiohttp_server(app)
    sender = TwilioSender(
        "AC" + "1" * 32,
        "token",
        BUSINESS,
        api_base_url=str(server.make_url("")).rstrip("/"),
        max_connections=2,
    )
    try:
        results = await asyncio.gather(*(sender.send_text(USER, f"m{i}") for i in range(6)))
    finally:
        await sender.close()
    assert script.max_in_flight == 2
    assert len({result.provider_message_ids for result in results}) == 6


async def test_text_that_cannot_be_encoded_is_a_send_error_before_any_request(
    fake: FakeTwilioAPI, sender: TwilioSender
) -> None:
    with pytest.raises(SendError, match="unexpected error") as info:
        await sender.send_text(USER, "oi \ud800")  # a lone surrogate: not UTF-8
    assert not info.value.retryable
    assert fake.requests == []


def test_credentials_that_basic_auth_cannot_carry_are_refused_up_front() -> None:
    with pytest.raises(ValueError, match="latin-1"):
        TwilioSender("AC" + "1" * 32, "token 😀", BUSINESS)
