"""OutboxSender and read_outbox on a real Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis

from channels import OutboxSender, SendError, read_outbox

STREAM = "mel:test:outbox"
USER = "+5511999990000"


async def test_send_appends_to_the_stream(redis: aioredis.Redis) -> None:
    sender = OutboxSender(redis, STREAM)
    result = await sender.send_text("whatsapp:+5511999990000", "Oi, Ana!")
    [entry_id] = result.provider_message_ids
    entries: Any = await redis.xrange(STREAM)
    [(raw_id, fields)] = entries
    assert raw_id.decode() == entry_id
    assert fields[b"to"] == USER.encode()
    assert fields[b"text"] == b"Oi, Ana!"
    assert fields[b"at"].decode().endswith("Z")
    assert b"from" not in fields


async def test_long_text_is_split(redis: aioredis.Redis) -> None:
    sender = OutboxSender(redis, STREAM)
    result = await sender.send_text(USER, "Uma frase. " * 600)
    assert len(result.provider_message_ids) == 2
    batch = await read_outbox(redis, STREAM)
    assert [e.id for e in batch.entries] == list(result.provider_message_ids)
    assert all(len(e.text) <= sender.max_length for e in batch.entries)


async def test_read_outbox_filters_and_moves_the_cursor(redis: aioredis.Redis) -> None:
    sender = OutboxSender(redis, STREAM)
    await sender.send_text(USER, "para Ana")
    await sender.send_text("+5521988880000", "para Bruno")
    batch = await read_outbox(redis, STREAM, to=USER)
    assert [e.text for e in batch.entries] == ["para Ana"]
    assert batch.entries[0].to == USER
    again = await read_outbox(redis, STREAM, after=batch.cursor, to=USER)
    assert again.entries == ()
    assert again.cursor == batch.cursor  # past Bruno's entry too: nothing re-read


async def test_read_outbox_blocks_until_a_reply(redis: aioredis.Redis) -> None:
    sender = OutboxSender(redis, STREAM)
    await sender.send_text(USER, "antes")
    start = await read_outbox(redis, STREAM)

    async def reply_later() -> None:
        await asyncio.sleep(0.1)
        await sender.send_text(USER, "depois")

    task = asyncio.create_task(reply_later())
    batch = await read_outbox(redis, STREAM, after=start.cursor, block_ms=2000)
    await task
    assert [e.text for e in batch.entries] == ["depois"]


async def test_read_outbox_times_out_empty(redis: aioredis.Redis) -> None:
    batch = await read_outbox(redis, STREAM, after="0-0", block_ms=50)
    assert batch.entries == ()
    assert batch.cursor == "0-0"


async def test_stream_is_capped(redis: aioredis.Redis) -> None:
    sender = OutboxSender(redis, STREAM, maxlen=10)
    for i in range(300):
        await sender.send_text(USER, f"mensagem {i}")
    assert await redis.xlen(STREAM) < 300


async def test_works_with_decoded_responses(redis_url: str) -> None:
    client: aioredis.Redis = aioredis.from_url(redis_url, decode_responses=True)
    try:
        await client.delete(STREAM)
        sender = OutboxSender(client, STREAM)
        [entry_id] = (await sender.send_text(USER, "oi")).provider_message_ids
        batch = await read_outbox(client, STREAM)
        assert [(e.id, e.text) for e in batch.entries] == [(entry_id, "oi")]
    finally:
        await client.delete(STREAM)
        await client.aclose()


async def test_the_business_address_is_recorded(redis: aioredis.Redis) -> None:
    sender = OutboxSender(redis, STREAM)
    await sender.send_text(USER, "do segundo número", from_="whatsapp:+5511911112222")
    await sender.send_text(USER, "do padrão")
    batch = await read_outbox(redis, STREAM)
    assert [(e.text, e.from_) for e in batch.entries] == [
        ("do segundo número", "whatsapp:+5511911112222"),
        ("do padrão", None),
    ]
    await sender.mark_read("wamid.x", from_="106540352242922")  # a no-op, like Twilio


async def test_a_bsuid_recipient(redis: aioredis.Redis) -> None:
    sender = OutboxSender(redis, STREAM)
    await sender.send_text("BR.1502576394655843", "oi")
    batch = await read_outbox(redis, STREAM, to="BR.1502576394655843")
    assert [(e.to, e.text) for e in batch.entries] == [("BR.1502576394655843", "oi")]


@pytest.mark.parametrize(("to", "text"), [("not a number", "oi"), (USER, "  ")])
async def test_bad_input_is_a_non_retryable_send_error(
    redis: aioredis.Redis, to: str, text: str
) -> None:
    with pytest.raises(SendError) as info:
        await OutboxSender(redis, STREAM).send_text(to, text)
    assert (info.value.provider, info.value.retryable) == ("outbox", False)
    assert await redis.xlen(STREAM) == 0


async def test_redis_down_is_a_send_error() -> None:
    dead: aioredis.Redis = aioredis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    try:
        with pytest.raises(SendError, match="redis error"):
            await OutboxSender(dead, STREAM).send_text(USER, "oi")
    finally:
        await dead.aclose()
