"""Hardening campaign (issue 10): items 1–9 of the hardening issue re-run against the
gateway as an operator runs it — ``mel-gateway serve`` in its own process (uvloop), a real
(embedded) Redis, the fake LLM / Twilio / Graph servers in this process — with bounded,
loopback-only load. One line per item: the item, its figures, the goal, PASS/FAIL; then
what the gateways logged at error level. About 30–40 s on 2 cores.

``make campaign`` or ``python -m bench.hardening_campaign``.

1. 1,000 open ``/support/events`` streams while signed webhooks keep coming and turns
   keep being answered; then ``MEL_FEED_MAX_STREAMS`` low: the stream past it gets a 503,
   webhooks still a 200.
2. SIGTERM while ~200 replies are being sent (Twilio answering 429 first), then a
   restart: every reply delivered exactly once, none uncertain.
3. One delivery with a lone surrogate among 40 concurrent valid ones.
4. Signed hostile Meta bodies: 5,000 nested arrays, a 5,000-digit integer, a lone
   surrogate where a fixed value is expected.
5. A non-UTF-8 header byte on the webhooks and on the support API.
6. 20 unsigned 3 MiB deliveries: Redis memory growth, what is kept of each.
7. An unsigned 1 MiB Twilio body of 150,000 fields: time to the refusal, ``/healthz``
   latency meanwhile.
8. Meta verification with an empty ``hub.challenge``; a bad ``Last-Event-ID``.
9. Slowloris (half a header, then silence) during the rest: seconds until it is closed
   (``MEL_HTTP_IDLE_TIMEOUT_SECONDS``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from bench.gateway_bench import (
    ACCOUNT_SID,
    TOKEN,
    _free_port,
    _gateway_env,
    _params,
    answer_like_models,
    cpu_seconds,
    pct,
)
from channels import compute_twilio_signature
from gateway.store._codec import as_str
from gateway.store.embedded import EmbeddedRedis
from gateway.store.events import envelope
from tests.fakes.graph_api import FAKE_META_ACCESS_TOKEN, FakeGraphAPI
from tests.fakes.llm import FakeLLM
from tests.fakes.payloads import META_PHONE_NUMBER_ID, meta_payload, meta_text_message, sign_meta
from tests.fakes.twilio_api import FakeTwilioAPI

SUPPORT_TOKEN = "campaign-support-token"
META_SECRET = "campaign-meta-secret"
META_VERIFY_TOKEN = "campaign-verify-token"
IDLE_TIMEOUT = 3.0
"""``MEL_HTTP_IDLE_TIMEOUT_SECONDS`` of the gateways (the default, 15 s, would only make
item 9 longer)."""
STREAMS = 1000
STREAM_CAP = 100
TURNS = 200
EVENTS = "mel:events"


# ------------------------------------------------------------------------- plumbing


@dataclass
class Row:
    item: str
    figures: str
    goal: str
    ok: bool


@dataclass
class Campaign:
    rows: list[Row] = field(default_factory=list)

    def record(self, item: str, figures: str, goal: str, ok: bool) -> None:
        self.rows.append(Row(item, figures, goal, ok))
        print(f"  {item}: {figures} — {'PASS' if ok else 'FAIL'}", file=sys.stderr, flush=True)


@dataclass
class Fakes:
    llm: FakeLLM
    twilio: FakeTwilioAPI
    graph: FakeGraphAPI

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls) -> AsyncIterator[Fakes]:
        async with (
            FakeLLM() as llm,
            FakeTwilioAPI(ACCOUNT_SID, TOKEN) as twilio,
            FakeGraphAPI(FAKE_META_ACCESS_TOKEN) as graph,
        ):
            answer_like_models(llm)
            yield cls(llm, twilio, graph)


class Served:
    """``mel-gateway serve`` in its own process; stopped with SIGTERM like an orchestrator
    does (waited for without blocking this loop: the fakes must keep answering)."""

    def __init__(self, name: str, env: dict[str, str], logs: Path, *extra: str) -> None:
        self.name = name
        self.env = env
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = logs / f"{name}.log"
        self.argv = [sys.executable, "-m", "gateway", "serve", "--port", str(self.port), *extra]
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> Served:
        with self.log.open("ab") as stderr:
            self.proc = subprocess.Popen(
                self.argv, env={**os.environ, **self.env}, stdout=subprocess.DEVNULL, stderr=stderr
            )
        async with aiohttp.ClientSession() as session:
            for _ in range(300):
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"{self.url}/healthz") as resp:
                        if resp.status == 200:
                            return self
                await asyncio.sleep(0.05)
        await self.stop()
        raise RuntimeError(f"{self.name} did not answer /healthz")

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Served]:
        """Started, and stopped however the block ends."""
        try:
            yield await self.start()
        finally:
            await self.stop()

    async def stop(self, timeout: float = 30.0) -> float:
        """SIGTERM; the seconds it took to exit (killed past ``timeout``: ``inf``)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return 0.0
        start = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        while proc.poll() is None:
            if time.perf_counter() - start > timeout:
                proc.kill()
                proc.wait()
                return float("inf")
            await asyncio.sleep(0.02)
        return time.perf_counter() - start


