"""Gateway benchmarks: webhook ingest vs a bare aiohttp handler, end-to-end turns, and
Redis round trips per turn. Everything on loopback, with a real (embedded) Redis and
zero-latency fake LLM / Twilio servers. Figures are ratios against a baseline measured
in the same run, because this machine is shared and noisy."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from redis.asyncio.connection import AbstractConnection

from channels import compute_twilio_signature
from gateway.http.app import create_app
from gateway.settings import Settings
from gateway.store.embedded import EmbeddedRedis
from tests.fakes.llm import FakeLLM
from tests.fakes.twilio_api import FakeTwilioAPI

PROFILES = Path(__file__).parent.parent / "tests" / "data" / "e2e_llm_profiles.yaml"
ROUTER_ANSWER = '{"route": "budget_agent", "intent": "budget_overview", "confidence": 0.95}'
CONTINUITY_ANSWER = '{"decision": "ROUTE", "confidence": 0.9}'


def answer_like_models(llm: FakeLLM) -> None:
    """The router and the continuity classifier answer their JSON; the agent echoes."""
    llm.responder = lambda req: "ok " + str(req["messages"][-1]["content"])[:60]
    llm.by_model["router-model"] = lambda req: ROUTER_ANSWER
    llm.by_model["route-continuity-model"] = lambda req: CONTINUITY_ANSWER


ACCOUNT_SID = "AC" + "2" * 32
TOKEN = "bench-token"
BUSINESS = "+14155238886"


class RoundTrips:
    """Counts client→Redis round trips (one per command or pipeline sent)."""

    def __init__(self) -> None:
        self.count = 0
        self._orig = AbstractConnection.send_packed_command

    def __enter__(self) -> RoundTrips:
        counter = self
        orig = self._orig

        async def counting(conn: Any, command: Any, check_health: bool = True) -> None:
            counter.count += 1
            await orig(conn, command, check_health)

        AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        AbstractConnection.send_packed_command = self._orig  # type: ignore[method-assign]


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    """An app served in this process."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}"


async def _load(
    send: Callable[[int], Awaitable[int]], total: int, concurrency: int
) -> tuple[float, list[float], int]:
    """Run ``total`` sends with ``concurrency`` in flight: (per second, latencies ms, errors)."""
    latencies: list[float] = []
    errors = 0
    counter = iter(range(total))

    async def lane() -> None:
        nonlocal errors
        for i in counter:
            t0 = time.perf_counter()
            status = await send(i)
            latencies.append((time.perf_counter() - t0) * 1000)
            if status != 200:
                errors += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return total / (time.perf_counter() - t0), latencies, errors


def _settings(redis_url: str, data: Path, llm: FakeLLM, twilio: FakeTwilioAPI) -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        redis_url=redis_url,
        mel_data_dir=data,
        twilio_account_sid=ACCOUNT_SID,
        twilio_auth_token=TOKEN,
        twilio_whatsapp_from=f"whatsapp:{BUSINESS}",
        twilio_api_base_url=twilio.base_url,
        llm_base_url=llm.base_url,
        llm_api_key="sk-bench",
        llm_profiles_path=PROFILES,
        mel_log_level="warning",
    )


def _params(i: int, user: str, text: str) -> dict[str, str]:
    return {
        "MessageSid": "SM" + uuid.uuid4().hex,
        "AccountSid": ACCOUNT_SID,
        "From": f"whatsapp:{user}",
        "To": f"whatsapp:{BUSINESS}",
        "Body": text,
        "NumMedia": "0",
        "ProfileName": "Ana",
    }


