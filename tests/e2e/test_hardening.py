"""Hardening (issue 10): many support viewers, shutdown mid-send, poisoned and hostile
deliveries, raw-record bounds, slow clients, privacy of the logs, thread filters, metrics.

Every test talks to the gateway over HTTP (or a raw socket) as a provider, a viewer or an
attacker would, and asserts what they (or an operator reading Redis, the metrics or the
logs) observe.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs
from yarl import URL

from tests.e2e.conftest import BUSINESS, Gateway
from tests.fakes.graph_api import FakeGraphAPI
from tests.fakes.llm import FakeLLM
from tests.fakes.payloads import (
    meta_payload,
    meta_text_message,
    twilio_inbound_params,
)
from tests.fakes.twilio_api import FakeTwilioAPI

TOKEN = "support-secret-token"
USER = "+5511999990000"
USER_DIGITS = "5511999990000"
THREAD = f"twilio:{BUSINESS}:{USER}"


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def plausible_signature() -> str:
    """Looks like an X-Twilio-Signature (base64 of 20 bytes) but signs nothing."""
    return base64.b64encode(os.urandom(20)).decode()


async def raw_http(gw: Gateway, request: bytes, timeout: float = 5.0) -> bytes:
    """Send ``request`` bytes as they are over a fresh socket; everything the server
    answers until it closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", gw.server.port)
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(timeout):
            return await reader.read()
    finally:
        writer.close()


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def json_of(answer: bytes) -> Any:
    return json.loads(answer.partition(b"\r\n\r\n")[2])


async def metric(gw: Gateway, name: str) -> str:
    async with gw.session.get(gw.url("/metrics")) as resp:
        text = await resp.text()
    return "\n".join(line for line in text.splitlines() if line.startswith(name))


async def read_sse(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, str]]:
    """The events of an SSE response (comments skipped)."""
    event: dict[str, str] = {}
    async for raw in resp.content:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            event[field] = value.removeprefix(" ")


async def open_stream(
    session: aiohttp.ClientSession, gw: Gateway, timeout: float = 10.0
) -> aiohttp.ClientResponse:
    """An open ``/support/events`` stream whose first bytes arrived (really open)."""
    async with asyncio.timeout(timeout):
        resp = await session.get(gw.url("/support/events"), headers=auth())
        assert resp.status == 200, resp.status
        assert await resp.content.readany()
    return resp


# ---------------------------------------------------------------- 1. many viewers


@pytest.mark.slow
async def test_many_feed_viewers_do_not_starve_webhooks_and_are_counted_while_open(
    start_gateway: Any, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN)
    viewers = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    try:
        opened = await asyncio.gather(
            *(open_stream(viewers, gw) for _ in range(120)), return_exceptions=True
        )
        streams = [r for r in opened if isinstance(r, aiohttp.ClientResponse)]
        users = [f"+55119888{i:05d}" for i in range(20)]
        async with asyncio.timeout(20):
            answers = await asyncio.gather(*(gw.twilio("oi", user=u) for u in users))
        assert [r.status for r in answers] == [200] * 20
        assert len(streams) == 120, [r for r in opened if not isinstance(r, aiohttp.ClientResponse)]
        assert "mel_feed_streams 120.0" in await metric(gw, "mel_feed_streams")
        sent = await fake_twilio.wait_for_messages(20, timeout=20)
        assert sorted(m["To"] for m in sent) == sorted(f"whatsapp:{u}" for u in users)
        for resp in streams:
            resp.close()
    finally:
        await viewers.close()
    deadline = time.monotonic() + 3.0
    while "mel_feed_streams 0.0" not in await metric(gw, "mel_feed_streams"):
        assert time.monotonic() < deadline, await metric(gw, "mel_feed_streams")
        await asyncio.sleep(0.1)


async def test_past_the_stream_cap_only_the_new_stream_is_refused(start_gateway: Any) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN, mel_feed_max_streams=2)
    viewers = aiohttp.ClientSession()
    try:
        first = [await open_stream(viewers, gw) for _ in range(2)]
        async with asyncio.timeout(5):
            third = await viewers.get(gw.url("/support/events"), headers=auth())
        assert third.status == 503
        assert "stream" in (await third.json())["error"]
        assert (await gw.twilio("oi")).status == 200
        for resp in [*first, third]:
            resp.close()
    finally:
        await viewers.close()


# ---------------------------------------------------------------- 2. shutdown mid-send