def gateway_env(redis_url: str, data: Path, fakes: Fakes, **extra: str) -> dict[str, str]:
    return {
        **_gateway_env(redis_url, data, fakes.llm, fakes.twilio),
        "HOST": "127.0.0.1",
        "META_APP_SECRET": META_SECRET,
        "META_VERIFY_TOKEN": META_VERIFY_TOKEN,
        "META_ACCESS_TOKEN": FAKE_META_ACCESS_TOKEN,
        "META_PHONE_NUMBER_ID": META_PHONE_NUMBER_ID,
        "META_GRAPH_BASE_URL": fakes.graph.base_url,
        "SUPPORT_TOKEN": SUPPORT_TOKEN,
        "MEL_HTTP_IDLE_TIMEOUT_SECONDS": str(IDLE_TIMEOUT),
        "PSYCHOLOGIST_ENABLED": "false",
        **extra,
    }


def client(limit: int = 100) -> aiohttp.ClientSession:
    """Pooled connections are dropped before the gateway's idle timeout closes them."""
    connector = aiohttp.TCPConnector(limit=limit, keepalive_timeout=IDLE_TIMEOUT / 3)
    return aiohttp.ClientSession(connector=connector)


def auth(token: str = SUPPORT_TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def plausible_twilio_signature() -> str:
    """Shaped like an X-Twilio-Signature (base64 of 20 bytes), signing nothing."""
    return base64.b64encode(os.urandom(20)).decode()


def tally_reasons(failed: list[dict[str, Any]]) -> str:
    """``message.failed`` events by reason (or error)."""
    reasons = Counter(str(e["data"].get("reason") or e["data"].get("error")) for e in failed)
    return " ".join(f"{r}×{n}" for r, n in reasons.most_common()) or "0"


def tally(statuses: Iterable[int]) -> str:
    counts = Counter(statuses)
    return " ".join(f"{s}×{n}" for s, n in sorted(counts.items())) or "none"


async def error_of(resp: aiohttp.ClientResponse) -> str:
    with contextlib.suppress(ValueError, aiohttp.ContentTypeError):
        body = await resp.json()
        if isinstance(body, dict):
            return str(body.get("error", ""))
    return ""


async def metric(session: aiohttp.ClientSession, gw: Served, name: str) -> float:
    """An unlabelled metric's value (NaN when absent)."""
    async with session.get(f"{gw.url}/metrics") as resp:
        text = await resp.text()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return float("nan")


async def raw_http(port: int, request: bytes, timeout: float = 5.0) -> bytes:
    """``request`` bytes as they are over a fresh socket; all the server answers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(timeout):
            return await reader.read()
    finally:
        writer.close()


def raw_status(answer: bytes) -> tuple[int, str]:
    """The status of a raw HTTP answer and its JSON ``error``."""
    if not answer.startswith(b"HTTP/1.1 "):
        return 0, repr(answer[:60])
    status = int(answer.split(b" ", 2)[1])
    try:
        reason = str(json.loads(answer.partition(b"\r\n\r\n")[2]).get("error", ""))
    except (ValueError, AttributeError):
        reason = ""
    return status, reason


Entry = tuple[str, dict[bytes, bytes]]


def entries_of(reply: Any) -> list[Entry]:
    """A stream reply (XRANGE, XREVRANGE) as (id, fields)."""
    return [(as_str(entry_id), dict(fields)) for entry_id, fields in reply or []]


async def last_event_id(redis: aioredis.Redis) -> str:
    last = entries_of(await redis.xrevrange(EVENTS, count=1))
    return last[0][0] if last else "0-0"


async def events_since(redis: aioredis.Redis, after: str, type_: str) -> list[dict[str, Any]]:
    entries = entries_of(await redis.xrange(EVENTS, min=f"({after}"))
    wanted = type_.encode()
    return [envelope(eid, f) for eid, f in entries if f.get(b"type") == wanted]


async def replies_to(twilio: FakeTwilioAPI, users: list[str], timeout: float) -> Counter[str]:
    """Replies the fake Twilio took for ``users``, once each has one (or at the timeout)."""
    wanted = {f"whatsapp:{u}" for u in users}
    deadline = time.perf_counter() + timeout
    while True:
        got = Counter(m["To"] for m in twilio.messages if m.get("To") in wanted)
        if len(got) == len(wanted) or time.perf_counter() > deadline:
            return got
        await asyncio.sleep(0.05)


@dataclass
class Load:
    statuses: list[int]
    latencies_ms: list[float]
    answered: int
    users: list[str]

    @property
    def p99(self) -> float:
        return pct(self.latencies_ms, 99)

    @property
    def all_ok(self) -> bool:
        return all(s == 200 for s in self.statuses)


async def send_turns(
    session: aiohttp.ClientSession,
    gw: Served,
    twilio: FakeTwilioAPI,
    users: list[str],
    *,
    concurrency: int = 16,
    wait: float | None = 60.0,
) -> Load:
    """One signed Twilio delivery per user, ``concurrency`` at a time; with ``wait``, the
    replies are waited for."""
    hook = f"{gw.url}/webhooks/twilio"
    statuses: list[int] = []
    latencies: list[float] = []
    queue = iter(enumerate(users))

    async def lane() -> None:
        for i, user in queue:
            params = _params(i, user, f"quanto gastei no mercado? {i}")
            headers = {"X-Twilio-Signature": compute_twilio_signature(TOKEN, hook, params)}
            start = time.perf_counter()
            try:
                async with session.post(hook, data=params, headers=headers) as resp:
                    await resp.read()
                    statuses.append(resp.status)
            except aiohttp.ClientError:
                statuses.append(0)
            latencies.append((time.perf_counter() - start) * 1000)

    await asyncio.gather(*(lane() for _ in range(concurrency)))
    answered = len(await replies_to(twilio, users, wait)) if wait is not None else 0
    return Load(statuses, latencies, answered, users)


def numbers(prefix: str, n: int) -> list[str]:
    """``n`` distinct E.164 numbers: +55 and ``prefix`` (digits), padded to 13 digits."""
    width = 11 - len(prefix)
    return [f"+55{prefix}{i:0{width}d}" for i in range(n)]


# ------------------------------------------------------------------------- 1. viewers


async def open_stream(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None
) -> aiohttp.ClientResponse:
    """A ``/support/events`` stream whose first bytes arrived (really open); any other
    answer is returned as it is."""
    async with asyncio.timeout(20):
        resp = await session.get(f"{url}/support/events", headers={**auth(), **(headers or {})})
        if resp.status == 200:
            await resp.content.readany()
        return resp


async def viewers(url: str, n: int) -> None:
    """``n`` viewers of ``url``'s feed, in a process of their own (``main`` runs this for
    ``viewers URL N``): opens them, prints what opened (a JSON line), reads every stream
    until a line arrives on stdin, then prints what each received and closes them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 2 * n + 1024)), hard))
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    gate = asyncio.Semaphore(64)  # connecting pace (the listen backlog is 128)

    async def one() -> aiohttp.ClientResponse:
        async with gate:
            return await open_stream(session, url)

    async def follow(resp: aiohttp.ClientResponse, got: list[int]) -> None:
        """Read like a viewer does, counting events (blank-line ends) until the end."""
        last = b""
        with contextlib.suppress(aiohttp.ClientError):
            async for chunk in resp.content.iter_any():
                got[0] += chunk.count(b"\n\n") + (last == b"\n" and chunk[:1] == b"\n")
                last = chunk[-1:]

    start = time.perf_counter()
    opened = await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)
    seconds = time.perf_counter() - start
    streams = [r for r in opened if isinstance(r, aiohttp.ClientResponse) and r.status == 200]
    counts = [[0] for _ in streams]
    readers = [asyncio.create_task(follow(r, k)) for r, k in zip(streams, counts, strict=True)]
    refused = [r.status if isinstance(r, aiohttp.ClientResponse) else repr(r) for r in opened]
    refused = [x for x in refused if x != 200]
    print(json.dumps({"opened": len(streams), "seconds": seconds, "refused": refused[:5]}))
    sys.stdout.flush()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    still_open = sum(not t.done() for t in readers)
    events = [k[0] for k in counts]
    print(
        json.dumps(
            {"still_open": still_open, "events": [min(events, default=0), max(events, default=0)]}
        )
    )
    sys.stdout.flush()
    for r in streams:
        r.close()
    for t in readers:
        t.cancel()
    await asyncio.gather(*readers, return_exceptions=True)
    await session.close()