BARE_SERVER = """
import asyncio
import sys
from aiohttp import web
try:
    import uvloop  # the same event loop the gateway runs on
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
except ImportError:
    pass

async def bare(request):
    await request.read()
    return web.Response(text="<Response/>", content_type="text/xml")

async def healthz(request):
    return web.Response(text="ok")

app = web.Application()
app.router.add_post("/webhooks/twilio", bare)
app.router.add_get("/healthz", healthz)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def _process(argv: list[str], env: dict[str, str], port: int) -> AsyncIterator[str]:
    """A server in its own process (its own core), until the block ends."""
    async with server_process(argv, env, port) as (url, _pid):
        yield url


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def server_process(
    argv: list[str], env: dict[str, str], port: int
) -> AsyncIterator[tuple[str, int]]:
    """A server in its own process, once it answers ``/healthz``: (its URL, its pid)."""
    proc = subprocess.Popen(argv, env={**os.environ, **env}, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(300):
                try:
                    async with session.get(f"{url}/healthz") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError(f"{argv} did not start")
        yield url, proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def _gateway_env(redis_url: str, data: Path, llm: FakeLLM, twilio: FakeTwilioAPI) -> dict[str, str]:
    return {
        "REDIS_URL": redis_url,
        "MEL_DATA_DIR": str(data),
        "TWILIO_ACCOUNT_SID": ACCOUNT_SID,
        "TWILIO_AUTH_TOKEN": TOKEN,
        "TWILIO_WHATSAPP_FROM": f"whatsapp:{BUSINESS}",
        "TWILIO_API_BASE_URL": twilio.base_url,
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "sk-bench",
        "LLM_PROFILES_PATH": str(PROFILES),
        "MEL_LOG_LEVEL": "warning",
        "MEL_LOG_FORMAT": "json",
    }


def _gateway_argv(port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gateway", "serve", "--port", str(port), *extra]


async def bench_ingest(
    redis_url: str, data: Path, rounds: int = 7, per_round: int = 600
) -> dict[str, float]:
    """Signed Twilio deliveries through the full ingest path (no worker) vs a bare handler,
    each server in its own process, the same client load against both, interleaved in
    rounds so that noise on this shared machine hits both alike; the median round wins."""
    async with FakeLLM() as llm, FakeTwilioAPI(ACCOUNT_SID, TOKEN) as twilio:
        env = _gateway_env(redis_url, data, llm, twilio)
        bare_port, gw_port = _free_port(), _free_port()
        async with (
            _process([sys.executable, "-c", BARE_SERVER, str(bare_port)], env, bare_port) as bare,
            _process(_gateway_argv(gw_port, "--no-worker"), env, gw_port) as gateway,
            aiohttp.ClientSession() as session,
        ):

            async def measure(url: str, n: int) -> tuple[float, list[float], int]:
                hook = f"{url}/webhooks/twilio"
                bodies = [_params(i, f"+55119{i % 500:08d}", f"gastei {i} no mercado")
                          for i in range(n)]  # fmt: skip
                sigs = [compute_twilio_signature(TOKEN, hook, p) for p in bodies]

                async def send(i: int) -> int:
                    headers = {"X-Twilio-Signature": sigs[i]}
                    async with session.post(hook, data=bodies[i], headers=headers) as r:
                        await r.read()
                        return r.status

                return await _load(send, n, 16)

            await measure(bare, 200)  # warm-up
            await measure(gateway, 200)
            runs: dict[str, list[tuple[float, list[float], int]]] = {"bare": [], "gateway": []}
            for _ in range(rounds):
                runs["bare"].append(await measure(bare, per_round))
                runs["gateway"].append(await measure(gateway, per_round))
    ratios = [g[0] / b[0] for b, g in zip(runs["bare"], runs["gateway"], strict=True)]
    bare_lat = [x for r in runs["bare"] for x in r[1]]
    lat = [x for r in runs["gateway"] for x in r[1]]
    return {
        "bare_per_s": statistics.median(r[0] for r in runs["bare"]),
        "bare_p50_ms": pct(bare_lat, 50),
        "bare_p99_ms": pct(bare_lat, 99),
        "gateway_per_s": statistics.median(r[0] for r in runs["gateway"]),
        "gateway_p50_ms": pct(lat, 50),
        "gateway_p99_ms": pct(lat, 99),
        "ratio": statistics.median(ratios),
        "errors": sum(r[2] for r in runs["gateway"]),
    }


async def bench_end_to_end(
    redis_url: str,
    data: Path,
    total: int = 1500,
    paced_rate: float = 100.0,
    paced: int = 500,
    workers: int = 0,
) -> dict[str, float]:
    """The gateway (web + worker) in its own process — or, with ``workers``, web alone plus
    that many ``mel-gateway worker`` processes (the scale-out shape); fakes and load here.
    Throughput as fast as it goes, then webhook→reply latency at a steady 100 turns/s."""
    async with FakeLLM() as llm, FakeTwilioAPI(ACCOUNT_SID, TOKEN) as twilio:
        answer_like_models(llm)
        port = _free_port()
        env = _gateway_env(redis_url, data, llm, twilio)
        sent_at: dict[str, float] = {}
        web_argv = _gateway_argv(port, "--no-worker") if workers else _gateway_argv(port)
        worker_procs = [
            subprocess.Popen(
                [sys.executable, "-m", "gateway", "worker"],
                env={**os.environ, **env},
                stdout=subprocess.DEVNULL,
            )
            for _ in range(workers)
        ]
        async with (
            _process(web_argv, env, port) as url,
            aiohttp.ClientSession() as session,
        ):
            hook = f"{url}/webhooks/twilio"

            async def send(i: int, tag: str) -> int:
                text = f"{tag} {i}"
                p = _params(i, f"+55118{i % 200:08d}", text)
                headers = {"X-Twilio-Signature": compute_twilio_signature(TOKEN, hook, p)}
                sent_at["ok " + text] = time.perf_counter()
                async with session.post(hook, data=p, headers=headers) as r:
                    await r.read()
                    return r.status

            async def drained(expected: int) -> float:
                await twilio.wait_for_messages(expected, timeout=120)
                return twilio.arrivals[expected - 1]

            await _load(lambda i: send(i, "warm"), 100, 16)
            await drained(100)
            t0 = time.perf_counter()
            base = len(twilio.messages)
            await _load(lambda i: send(i, "thr"), total, 32)
            turns_per_s = total / (await drained(base + total) - t0)

            base = len(twilio.messages)
            start = time.perf_counter()
            tasks = []
            for i in range(paced):
                delay = start + i / paced_rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(send(i, "lat")))
            await asyncio.gather(*tasks)
            await drained(base + paced)
            lat = [
                (at - sent_at[m["Body"]]) * 1000
                for m, at in zip(twilio.messages, twilio.arrivals, strict=True)
                if m["Body"].startswith("ok lat")
            ]
    for proc in worker_procs:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    return {
        "turns_per_s": turns_per_s,
        "paced_rate": paced_rate,
        "paced_p50_ms": pct(lat, 50),
        "paced_p99_ms": pct(lat, 99),
    }


async def bench_round_trips(redis_url: str, data: Path, turns: int = 200) -> dict[str, float]:
    """Round trips of the worker per turn, with ingest counted apart."""
    async with FakeLLM() as llm, FakeTwilioAPI(ACCOUNT_SID, TOKEN) as twilio:
        answer_like_models(llm)
        app = create_app(_settings(redis_url, data, llm, twilio), run_worker=False)
        runner, url = await _serve(app)
        hook = f"{url}/webhooks/twilio"
        async with aiohttp.ClientSession() as session:
            with RoundTrips() as ingest:
                for i in range(turns):
                    p = _params(i, f"+55117{i:08d}", "qual o total do mês?")
                    headers = {"X-Twilio-Signature": compute_twilio_signature(TOKEN, hook, p)}
                    async with session.post(hook, data=p, headers=headers) as r:
                        await r.read()
        await runner.cleanup()
        from gateway.bootstrap import bootstrap

        settings = _settings(redis_url, data, llm, twilio).model_copy(
            update={"mel_worker_concurrency": 1}
        )
        async with bootstrap(settings, "worker") as c:
            worker = c.worker
            assert worker is not None
            with RoundTrips() as work:
                task = asyncio.create_task(worker.run())
                while len(twilio.messages) < turns:
                    await asyncio.sleep(0.01)
                await worker.drain(1)
                await task
    return {
        "ingest_per_delivery": ingest.count / turns,
        "worker_per_turn": work.count / turns,
    }


async def run_all() -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp) / "redis", appendonly=True)
        server.start()
        try:
            out = {}
            for name, fn in (
                ("ingest", bench_ingest),
                ("end_to_end", bench_end_to_end),
                ("scale_out", _scale_out),
                ("round_trips", bench_round_trips),
            ):
                await _flush(server.url)
                out[name] = await fn(server.url, Path(tmp) / name)  # type: ignore[operator]
            return out
        finally:
            server.stop()


async def _scale_out(redis_url: str, data: Path) -> dict[str, float]:
    return await bench_end_to_end(redis_url, data, workers=2)


async def _flush(url: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(url)
    await client.flushall()
    await client.aclose()


def main() -> None:
    import logging

    from gateway.logs import configure_logging

    configure_logging("console", "warning")
    logging.getLogger("aiohttp").setLevel(logging.ERROR)
    res = asyncio.run(run_all())
    i, e, r, x = res["ingest"], res["end_to_end"], res["round_trips"], res["scale_out"]
    rows = [
        ("ingest: bare aiohttp handler", f"{i['bare_per_s']:.0f}/s",
         f"p50 {i['bare_p50_ms']:.2f} ms  p99 {i['bare_p99_ms']:.2f} ms"),
        ("ingest: signed Twilio → stored", f"{i['gateway_per_s']:.0f}/s",
         f"p50 {i['gateway_p50_ms']:.2f} ms  p99 {i['gateway_p99_ms']:.2f} ms"),
        ("ingest ratio gateway/bare (goal ≥ 0.5)", f"{i['ratio']:.2f}",
         f"errors {i['errors']:.0f}"),
        ("end to end, zero-latency LLM (goal ≥ 500)", f"{e['turns_per_s']:.0f} turns/s", ""),
        (f"webhook→reply at {e['paced_rate']:.0f} turns/s (goal p99 ≤ 50 ms)",
         f"p99 {e['paced_p99_ms']:.1f} ms", f"p50 {e['paced_p50_ms']:.1f} ms"),
        ("scale-out: web + 2 worker processes", f"{x['turns_per_s']:.0f} turns/s",
         f"p99 {x['paced_p99_ms']:.1f} ms at {x['paced_rate']:.0f}/s"),
        ("Redis round trips: ingest per delivery", f"{r['ingest_per_delivery']:.2f}", ""),
        ("Redis round trips: worker per turn (goal ≤ 6)", f"{r['worker_per_turn']:.2f}", ""),
    ]  # fmt: skip
    print_table("gateway", rows)


def print_table(title: str, rows: list[tuple[str, str, str]]) -> None:
    """A benchmark's table: label, figure (right-aligned), note."""
    width = max(len(a) for a, _, _ in rows)
    print(f"\n== {title} ==")
    for a, b, c in rows:
        print(f"{a:<{width}}  {b:>14}  {c}")


if __name__ == "__main__":
    main()