async def _replies_sending(redis: aioredis.Redis) -> int:
    count = 0
    async for key in redis.scan_iter(match="mel:t:*:reply:*"):
        if await redis.hget(key, "status") == b"sending":
            count += 1
    return count


@pytest.mark.slow
async def test_shutdown_while_sending_loses_no_reply_and_marks_none_uncertain(
    start_gateway: Any, fake_twilio: FakeTwilioAPI, fake_llm: FakeLLM, redis: aioredis.Redis
) -> None:
    fake_llm.delay = 0.3
    fake_twilio.delay = 1.0
    fake_twilio.fail_next(429, 20429, times=3)
    first: Gateway = await start_gateway(mel_shutdown_grace_seconds=0.5)
    users = [f"+55118777{i:05d}" for i in range(15)]
    answers = await asyncio.gather(*(first.twilio("qual o total do mês?", user=u) for u in users))
    assert [r.status for r in answers] == [200] * 15
    async with asyncio.timeout(10):  # shut down while replies are being sent
        while not await _replies_sending(redis):
            await asyncio.sleep(0.02)
    await first.server.close()

    second: Gateway = await start_gateway(mel_shutdown_grace_seconds=0.5)
    await fake_twilio.wait_for_messages(15, timeout=30)
    await second.idle(timeout=30)
    per_user = Counter(m["To"] for m in fake_twilio.messages)
    assert per_user == {f"whatsapp:{u}": 1 for u in users}
    failed = await second.events("message.failed")
    assert [e for e in failed if e["data"].get("reason") == "delivery_uncertain"] == []


@pytest.mark.slow
async def test_a_send_slower_than_the_grace_records_its_real_outcome(
    start_gateway: Any, fake_twilio: FakeTwilioAPI, redis: aioredis.Redis
) -> None:
    """A reply being sent when the drain starts is let finish and records what the
    provider did: the provider took it, so it is ``sent`` (not ``failed`` because our own
    shutdown closed the connection under it, nor ``uncertain``)."""
    fake_twilio.delay = 1.5  # the provider takes longer than the grace, twice over
    first: Gateway = await start_gateway(mel_shutdown_grace_seconds=0.5)
    users = [f"+55118555{i:05d}" for i in range(3)]
    await asyncio.gather(*(first.twilio("oi", user=u) for u in users))
    async with asyncio.timeout(10):
        while await _replies_sending(redis) < 3:
            await asyncio.sleep(0.02)
    await first.server.close()
    await fake_twilio.wait_for_messages(3, timeout=10)  # the provider took every reply
    after: Gateway = await start_gateway(run_worker=False)
    async with asyncio.timeout(10):
        while len(await after.events("message.sent")) + len(
            await after.events("message.failed")
        ) < 3 and await _replies_sending(redis):
            await asyncio.sleep(0.05)
    failed = await after.events("message.failed")
    assert [e["data"].get("error") or e["data"].get("reason") for e in failed] == []
    assert len(await after.events("message.sent")) == 3


# ---------------------------------------------------------------- 3-4. Meta bodies


async def _post_meta(gw: Gateway, body: bytes) -> aiohttp.ClientResponse:
    return await gw.meta(body)  # signed with the app secret over these exact bytes


async def test_one_poisoned_meta_delivery_does_not_fail_its_batch(
    start_gateway: Any, fake_graph: FakeGraphAPI
) -> None:
    gw: Gateway = await start_gateway()
    bodies: list[bytes] = []
    ids: list[str] = []
    for i in range(40):
        message = meta_text_message(f"PLACEHOLDER-{i}", from_=f"+55117666{i:05d}")
        ids.append(message["id"])
        body = json.dumps(meta_payload([message]))
        text = "ola \\ud800 mundo" if i == 17 else f"mensagem {i}"  # a lone surrogate escape
        bodies.append(body.replace(f"PLACEHOLDER-{i}", text).encode())
    assert b"\\ud800" in bodies[17]
    async with asyncio.timeout(20):
        answers = await asyncio.gather(*(_post_meta(gw, b) for b in bodies))
    assert [r.status for r in answers] == [200] * 40
    received = await gw.wait_events("message.received", 40)
    by_id = {e["data"]["message_id"]: e["data"]["text"] for e in received}
    assert sorted(by_id) == sorted(ids)
    assert by_id[ids[17]] == "ola \ufffd mundo"
    assert by_id[ids[3]] == "mensagem 3"