@contextlib.asynccontextmanager
async def viewers_process(gw: Served, n: int) -> AsyncIterator[ViewersProcess]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.hardening_campaign", "viewers", gw.url, str(n),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        yield ViewersProcess(proc)
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


class ViewersProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        async with asyncio.timeout(60):
            answer: dict[str, Any] = json.loads(await self.proc.stdout.readline())
        return answer

    async def report(self) -> dict[str, Any]:
        """What each stream received; the streams close."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"report\n")
        await self.proc.stdin.drain()
        return await self.line()


async def item_many_viewers(c: Campaign, gw: Served, redis: aioredis.Redis, fakes: Fakes) -> None:
    assert gw.proc is not None
    users = numbers("2101", TURNS)
    async with client() as session:
        await send_turns(session, gw, fakes.twilio, numbers("2109", 50))  # warm-up
        cpu = cpu_seconds(gw.proc.pid)
        before = await send_turns(session, gw, fakes.twilio, numbers("2100", TURNS))
        cpu_before = cpu_seconds(gw.proc.pid) - cpu
        async with viewers_process(gw, STREAMS) as watching:
            opened = await watching.line()
            gauge_open = await metric(session, gw, "mel_feed_streams")
            after = await last_event_id(redis)
            cpu = cpu_seconds(gw.proc.pid)
            during = await send_turns(session, gw, fakes.twilio, users)
            cpu_during = cpu_seconds(gw.proc.pid) - cpu
            await asyncio.sleep(1.5)  # the last turns' events reach every viewer
            published = len(entries_of(await redis.xrange(EVENTS, min=f"({after}")))
            seen = await watching.report()
        failed = await events_since(redis, after, "message.failed")
        per_user = await replies_to(fakes.twilio, users, 0)
        doubled = sum(n > 1 for n in per_user.values())
        deadline = time.perf_counter() + 5
        while (gauge_after := await metric(session, gw, "mel_feed_streams")) != 0 and (
            time.perf_counter() < deadline
        ):
            await asyncio.sleep(0.1)
    ok = (
        opened["opened"] == STREAMS
        and seen["still_open"] == STREAMS
        and during.all_ok
        and during.answered == TURNS
        and during.p99 < 1000
        and gauge_after == 0
        and not (failed or doubled)
    )
    c.record(
        f"1a. {STREAMS} feed streams open + {TURNS} turns",
        f"opened {opened['opened']}/{STREAMS} in {opened['seconds']:.1f} s (gauge "
        f"{gauge_open:.0f}), still open after the load {seen['still_open']}; webhooks "
        f"{tally(during.statuses)}, p99 {during.p99:.0f} ms (p50 "
        f"{pct(during.latencies_ms, 50):.0f}; without viewers p99 {before.p99:.0f} ms, p50 "
        f"{pct(before.latencies_ms, 50):.0f}); turns answered {during.answered}/{TURNS}, "
        f"doubled {doubled}, failed {tally_reasons(failed)}; events per viewer "
        f"{seen['events'][0]}–{seen['events'][1]} of {published}; gateway CPU "
        f"{cpu_during:.1f} s (without viewers {cpu_before:.1f} s); gauge after close "
        f"{gauge_after:.0f}",
        f"all {STREAMS} open, webhooks all 200, p99 < 1 s, every turn answered once",
        ok,
    )


async def item_stream_cap(c: Campaign, gw: Served, fakes: Fakes) -> None:
    watching = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    try:
        streams = [await open_stream(watching, gw.url) for _ in range(STREAM_CAP)]
        extra = await open_stream(watching, gw.url)
        extra_error = await error_of(extra)
        async with client() as session:
            hooks = await send_turns(
                session, gw, fakes.twilio, numbers("2102", 20), concurrency=4, wait=None
            )
            gauge = await metric(session, gw, "mel_feed_streams")
        for r in [*streams, extra]:
            r.close()
    finally:
        await watching.close()
    opened = sum(r.status == 200 for r in streams)
    ok = opened == STREAM_CAP and extra.status == 503 and "stream" in extra_error
    ok = ok and hooks.all_ok
    c.record(
        f"1b. MEL_FEED_MAX_STREAMS={STREAM_CAP}: stream {STREAM_CAP + 1}",
        f"streams 1–{STREAM_CAP}: {opened} open (gauge {gauge:.0f}); stream {STREAM_CAP + 1}: "
        f"{extra.status} {extra_error!r}; webhooks meanwhile {tally(hooks.statuses)}",
        f"{STREAM_CAP} open, #{STREAM_CAP + 1} 503 with reason, webhooks 200",
        ok,
    )


# ------------------------------------------------------------------------- 2. shutdown


async def replies_sending(redis: aioredis.Redis) -> int:
    count = 0
    async for key in redis.scan_iter(match="mel:t:*:reply:*", count=1000):
        if await redis.hget(key, "status") == b"sending":
            count += 1
    return count


async def item_shutdown_mid_send(
    c: Campaign, redis: aioredis.Redis, fakes: Fakes, env: dict[str, str], logs: Path
) -> None:
    await redis.flushall()
    fakes.llm.delay = 0.3
    fakes.twilio.delay = 1.0
    fakes.twilio.fail_next(429, 20429, times=60)  # the first 60 sends: "Too Many Requests"
    first_request = len(fakes.twilio.requests)
    users = numbers("2200", TURNS)
    first = Served("shutdown-1", env, logs)
    try:
        async with first.running(), client() as session:
            load = await send_turns(session, first, fakes.twilio, users, concurrency=32, wait=None)
            deadline = time.perf_counter() + 30
            while (sending := await replies_sending(redis)) < TURNS // 4:
                if time.perf_counter() > deadline:
                    break
                await asyncio.sleep(0.05)
            delivered_before = len(await replies_to(fakes.twilio, users, 0))
            exit_s = await first.stop()  # SIGTERM mid-send
        async with Served("shutdown-2", env, logs).running():
            await replies_to(fakes.twilio, users, 45)
            deadline = time.perf_counter() + 10
            while await replies_sending(redis) and time.perf_counter() < deadline:
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # a second copy would arrive now
            got = await replies_to(fakes.twilio, users, 0)
            failed = await events_since(redis, "0-0", "message.failed")
    finally:
        fakes.llm.delay = 0.0
        fakes.twilio.delay = 0.0
    throttled = sum(r.get("status") == 429 for r in fakes.twilio.requests[first_request:])
    once = sum(n == 1 for n in got.values())
    doubled = sum(n > 1 for n in got.values())
    lost = len(users) - len(got)
    uncertain = sum(e["data"].get("reason") == "delivery_uncertain" for e in failed)
    ok = load.all_ok and once == TURNS and not (doubled or lost or uncertain or failed)
    c.record(
        f"2. SIGTERM with {TURNS} turns in flight, 429s",
        f"webhooks {tally(load.statuses)}; at SIGTERM {sending} sending, "
        f"{delivered_before} delivered; exit in {exit_s:.1f} s; 429s answered {throttled}; "
        f"after restart: once {once}, lost {lost}, doubled {doubled}, uncertain {uncertain}, "
        f"failed {len(failed)}",
        f"{TURNS} once, 0 lost, 0 doubled, 0 uncertain",
        ok,
    )


# ------------------------------------------------------------------------- 3-4. Meta


async def post_meta(
    session: aiohttp.ClientSession, gw: Served, body: bytes, signature: str | None = None
) -> tuple[int, str, float]:
    """POST a Meta delivery (signed over these exact bytes unless told): status, error, ms."""
    headers = {
        "Content-Type": "application/json",
        "X-Hub-Signature-256": signature or sign_meta(META_SECRET, body),
    }
    start = time.perf_counter()
    async with session.post(f"{gw.url}/webhooks/meta", data=body, headers=headers) as resp:
        reason = await error_of(resp) if resp.status != 200 else ""
        return resp.status, reason, (time.perf_counter() - start) * 1000


async def item_poisoned_batch(
    c: Campaign, gw: Served, redis: aioredis.Redis, session: aiohttp.ClientSession
) -> None:
    poisoned = 17
    bodies: list[bytes] = []
    ids: list[str] = []
    for i, user in enumerate(numbers("2300", 40)):
        message = meta_text_message(f"PLACEHOLDER-{i}", from_=user)
        ids.append(message["id"])
        text = "ola \\ud800 mundo" if i == poisoned else f"mensagem {i}"  # an escape, alone
        body = json.dumps(meta_payload([message])).replace(f"PLACEHOLDER-{i}", text)
        bodies.append(body.encode())
    after = await last_event_id(redis)
    answers = await asyncio.gather(*(post_meta(session, gw, b) for b in bodies))
    statuses = [s for s, _r, _ms in answers]
    texts: dict[str, str] = {}
    deadline = time.perf_counter() + 15
    while len(texts) < len(ids) and time.perf_counter() < deadline:
        received = await events_since(redis, after, "message.received")
        texts = {e["data"]["message_id"]: e["data"].get("text", "") for e in received}
        texts = {k: v for k, v in texts.items() if k in set(ids)}
        await asyncio.sleep(0.05)
    repaired = texts.get(ids[poisoned])
    valid = [s for i, s in enumerate(statuses) if i != poisoned]
    ok = valid == [200] * 39 and statuses[poisoned] == 200 and len(texts) == 40
    ok = ok and repaired == "ola \ufffd mundo"
    c.record(
        "3. 1 poisoned (lone \\ud800) among 40 Meta",
        f"valid {tally(valid)}, poisoned {statuses[poisoned]}; received {len(texts)}/40; "
        f"poisoned text stored as {repaired!r}",
        "39 valid + 1 poisoned all handled (200, text repaired), no 500",
        ok,
    )


async def item_hostile_meta(c: Campaign, gw: Served, session: aiohttp.ClientSession) -> None:
    head = b'{"object":"whatsapp_business_account","entry":'
    cases = [
        ("5,000 nested arrays", head + b"[" * 5000 + b"]" * 5000 + b"}"),
        ("5,000-digit integer", head + b'[],"n":' + b"9" * 5000 + b"}"),
        ("lone surrogate as object", b'{"object":"\\ud800","entry":[]}'),
    ]
    figures: list[str] = []
    ok = True
    for what, body in cases:
        status, reason, ms = await post_meta(session, gw, body)
        figures.append(f"{what} → {status} {reason!r} ({ms:.1f} ms)")
        ok = ok and status == 400 and bool(reason)
    async with session.get(f"{gw.url}/healthz") as health:
        figures.append(f"healthz {health.status}")
        ok = ok and health.status == 200
    c.record("4. signed hostile Meta bodies", "; ".join(figures), "400 with a reason each", ok)


# ------------------------------------------------------------------------- 5. headers


async def item_non_utf8_headers(c: Campaign, gw: Served, session: aiohttp.ClientSession) -> None:
    body = b"MessageSid=SM1&From=whatsapp%3A%2B5511999990000&To=whatsapp%3A%2B14155238886"
    length = str(len(body)).encode()
    requests = {
        "twilio webhook (X-Twilio-Signature)": b"POST /webhooks/twilio HTTP/1.1\r\n"
        b"Host: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"X-Twilio-Signature: \xff\xfe\r\nContent-Length: " + length + b"\r\n"
        b"Connection: close\r\n\r\n" + body,
        "meta webhook (X-Hub-Signature-256)": b"POST /webhooks/meta HTTP/1.1\r\n"
        b"Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"X-Hub-Signature-256: sha256=\xff\r\nContent-Length: 2\r\n"
        b"Connection: close\r\n\r\n{}",
        "support API (Authorization)": b"GET /support/handoffs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer \xff\r\nConnection: close\r\n\r\n",
    }
    figures: list[str] = []
    ok = True
    for what, request in requests.items():
        status, reason = raw_status(await raw_http(gw.port, request))
        figures.append(f"{what} → {status} {reason!r}")
        ok = ok and status in (400, 401, 403) and bool(reason)
    async with session.get(f"{gw.url}/support/handoffs", headers=auth()) as resp:
        figures.append(f"then support API with the token → {resp.status}")
        ok = ok and resp.status == 200
    c.record("5. a non-UTF-8 header byte", "; ".join(figures), "400/401/403 with reason", ok)


# ------------------------------------------------------------------------- 6-7. unsigned


async def item_unsigned_big_bodies(
    c: Campaign, gw: Served, redis: aioredis.Redis, session: aiohttp.ClientSession
) -> None:
    size = 3 * 1024 * 1024  # MEL_MAX_BODY_META: taken in whole, then refused unsigned
    body = b'{"object":"whatsapp_business_account","entry":[],"pad":"' + b"x" * size
    body = body[: size - 2] + b'"}'
    wrong = "sha256=" + "0" * 64
    raw_before = await redis.xlen("mel:raw")
    memory_before = (await redis.info("memory"))["used_memory"]
    raw_memory_before = await redis.memory_usage("mel:raw", samples=0) or 0
    statuses: list[int] = []
    queue = iter(range(20))

    async def lane() -> None:
        for _ in queue:
            status, _reason, _ms = await post_meta(session, gw, body, signature=wrong)
            statuses.append(status)

    await asyncio.gather(*(lane() for _ in range(4)))
    memory_after = (await redis.info("memory"))["used_memory"]
    raw_growth = (await redis.memory_usage("mel:raw", samples=0) or 0) - raw_memory_before
    added = await redis.xlen("mel:raw") - raw_before
    entries = entries_of(await redis.xrevrange("mel:raw", count=added)) if added > 0 else []
    kept = [len(f[b"body"]) for _id, f in entries]
    metas = [json.loads(f[b"meta"]) for _id, f in entries]
    record = max((len(f[b"body"]) + len(f[b"meta"]) for _id, f in entries), default=0)
    growth = memory_after - memory_before
    ok = statuses == [403] * 20 and len(entries) == 20 and max(kept, default=0) <= 1024
    ok = ok and max(growth, raw_growth) < 1024 * 1024
    ok = ok and all(m.get("body_truncated") for m in metas)
    c.record(
        "6. 20 unsigned 3 MiB Meta POSTs",
        f"{tally(statuses)}; Redis used_memory {growth / 1024:+.0f} KiB, the raw stream "
        f"{raw_growth / 1024:+.0f} KiB "
        f"(bodies sent {20 * len(body) / 2**20:.0f} MiB); {len(entries)} refused records, "
        f"body kept ≤ {max(kept, default=0)} B of {metas[0]['body_bytes'] if metas else 0}, "
        f"largest record {record} B",
        "403, growth < 1 MiB, ≤ 1 KiB of body kept each",
        ok,
    )


async def item_many_fields(c: Campaign, gw: Served) -> None:
    size = 1024 * 1024  # MEL_MAX_BODY_TWILIO: the size is fine, the field count is not
    fields = ["a=1"] * 150_000
    fields[-1] = "a=" + "1" * (size - len("&".join(fields)) + 1)
    body = "&".join(fields).encode()
    assert len(body) == size
    refusals: list[float] = []
    stalls: list[float] = []
    statuses: list[int] = []
    async with client() as posting, client() as checking:
        for _ in range(3):  # best of three: a busy machine must not decide
            done = asyncio.Event()

            async def post(done: asyncio.Event = done) -> None:
                start = time.perf_counter()
                try:
                    async with posting.post(
                        f"{gw.url}/webhooks/twilio",
                        data=body,
                        headers={
                            "Content-Type": "application/x-www-form-urlencoded",
                            "X-Twilio-Signature": plausible_twilio_signature(),
                        },
                    ) as resp:
                        await resp.read()
                        statuses.append(resp.status)
                finally:
                    refusals.append((time.perf_counter() - start) * 1000)
                    done.set()

            async def health(done: asyncio.Event = done) -> None:
                slowest = 0.0
                while not done.is_set():
                    start = time.perf_counter()
                    async with checking.get(f"{gw.url}/healthz") as resp:
                        await resp.read()
                    await asyncio.sleep(0.002)
                    slowest = max(slowest, time.perf_counter() - start)
                stalls.append(slowest * 1000)

            await asyncio.gather(post(), health())
    ok = all(s in (403, 413) for s in statuses) and min(refusals) < 50 and min(stalls) < 50
    c.record(
        "7. unsigned 1 MiB Twilio body, 150,000 fields",
        f"{tally(statuses)}; to the refusal {' / '.join(f'{x:.1f}' for x in refusals)} ms; "
        f"slowest /healthz meanwhile {' / '.join(f'{x:.1f}' for x in stalls)} ms",
        "403/413, refusal < 50 ms and /healthz < 50 ms (best of 3)",
        ok,
    )


# ------------------------------------------------------------------------- 8. parameters


async def item_bad_parameters(c: Campaign, gw: Served, session: aiohttp.ClientSession) -> None:
    params = {"hub.mode": "subscribe", "hub.verify_token": META_VERIFY_TOKEN, "hub.challenge": ""}
    async with session.get(f"{gw.url}/webhooks/meta", params=params) as resp:
        verify = resp.status, await error_of(resp)
    feed = await open_stream(session, gw.url, {"Last-Event-ID": "nonsense"})
    cursor = feed.status, await error_of(feed)
    feed.close()
    ok = verify[0] == 400 and "challenge" in verify[1]
    ok = ok and cursor[0] == 400 and "event id" in cursor[1]
    c.record(
        "8. empty hub.challenge; bad Last-Event-ID",
        f"verify (right token) → {verify[0]} {verify[1]!r}; feed → {cursor[0]} {cursor[1]!r}",
        "400 with reason each",
        ok,
    )


# ------------------------------------------------------------------------- 9. slowloris


async def slowloris(port: int) -> tuple[float, bytes, bool]:
    """Half a header, then silence: (seconds until closed, what came back, closed)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = b""
    closed = True
    try:
        writer.write(b"POST /webhooks/twilio HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Twilio-Sig")
        await writer.drain()
        start = time.perf_counter()
        try:
            async with asyncio.timeout(IDLE_TIMEOUT + 10):
                while chunk := await reader.read(65536):
                    answer += chunk
        except TimeoutError:
            closed = False
        except ConnectionResetError:
            pass
        return time.perf_counter() - start, answer, closed
    finally:
        writer.close()


