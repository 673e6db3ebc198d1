"""Sending: per-thread order under concurrency, rate, pacing, errors, the summary."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from urllib.parse import urlencode

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.replay import Outcome, RawDelivery, Secrets, SendOptions, SendReport, prepare, send_all
from tests.fakes.payloads import twilio_inbound_params


class Target:
    """A loopback server recording what arrives; optional per-request delay and status."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[str, str, float]] = []  # (user, body, time)
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay: dict[str, float] = {}
        self.status = 200

    async def handle(self, request: web.Request) -> web.Response:
        form = await request.post()
        user, body = str(form["From"]), str(form["Body"])
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.arrivals.append((user, body, time.monotonic()))
        try:
            await asyncio.sleep(self.delay.get(body, 0.0))
        finally:
            self.in_flight -= 1
        return web.Response(status=self.status, text="<Response/>")


@pytest.fixture
async def target() -> AsyncIterator[tuple[Target, str]]:
    t = Target()
    app = web.Application()
    app.router.add_post("/webhooks/twilio", t.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield t, str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


def delivery(n: int, user: str, body: str, *, at_ms: int = 0) -> RawDelivery:
    params = twilio_inbound_params(from_=user, body=body)
    ms = 1_780_000_000_000 + at_ms
    return RawDelivery(
        id=f"{ms}-{n}",
        received_at=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000))
        + f".{ms % 1000:03d}Z",
        provider="twilio", method="POST", path="/webhooks/twilio", query="",
        headers={}, body=urlencode(params).encode(), status=200,
        thread_ids=(f"twilio:+14155238886:{user}",), message_ids=(params["MessageSid"],),
    )  # fmt: skip


async def test_per_thread_order_holds_under_concurrency(target: tuple[Target, str]) -> None:
    t, url = target
    users = [f"+55119000000{i:02d}" for i in range(4)]
    items = [delivery(n, users[n % 4], f"{users[n % 4]} #{n // 4}") for n in range(20)]
    # the first message of each thread is the slowest: a naive sender would overtake it
    t.delay = {f"{u} #0": 0.3 for u in users}
    prepared = [prepare(d, url, Secrets(twilio_auth_token="t")) for d in items]
    outcomes = await send_all(prepared, SendOptions(concurrency=8))
    assert all(o.ok for o in outcomes)
    for user in users:
        bodies = [b for u, b, _ in t.arrivals if u == f"whatsapp:{user}"]
        assert bodies == [f"{user} #{i}" for i in range(5)]
    assert t.max_in_flight >= 4  # threads did run side by side


async def test_rate_limits_the_pace(target: tuple[Target, str]) -> None:
    t, url = target
    items = [delivery(n, f"+551190000{n:04d}", f"m{n}") for n in range(6)]
    prepared = [prepare(d, url, Secrets(twilio_auth_token="t")) for d in items]
    started = time.monotonic()
    await send_all(prepared, SendOptions(concurrency=6, rate=20))
    assert time.monotonic() - started >= 0.25  # 6 starts at 20/s: 5 gaps of 50 ms
    assert len(t.arrivals) == 6


async def test_speed_keeps_the_original_gaps_divided(target: tuple[Target, str]) -> None:
    t, url = target
    items = [delivery(0, "+5511900000001", "a"), delivery(1, "+5511900000002", "b", at_ms=2000)]
    prepared = [prepare(d, url, Secrets(twilio_auth_token="t")) for d in items]
    await send_all(prepared, SendOptions(speed=10))
    gap = t.arrivals[1][2] - t.arrivals[0][2]
    assert 0.18 <= gap < 1.0  # 2 s of original gap at 10x


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_refused_connection_and_timeouts_are_counted_and_the_run_goes_on(
    target: tuple[Target, str],
) -> None:
    t, url = target
    t.delay = {"slow": 2.0}
    refused = prepare(
        delivery(0, "+5511900000001", "x"), f"http://127.0.0.1:{closed_port()}", Secrets()
    )
    slow = prepare(delivery(1, "+5511900000002", "slow"), url, Secrets(twilio_auth_token="t"))
    fine = prepare(delivery(2, "+5511900000003", "ok"), url, Secrets(twilio_auth_token="t"))
    skipped = replace(
        prepare(delivery(3, "+5511900000004", "skip"), url, Secrets()), problem="no secret"
    )
    outcomes = await send_all([refused, slow, fine, skipped], SendOptions(timeout=0.3))
    by_body = {o.prepared.original.texts[0]: o for o in outcomes}
    assert "cannot connect to http://127.0.0.1:" in (by_body["x"].error or "")
    assert by_body["slow"].error == f"no answer from {url} within 0.3s"
    assert by_body["ok"].ok
    assert by_body["skip"].skipped
    assert sorted(b for _u, b, _t in t.arrivals) == ["ok", "slow"]  # the skipped one never left
    report = SendReport(planned=5, outcomes=outcomes, problems=["line 3: not valid JSON"])
    assert (report.sent, report.errors, report.skipped, report.failed) == (1, 2, 2, 4)
    assert report.by_status == {"2xx": 1}
    summary = report.as_json()
    assert summary["failed"] == 4
    assert any("cannot connect" in p for p in summary["problems"])


def test_latency_percentiles() -> None:
    p = prepare(delivery(0, "+5511900000001", "x"), "http://127.0.0.1:1", Secrets())
    outcomes = [Outcome(p, status=200, latency_ms=float(ms)) for ms in range(1, 101)]
    outcomes.append(Outcome(p, status=503, latency_ms=1000.0))
    report = SendReport(planned=101, outcomes=outcomes)
    assert report.latency(50) == 51.0
    assert report.latency(99) == 100.0
    assert report.by_status == {"2xx": 100, "5xx": 1}
    assert report.failed == 1
    assert SendReport().latency(50) is None