@pytest.mark.parametrize(
    ("what", "body"),
    [
        ("nested arrays", b'{"object":"whatsapp_business_account","entry":'
         + b"[" * 5000 + b"]" * 5000 + b"}"),
        ("nested arrays alone", b"[" * 5000 + b"]" * 5000),
        ("huge integer", b'{"object":"whatsapp_business_account","entry":[],"n":'
         + b"9" * 5000 + b"}"),
    ],
)  # fmt: skip
async def test_signed_hostile_meta_body_is_400_with_reason(
    gateway: Gateway, what: str, body: bytes
) -> None:
    resp = await _post_meta(gateway, body)
    assert resp.status == 400, what
    assert (await resp.json())["error"]
    async with gateway.session.get(gateway.url("/healthz")) as health:
        assert health.status == 200


# ---------------------------------------------------------------- 5. non-UTF-8 headers


async def test_a_non_utf8_header_byte_is_refused_never_a_500(start_gateway: Any) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN)
    body = b"MessageSid=SM1&From=whatsapp%3A%2B5511999990000&To=whatsapp%3A%2B14155238886"
    webhook = await raw_http(
        gw,
        b"POST /webhooks/twilio HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        b"X-Twilio-Signature: \xff\xfe\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body,
    )
    assert status_of(webhook) == 403, webhook[:300]
    assert json_of(webhook)["error"]
    support = await raw_http(
        gw,
        b"GET /support/handoffs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer \xff\r\nConnection: close\r\n\r\n",
    )
    assert status_of(support) == 401, support[:300]
    # the refusal was recorded (its header made storable), the service still answers
    raw = await gw.store.redis.xrange(gw.store.keys.raw)
    assert [json.loads(r[1][b"meta"])["status"] for r in raw] == [403]
    async with gw.session.get(gw.url("/support/handoffs"), headers=auth()) as ok:
        assert ok.status == 200


# ---------------------------------------------------------------- 6-7. unsigned bodies


async def test_unsigned_bodies_are_kept_as_a_prefix_and_only_the_last_few(
    start_gateway: Any,
) -> None:
    gw: Gateway = await start_gateway(mel_raw_refused_count=5)
    accepted_sid = "SM" + uuid.uuid4().hex
    assert (await gw.twilio("oi", sid=accepted_sid)).status == 200
    big = {"Body": "x" * (100 * 1024), "From": "whatsapp:+5511999990000"}
    for _ in range(20):
        async with gw.session.post(gw.url("/webhooks/twilio"), data=big) as resp:
            assert resp.status == 403
    raw = await gw.store.redis.xrange(gw.store.keys.raw)
    records = [(json.loads(fields[b"meta"]), fields[b"body"]) for _id, fields in raw]
    refused = [body for meta, body in records if meta["status"] != 200]
    assert all(len(body) <= 1024 for body in refused), [len(b) for b in refused]
    assert 1 <= len(refused) <= 5
    accepted = [meta for meta, _body in records if meta["status"] == 200]
    assert [m["message_ids"] for m in accepted] == [[accepted_sid]]


async def test_a_body_of_150000_fields_is_refused_at_once_and_health_stays_fast(
    gateway: Gateway,
) -> None:
    body = "&".join(["a=1"] * 150_000)
    assert len(body) < 1024 * 1024  # under the size limit: only the field count is at stake
    refusals: list[float] = []  # per round: how long the refusal took
    stalls: list[float] = []  # per round: the slowest health check (and pause) meanwhile

    async def post(done: asyncio.Event) -> None:
        start = time.perf_counter()
        try:
            async with gateway.session.post(
                gateway.url("/webhooks/twilio"),
                data=body,
                headers={
                    "Content-Type": "application/x-www-form-urlencoded",
                    "X-Twilio-Signature": plausible_signature(),
                },
            ) as resp:
                assert resp.status in (403, 413), resp.status
        finally:
            refusals.append(time.perf_counter() - start)
            done.set()

    async def health(done: asyncio.Event) -> None:
        slowest = 0.0
        while not done.is_set():
            start = time.perf_counter()
            async with gateway.session.get(gateway.url("/healthz")) as resp:
                assert resp.status == 200
            await asyncio.sleep(0.002)  # a blocked event loop shows here too
            slowest = max(slowest, time.perf_counter() - start)
        stalls.append(slowest)

    for _ in range(3):  # the best of three rounds: a busy test machine must not decide
        done = asyncio.Event()
        async with asyncio.timeout(10):
            await asyncio.gather(post(done), health(done))
    # the refusal costs milliseconds (it took ~0.15-0.8 s of event loop before the fix)
    assert min(refusals) < 0.05, refusals
    assert min(stalls) < 0.05, stalls