def record_slowloris(c: Campaign, result: tuple[float, bytes, bool]) -> None:
    seconds, answer, closed = result
    first = answer.split(b"\r\n", 1)[0].decode("latin-1") or "nothing"
    c.record(
        "9. slowloris (half a header, then silent)",
        f"closed after {seconds:.2f} s (MEL_HTTP_IDLE_TIMEOUT_SECONDS={IDLE_TIMEOUT:g}); "
        f"answered {first!r}" + ("" if closed else "; NOT closed"),
        f"closed within {IDLE_TIMEOUT:g} s + 1.5 s",
        closed and seconds <= IDLE_TIMEOUT + 1.5,
    )


# ------------------------------------------------------------------------- the campaign


def logged(logs: Path) -> tuple[int, Counter[str], Counter[str]]:
    """Tracebacks, error-level and warning-level events in every gateway's log."""
    tracebacks = 0
    errors: Counter[str] = Counter()
    warnings: Counter[str] = Counter()
    for path in sorted(logs.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            tracebacks += "Traceback" in line
            with contextlib.suppress(ValueError, AttributeError):
                entry = json.loads(line)
                level = entry.get("level")
                if level in ("error", "critical"):
                    errors[str(entry.get("event"))[:60]] += 1
                elif level == "warning":
                    warnings[str(entry.get("event"))[:60]] += 1
    return tracebacks, errors, warnings


async def run(c: Campaign, tmp: Path) -> None:
    logs = tmp / "logs"
    logs.mkdir()
    server = EmbeddedRedis(tmp / "redis", appendonly=True)
    server.start()
    redis = aioredis.from_url(server.url)
    try:
        async with Fakes.running() as fakes:
            env = gateway_env(server.url, tmp / "data", fakes)
            main = Served("main", env, logs)
            async with main.running():
                loris = asyncio.create_task(slowloris(main.port))  # idles through 1-8
                await item_many_viewers(c, main, redis, fakes)
                capped_env = {**env, "MEL_FEED_MAX_STREAMS": str(STREAM_CAP)}
                capped = Served("capped", capped_env, logs, "--no-worker")
                async with capped.running():
                    await item_stream_cap(c, capped, fakes)
                async with client() as session:
                    await item_poisoned_batch(c, main, redis, session)
                    await item_hostile_meta(c, main, session)
                    await item_non_utf8_headers(c, main, session)
                    await item_unsigned_big_bodies(c, main, redis, session)
                    await item_many_fields(c, main)
                    await item_bad_parameters(c, main, session)
                loris_result = await loris
            # a short grace, and a restart that takes over what was left at once
            quick = {**env, "MEL_SHUTDOWN_GRACE_SECONDS": "1", "MEL_CLAIM_IDLE_SECONDS": "2"}
            await item_shutdown_mid_send(c, redis, fakes, quick, logs)
            record_slowloris(c, loris_result)
    finally:
        await redis.aclose()
        server.stop()
    tracebacks, errors, warnings = logged(logs)
    shown = ", ".join(f"{e} ×{n}" for e, n in errors.most_common(5)) or "none"
    warned = ", ".join(f"{e} ×{n}" for e, n in warnings.most_common(5)) or "none"
    c.record(
        "gateway logs (every process)",
        f"tracebacks {tracebacks}; error-level events: {shown} (warnings: {warned})",
        "no traceback, no error-level event",
        tracebacks == 0 and not errors,
    )


def main() -> None:
    if sys.argv[1:2] == ["viewers"]:
        asyncio.run(viewers(sys.argv[2], int(sys.argv[3])))
        return
    import logging

    from gateway.logs import configure_logging

    configure_logging("console", "warning")
    logging.getLogger("aiohttp").setLevel(logging.ERROR)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # item 1: ~2 sockets a viewer
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * STREAMS + 1024)), hard))
    campaign = Campaign()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(campaign, Path(tmp)))
    rows = sorted(campaign.rows, key=lambda r: r.item)
    width = max(len(r.item) for r in rows)
    print(f"\n== hardening campaign (issue 10), {time.perf_counter() - started:.0f} s ==")
    for r in rows:
        print(f"{r.item:<{width}}  {r.figures}  [goal: {r.goal}]  {'PASS' if r.ok else 'FAIL'}")
    failed = [r.item for r in rows if not r.ok]
    print(f"{len(rows) - len(failed)}/{len(rows)} PASS" + (f"; FAIL: {failed}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
