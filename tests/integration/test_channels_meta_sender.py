"""MetaSender against the fake Graph API on loopback."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from channels import (
    MetaSender,
    OutsideWindowError,
    SendError,
    StatusUpdate,
    parse_meta_payload,
    verify_meta_signature,
)
from tests.fakes.graph_api import FakeGraphAPI

USER = "+5511999990000"


@pytest.fixture
async def fake() -> AsyncIterator[FakeGraphAPI]:
    async with FakeGraphAPI.running() as api:
        yield api


@pytest.fixture
async def sender(fake: FakeGraphAPI) -> AsyncIterator[MetaSender]:
    meta = MetaSender(fake.access_token, fake.phone_number_id, graph_base_url=fake.base_url)
    await meta.start()
    yield meta
    await meta.close()


async def test_send_returns_the_wamid(fake: FakeGraphAPI, sender: MetaSender) -> None:
    result = await sender.send_text(USER, "Oi, Ana! Seu resumo de maio está pronto.")
    [message] = await fake.wait_for_messages(1)
    assert result.provider_message_ids == (message["id"],)
    assert message["id"].startswith("wamid.")
    request = fake.requests[0]
    assert request["path"] == f"/v21.0/{fake.phone_number_id}/messages"
    assert request["authorization"] == f"Bearer {fake.access_token}"
    assert request["json"] == {
        "messaging_product": "whatsapp",
        "to": "5511999990000",
        "type": "text",
        "text": {"body": "Oi, Ana! Seu resumo de maio está pronto."},
    }


async def test_api_version_is_configurable(fake: FakeGraphAPI) -> None:
    sender = MetaSender(
        fake.access_token, fake.phone_number_id, graph_base_url=fake.base_url, api_version="v23.0"
    )
    try:
        await sender.send_text(USER, "oi")  # created lazily, without start()
    finally:
        await sender.close()
    assert fake.requests[0]["path"] == f"/v23.0/{fake.phone_number_id}/messages"


async def test_long_reply_is_split_in_parts_of_at_most_4096(
    fake: FakeGraphAPI, sender: MetaSender
) -> None:
    text = "Vocês gastaram R$ 1.250,00 em mercado este mês, 12% acima de abril. " * 80
    result = await sender.send_text(USER, text)
    messages = await fake.wait_for_messages(2)
    assert len(messages) == 2
    assert all(len(m["text"]["body"]) <= 4096 for m in messages)
    assert result.provider_message_ids == tuple(m["id"] for m in messages)


async def test_mark_read_with_typing_indicator(fake: FakeGraphAPI, sender: MetaSender) -> None:
    await sender.mark_read("wamid.HBgNNTUxMTk5OTk5MDAwMBUCABIYFjNFQjA")
    [receipt] = await fake.wait_for_read_receipts(1)
    assert receipt == {
        "messaging_product": "whatsapp",
        "status": "read",
        "message_id": "wamid.HBgNNTUxMTk5OTk5MDAwMBUCABIYFjNFQjA",
        "typing_indicator": {"type": "text"},
        "phone_number_id": fake.phone_number_id,  # where it was posted, recorded by the fake
    }
    assert fake.messages == []


async def test_mark_read_without_typing(fake: FakeGraphAPI, sender: MetaSender) -> None:
    await sender.mark_read("wamid.x", typing=False)
    [receipt] = await fake.wait_for_read_receipts(1)
    assert "typing_indicator" not in receipt


async def test_mark_read_failure_is_a_send_error(fake: FakeGraphAPI, sender: MetaSender) -> None:
    fake.fail_next(status=400, code=100, message="Invalid parameter", kind="read")
    with pytest.raises(SendError) as info:
        await sender.mark_read("wamid.unknown")
    assert info.value.code == 100
    await sender.send_text(USER, "still fine")  # a read failure does not poison sends
    assert len(await fake.wait_for_messages(1)) == 1


async def test_outside_the_window(fake: FakeGraphAPI, sender: MetaSender) -> None:
    fake.fail_next(status=400, code=131047)
    with pytest.raises(OutsideWindowError) as info:
        await sender.send_text(USER, "oi")
    error = info.value
    assert (error.provider, error.code, error.status) == ("meta", 131047, 400)
    assert not error.retryable
    assert "Re-engagement message" in error.reason
    assert "fbtrace_id" in error.reason
    assert fake.messages == []


@pytest.mark.parametrize("code", [130429, 131056, 80007, 4])
async def test_rate_limits_are_retryable(fake: FakeGraphAPI, sender: MetaSender, code: int) -> None:
    fake.fail_next(status=400 if code != 4 else 403, code=code)
    with pytest.raises(SendError) as info:
        await sender.send_text(USER, "oi")
    assert info.value.retryable
    assert info.value.code == code


async def test_auth_failure(fake: FakeGraphAPI) -> None:
    sender = MetaSender("wrong-token", fake.phone_number_id, graph_base_url=fake.base_url)
    try:
        with pytest.raises(SendError) as info:
            await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    assert (info.value.code, info.value.status) == (190, 401)
    assert not info.value.retryable


async def test_unknown_phone_number_id(fake: FakeGraphAPI) -> None:
    sender = MetaSender(fake.access_token, "000", graph_base_url=fake.base_url)
    try:
        with pytest.raises(SendError, match="does not exist") as info:
            await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    assert info.value.code == 100


async def test_no_retry_on_a_server_error(fake: FakeGraphAPI, sender: MetaSender) -> None:
    fake.fail_next(status=500, code=131000)
    with pytest.raises(SendError) as info:
        await sender.send_text(USER, "oi")
    assert info.value.status == 500
    assert not info.value.retryable
    await asyncio.sleep(0.2)
    assert len(fake.requests) == 1


async def test_a_failed_part_reports_the_parts_already_sent(
    fake: FakeGraphAPI, sender: MetaSender
) -> None:
    fake.fail_next(status=400, code=131026, message="Message undeliverable", after=1)
    with pytest.raises(SendError) as info:
        await sender.send_text(USER, "Frase longa. " * 500)
    [first] = fake.messages
    assert info.value.sent_ids == (first["id"],)
    assert len(fake.requests) == 2


async def test_non_json_error_answer(aiohttp_server: AiohttpServer) -> None:
    async def bad_gateway(request: web.Request) -> web.Response:
        return web.Response(status=502, text="<html>Bad Gateway</html>")

    app = web.Application()
    app.router.add_post("/{tail:.*}", bad_gateway)
    server = await aiohttp_server(app)
    sender = MetaSender("t", "1", graph_base_url=str(server.make_url("/")))
    try:
        with pytest.raises(SendError, match="HTTP 502") as info:
            await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    assert info.value.status == 502
    assert info.value.code is None
    assert not info.value.retryable


async def test_timeout_is_not_retryable(fake: FakeGraphAPI) -> None:
    fake.delay = 1.0
    sender = MetaSender(
        fake.access_token, fake.phone_number_id, graph_base_url=fake.base_url, timeout=0.2
    )
    try:
        with pytest.raises(SendError, match="timed out") as info:
            await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    assert not info.value.retryable


async def test_connection_refused_is_retryable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sender = MetaSender("t", "1", graph_base_url=f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(SendError, match="cannot connect") as info:
            await sender.send_text(USER, "oi")
    finally:
        await sender.close()
    assert info.value.retryable


async def test_close_is_idempotent_and_the_sender_reopens(
    fake: FakeGraphAPI, sender: MetaSender
) -> None:
    await sender.send_text(USER, "um")
    await sender.close()
    await sender.close()
    await sender.send_text(USER, "dois")
    assert [m["text"]["body"] for m in await fake.wait_for_messages(2)] == ["um", "dois"]


async def test_fake_delivers_signed_status_webhooks(
    fake: FakeGraphAPI, sender: MetaSender, aiohttp_server: AiohttpServer
) -> None:
    secret = "app-secret"
    received: list[StatusUpdate] = []

    async def webhook(request: web.Request) -> web.Response:
        body = await request.read()
        verify_meta_signature(secret, body, request.headers.get("X-Hub-Signature-256"))
        received.extend(parse_meta_payload(body).statuses)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/webhooks/meta", webhook)
    server = await aiohttp_server(app)
    [wamid] = (await sender.send_text(USER, "oi")).provider_message_ids
    url = str(server.make_url("/webhooks/meta"))
    assert await fake.deliver_status(url, secret, wamid, "read") == 200
    [status] = received
    assert (status.provider_message_id, status.status, status.recipient) == (wamid, "read", USER)


# --------------------------------------------------------------------------- from_


async def test_reply_from_the_number_written_to(fake: FakeGraphAPI, sender: MetaSender) -> None:
    other = fake.add_phone_number_id("107000000000001")
    await sender.send_text(USER, "oi", from_=other)
    await sender.send_text(USER, "de novo")  # None: the configured default
    first, second = await fake.wait_for_messages(2)
    assert first["phone_number_id"] == other
    assert second["phone_number_id"] == fake.phone_number_id
    assert fake.requests[0]["path"] == f"/v21.0/{other}/messages"


async def test_a_number_the_app_does_not_own_is_refused_by_graph(
    fake: FakeGraphAPI, sender: MetaSender
) -> None:
    with pytest.raises(SendError, match="does not exist") as info:
        await sender.send_text(USER, "oi", from_="999999")
    assert info.value.code == 100
    assert not info.value.retryable


async def test_mark_read_from_the_receiving_number(fake: FakeGraphAPI, sender: MetaSender) -> None:
    other = fake.add_phone_number_id("107000000000001")
    await sender.mark_read("wamid.A1", from_=other)
    await sender.mark_read("wamid.A2", typing=False)
    first, second = await fake.wait_for_read_receipts(2)
    assert (first["message_id"], first["phone_number_id"]) == ("wamid.A1", other)
    assert first["typing_indicator"] == {"type": "text"}
    assert (second["phone_number_id"], "typing_indicator" in second) == (
        fake.phone_number_id,
        False,
    )


# --------------------------------------------------------------------------- BSUID


@pytest.mark.parametrize("bsuid", ["BR.1502576394655843", "US.ENT.11815799212886844830"])
async def test_reply_to_a_user_known_only_by_a_bsuid(
    fake: FakeGraphAPI, sender: MetaSender, bsuid: str
) -> None:
    result = await sender.send_text(bsuid, "Oi! Anotei o gasto de R$ 50,00.")
    [message] = await fake.wait_for_messages(1)
    assert result.provider_message_ids == (message["id"],)
    assert fake.requests[0]["json"] == {
        "messaging_product": "whatsapp",
        "recipient": bsuid,
        "type": "text",
        "text": {"body": "Oi! Anotei o gasto de R$ 50,00."},
    }


async def test_a_bsuid_meta_will_not_message_is_not_retryable(
    fake: FakeGraphAPI, sender: MetaSender
) -> None:
    fake.fail_next(
        status=400,
        code=131062,
        message="Business-scoped User ID recipients are not supported for this message.",
    )
    with pytest.raises(SendError, match="Business-scoped User ID") as info:
        await sender.send_text("BR.1502576394655843", "oi")
    assert (info.value.code, info.value.retryable) == (131062, False)


# --------------------------------------------------------------------------- only SendError


@pytest.mark.parametrize(
    ("to", "from_", "text", "match"),
    [
        ("not a number", None, "oi", "to is not a phone number"),
        ("br.150257", None, "oi", "to is not a phone number"),  # not a BSUID either
        (USER, "abc", "oi", "not a phone number id"),
        (USER, "", "oi", "not a phone number id"),
        (USER, None, " \n ", "blank"),
    ],
)
async def test_bad_input_is_a_non_retryable_send_error_before_any_request(
    fake: FakeGraphAPI, sender: MetaSender, to: str, from_: str | None, text: str, match: str
) -> None:
    with pytest.raises(SendError, match=match) as info:
        await sender.send_text(to, text, from_=from_)
    assert not info.value.retryable
    assert info.value.provider == "meta"
    assert fake.requests == []


async def test_mark_read_with_bad_input_raises_send_error(
    fake: FakeGraphAPI, sender: MetaSender
) -> None:
    with pytest.raises(SendError):
        await sender.mark_read("", typing=False)
    with pytest.raises(SendError):
        await sender.mark_read("wamid.A1", from_="../../me")
    assert fake.requests == []