# ---------------------------------------------------------------- 8. bad parameters


async def test_meta_verification_with_an_empty_challenge_is_400(gateway: Gateway) -> None:
    params = {"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": ""}
    async with gateway.session.get(gateway.url("/webhooks/meta"), params=params) as resp:
        assert resp.status == 400
        assert "challenge" in (await resp.json())["error"]


@pytest.mark.parametrize(
    ("headers", "query"),
    [({"Last-Event-ID": "nonsense"}, {}), ({}, {"after": "abc"})],
    ids=["last-event-id", "after"],
)
async def test_a_bad_feed_cursor_is_400_with_reason(
    start_gateway: Any, headers: dict[str, str], query: dict[str, str]
) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN)
    async with asyncio.timeout(5):
        resp = await gw.session.get(
            gw.url("/support/events"), headers={**auth(), **headers}, params=query
        )
    try:
        assert resp.status == 400
        assert "event id" in (await resp.json())["error"]
    finally:
        resp.close()


# ---------------------------------------------------------------- 9. slowloris


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _spawn_serve(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--no-worker"],
            cwd=Path(__file__).resolve().parents[2],  # this tree's packages
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


@pytest.fixture
async def served(redis_url: str, redis: aioredis.Redis, tmp_path: Path) -> AsyncIterator[int]:
    """``mel-gateway serve`` as an operator runs it (its own process, the real server
    options), with a 1 s idle timeout; its port."""
    port = _free_port()
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "MEL_DATA_DIR": str(tmp_path / "served"),
        "MEL_HTTP_IDLE_TIMEOUT_SECONDS": "1",
        "MEL_SHUTDOWN_GRACE_SECONDS": "1",
        "PSYCHOLOGIST_ENABLED": "false",
        "MEL_LOG_FORMAT": "json",
    }
    proc = _spawn_serve(env, tmp_path / "serve.log")
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(200):
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                        if resp.status == 200:
                            break
                await asyncio.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


async def test_a_connection_that_never_finishes_its_headers_is_closed(served: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served)
    try:
        writer.write(b"POST /webhooks/twilio HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Twilio-Sig")
        await writer.drain()
        start = time.perf_counter()
        with contextlib.suppress(ConnectionResetError):
            async with asyncio.timeout(4):
                while await reader.read(65536):  # a 408 may come first; then the close
                    pass
        assert time.perf_counter() - start < 2.5
    finally:
        writer.close()


# ---------------------------------------------------------------- 10. privacy


async def _abandon_ready_entries(redis: aioredis.Redis) -> int:
    """Read the ready stream as a consumer that then dies: its entries stay pending."""
    try:
        await redis.xgroup_create("mel:ready", "workers", id="0", mkstream=True)
    except aioredis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
    got = await redis.xreadgroup("workers", "dead-worker", {"mel:ready": ">"}, count=10)
    return sum(len(entries) for _stream, entries in got)


@pytest.mark.slow
async def test_no_log_line_of_a_whole_journey_holds_a_phone_number(
    start_gateway: Any,
    fake_twilio: FakeTwilioAPI,
    redis: aioredis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    with capture_logs(processors=[merge_contextvars]) as logs:
        web_only: Gateway = await start_gateway(run_worker=False, support_token=TOKEN)
        # a message stored, taken by a worker that dies: recovered by another one
        assert (await web_only.twilio("oi", user=USER)).status == 200
        assert await _abandon_ready_entries(redis) == 1
        gw: Gateway = await start_gateway(support_token=TOKEN, mel_claim_idle_seconds=0.6)
        await fake_twilio.wait_for_messages(1, timeout=15)
        # a bad signature and a malformed delivery, both naming the number
        params = twilio_inbound_params(from_=USER, to=BUSINESS, body="oi")
        assert (await gw.twilio(params=params, signature=plausible_signature())).status == 403
        malformed = {"MessageSid": "SM1", "From": f"whatsapp:{USER}"}
        assert (await gw.twilio(params=malformed)).status == 400
        sms = {**params, "MessageSid": "SM" + uuid.uuid4().hex, "From": f"sms:{USER}"}
        assert (await gw.twilio(params=sms)).status == 400
        bad_meta = json.dumps(meta_payload([meta_text_message("oi", from_=USER)])).encode()
        assert (await gw.meta(bad_meta, secret="not-the-secret")).status == 403
        assert (await gw.meta(f'{{"from": "{USER_DIGITS}", '.encode())).status == 400
        no_text = {"from": USER_DIGITS, "id": "wamid.x", "type": "text", "timestamp": "1"}
        assert (await gw.meta(meta_payload([no_text]))).status < 500
        # a handoff, a support reply, the support views
        await gw.twilio("quero falar com uma pessoa", user=USER)
        await gw.wait_events("session.human_handoff.requested", 1)
        await gw.idle()
        async with gw.session.post(
            gw.url(f"/support/threads/{THREAD}/messages"), headers=auth(), json={"text": "Oi!"}
        ) as resp:
            assert resp.status == 202
        async with gw.session.get(gw.url(f"/support/threads/{THREAD}"), headers=auth()) as r:
            assert r.status == 200
        async with gw.session.get(gw.url("/support/threads/twilio:x:+5511999990000")) as r:
            assert r.status == 401
        await fake_twilio.wait_for_messages(3, timeout=15)
        await gw.idle()
        await gw.server.close()  # the shutdown's lines too
    assert len(logs) > 10
    text = repr(logs) + "\n".join(
        f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records if r.name != "aiohttp.access"
    )
    assert USER not in text
    assert USER_DIGITS not in text
    claimed = [e for e in logs if "claim" in e["event"]]
    assert claimed, "the recovery path was exercised"


# ---------------------------------------------------------------- 11. shutdown with a feed


async def test_shutdown_with_an_open_feed_is_bounded_by_the_grace(start_gateway: Any) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN, mel_shutdown_grace_seconds=1.0)
    viewer = aiohttp.ClientSession()
    try:
        stream = await open_stream(viewer, gw)
        start = time.perf_counter()
        async with asyncio.timeout(10):
            await gw.server.close()
        assert time.perf_counter() - start < 2.0
        stream.close()
    finally:
        await viewer.close()


# ---------------------------------------------------------------- 12. ?thread=


@pytest.mark.parametrize(
    "thread",
    [
        "twilio:+14155238886:+5511999990000",  # a raw "+": the query decodes it as a space
        "5511999990000",  # a bare number
        "+5511999990000",
    ],
)
async def test_thread_filter_takes_what_replay_takes(
    start_gateway: Any, fake_twilio: FakeTwilioAPI, thread: str
) -> None:
    gw: Gateway = await start_gateway(support_token=TOKEN)
    await gw.twilio("oi", user="+5511988887777")  # another user, whose events come first
    await fake_twilio.wait_for_messages(1)
    await gw.idle()
    await gw.twilio("oi", user=USER)
    await fake_twilio.wait_for_messages(2)
    await gw.idle()
    url = URL(gw.url("/support/events") + f"?after=0-0&thread={thread}", encoded=True)
    seen: list[dict[str, Any]] = []
    resp = await gw.session.get(url, headers=auth())
    try:
        assert resp.status == 200
        with contextlib.suppress(TimeoutError):  # judged by what arrived
            async with asyncio.timeout(3):
                async for event in read_sse(resp):
                    seen.append(json.loads(event["data"]))
                    if event.get("event") == "message.sent":
                        break
    finally:
        resp.close()
    assert [e["type"] for e in seen][-1:] == ["message.sent"], seen
    assert {e["thread_id"] for e in seen} == {THREAD}


# ---------------------------------------------------------------- 13. metrics


async def test_replies_to_the_local_outbox_are_counted_as_outbox(start_gateway: Any) -> None:
    gw: Gateway = await start_gateway(twilio_account_sid=None, twilio_whatsapp_from=None)
    assert (await gw.twilio("oi")).status == 200
    await gw.wait_events("message.sent", 1)
    await gw.idle()
    outbox = await gw.store.redis.xrange(f"{gw.settings.mel_redis_prefix}:outbox")
    assert len(outbox) == 1  # the reply went to the local outbox, not to Twilio
    replies = await metric(gw, "mel_replies_total")
    assert 'mel_replies_total{channel="outbox",status="sent"} 1.0' in replies, replies
    assert 'channel="twilio"' not in replies
