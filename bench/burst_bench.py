"""A burst of couples at real LLM latency, against the same process at zero latency, a
floor app and a bare aiohttp handler — all measured in the same run (ratios: this machine
is shared and noisy). Default settings throughout: the point is what a newcomer gets.

- **burst**: N distinct couples write at once (N simultaneous signed deliveries); turns/s
  from the first delivery to the N-th reply, and the webhook acknowledgement latencies.
  At 0 s and 0.7 s per LLM call; one process (``serve``) and web + 2 workers.
- **ack**: the same 3,000 simultaneous deliveries to a bare aiohttp handler (own process).
- **cpu floor**: a minimal aiohttp app that verifies the Twilio signature, writes once to
  Redis, posts the gateway's own LLM request bodies (classifier, router, agent: what a first
  turn calls with the default settings) with plain aiohttp and one Twilio message — the
  least any gateway must do; CPU-seconds per 1,000 turns, gateway vs floor.
- **history**: one couple's 1st…200th turn (history and state must not make turns dearer).
- **idle threads**: turn latency before and after 50,000 idle threads are in Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from bench.gateway_bench import (
    ACCOUNT_SID,
    BARE_SERVER,
    TOKEN,
    _flush,
    _free_port,
    _gateway_argv,
    _gateway_env,
    _params,
    answer_like_models,
    cpu_seconds,
    pct,
    print_table,
    server_process,
)
from channels import compute_twilio_signature
from gateway.store.embedded import EmbeddedRedis
from tests.fakes.llm import FakeLLM
from tests.fakes.twilio_api import FakeTwilioAPI

LATENCY = 0.7
"""Seconds per LLM call: a real model's typical answer time."""

FLOOR_SERVER = """
import asyncio, base64, hashlib, hmac, json, sys
import aiohttp, redis.asyncio as aioredis
from aiohttp import web
try:
    import uvloop
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
except ImportError:
    pass

port, token, redis_url, llm_url, twilio_url, sid, bodies = sys.argv[1:8]
calls = json.loads(open(bodies).read())
tasks = set()

def signature(url, params):
    data = url + "".join(k + params[k] for k in sorted(params))
    return base64.b64encode(hmac.new(token.encode(), data.encode(), hashlib.sha1).digest()).decode()

async def start(app):
    pool = aioredis.BlockingConnectionPool.from_url(redis_url, max_connections=64)
    app["redis"] = aioredis.Redis(connection_pool=pool)
    app["http"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

async def turn(app, params):
    http = app["http"]
    headers = {"Authorization": "Bearer sk-bench"}
    for body in calls:
        body = {**body, "messages": [*body["messages"][:-1],
                                     {"role": "user", "content": params["Body"]}]}
        async with http.post(f"{llm_url}/chat/completions", json=body, headers=headers) as r:
            answer = await r.json()
    text = answer["choices"][0]["message"]["content"]
    form = {"To": params["From"], "From": params["To"], "Body": text}
    auth = {"Authorization": "Basic " + base64.b64encode(f"{sid}:{token}".encode()).decode()}
    async with http.post(f"{twilio_url}/2010-04-01/Accounts/{sid}/Messages.json",
                         data=form, headers=auth) as r:
        await r.read()

async def hook(request):
    params = dict(await request.post())
    if not hmac.compare_digest(signature(str(request.url), params),
                               request.headers.get("X-Twilio-Signature", "")):
        return web.Response(status=403)
    await request.app["redis"].xadd("floor:inbox", params, maxlen=100000, approximate=True)
    task = asyncio.create_task(turn(request.app, params))
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return web.Response(text="<Response/>", content_type="text/xml")

async def healthz(request):
    return web.Response(text="ok")

app = web.Application()
app.on_startup.append(start)
app.router.add_post("/webhooks/twilio", hook)
app.router.add_get("/healthz", healthz)
web.run_app(app, host="127.0.0.1", port=int(port), access_log=None, print=None)
"""


class Fakes:
    """The fake LLM (router JSON, agent echo) and Twilio, in this process."""

    def __init__(self, llm: FakeLLM, twilio: FakeTwilioAPI) -> None:
        self.llm = llm
        self.twilio = twilio

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls) -> AsyncIterator[Fakes]:
        async with FakeLLM() as llm, FakeTwilioAPI(ACCOUNT_SID, TOKEN) as twilio:
            answer_like_models(llm)
            yield cls(llm, twilio)

    def reset(self, latency: float) -> None:
        self.llm.delay = latency
        self.llm.requests.clear()
        self.twilio.messages.clear()
        self.twilio.arrivals.clear()


async def burst(url: str, fakes: Fakes, n: int, tag: str) -> dict[str, float]:
    """``n`` couples write at once: turns/s to the last reply, ack latencies (ms)."""
    hook = f"{url}/webhooks/twilio"
    bodies = [_params(i, f"+5521{tag}{i:07d}", f"{tag} quanto gastei {i}?") for i in range(n)]
    signatures = [compute_twilio_signature(TOKEN, hook, p) for p in bodies]
    acks: list[float] = []
    statuses: list[int] = []
    base = len(fakes.twilio.messages)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def send(i: int) -> None:
            t0 = time.perf_counter()
            headers = {"X-Twilio-Signature": signatures[i]}
            try:
                async with session.post(hook, data=bodies[i], headers=headers) as resp:
                    await resp.read()
                    statuses.append(resp.status)
            except aiohttp.ClientError:
                statuses.append(0)
            acks.append((time.perf_counter() - t0) * 1000)

        started = time.perf_counter()
        await asyncio.gather(*(send(i) for i in range(n)))
        await fakes.twilio.wait_for_messages(base + n, timeout=600)
        elapsed = fakes.twilio.arrivals[base + n - 1] - started
    return {
        "turns_per_s": n / elapsed,
        "seconds": elapsed,
        "ack_p50_ms": pct(acks, 50),
        "ack_p99_ms": pct(acks, 99),
        "ack_errors": sum(1 for s in statuses if s != 200),
    }


async def acks_only(url: str, n: int) -> dict[str, float]:
    """``n`` simultaneous deliveries to a server that only acknowledges them."""
    hook = f"{url}/webhooks/twilio"
    bodies = [_params(i, f"+5521900{i:07d}", f"quanto gastei {i}?") for i in range(n)]
    acks: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def send(i: int) -> None:
            t0 = time.perf_counter()
            async with session.post(hook, data=bodies[i]) as resp:
                await resp.read()
            acks.append((time.perf_counter() - t0) * 1000)

        await asyncio.gather(*(send(i) for i in range(n)))
    return {"ack_p50_ms": pct(acks, 50), "ack_p99_ms": pct(acks, 99)}


@contextlib.asynccontextmanager
async def gateway(
    redis_url: str, data: Path, fakes: Fakes, workers: int = 0
) -> AsyncIterator[tuple[str, list[int]]]:
    """A fresh gateway (its URL, the pids that run turns): ``serve``, or web + workers."""
    await _flush(redis_url)
    env = _gateway_env(redis_url, data, fakes.llm, fakes.twilio)
    port = _free_port()
    argv = _gateway_argv(port, "--no-worker") if workers else _gateway_argv(port)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "gateway", "worker"],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    try:
        async with server_process(argv, env, port) as (url, pid):
            fakes.reset(0.0)
            await burst(url, fakes, 50, "9")  # warm-up: connections, code paths
            yield url, [p.pid for p in procs] or [pid]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)


async def measured_burst(
    redis_url: str, data: Path, fakes: Fakes, n: int, latency: float, workers: int = 0
) -> dict[str, float]:
    async with gateway(redis_url, data, fakes, workers) as (url, pids):
        fakes.reset(latency)
        cpu = sum(cpu_seconds(p) for p in pids)
        result = await burst(url, fakes, n, "1")
        result["cpu_per_1000"] = (sum(cpu_seconds(p) for p in pids) - cpu) / n * 1000
        return result


async def floor_burst(redis_url: str, fakes: Fakes, n: int, tmp: Path) -> dict[str, float]:
    """The floor app under the same burst, posting the gateway's own LLM request bodies:
    one of each model a turn called (classifier, router, agent), in that order."""
    calls: dict[str, Any] = {}
    for call in fakes.llm.requests:
        calls.setdefault(str(call.model), call.body)
    bodies = tmp / "floor_bodies.json"
    bodies.write_text(json.dumps(list(calls.values())))
    await _flush(redis_url)
    port = _free_port()
    argv = [sys.executable, "-c", FLOOR_SERVER, str(port), TOKEN, redis_url,
            fakes.llm.base_url, fakes.twilio.base_url, ACCOUNT_SID, str(bodies)]  # fmt: skip
    async with server_process(argv, {}, port) as (url, pid):
        fakes.reset(0.0)
        await burst(url, fakes, 50, "9")
        fakes.reset(LATENCY)
        cpu = cpu_seconds(pid)
        result = await burst(url, fakes, n, "1")
        result["cpu_per_1000"] = (cpu_seconds(pid) - cpu) / n * 1000
        return result


async def bare_acks(n: int) -> dict[str, float]:
    port = _free_port()
    async with server_process([sys.executable, "-c", BARE_SERVER, str(port)], {}, port) as (
        url,
        _pid,
    ):
        await acks_only(url, 50)
        return await acks_only(url, n)


async def one_turn(url: str, fakes: Fakes, user: str, text: str) -> float:
    """Webhook → reply of one turn, in ms."""
    hook = f"{url}/webhooks/twilio"
    p = _params(0, user, text)
    headers = {"X-Twilio-Signature": compute_twilio_signature(TOKEN, hook, p)}
    base = len(fakes.twilio.messages)
    async with aiohttp.ClientSession() as session:
        t0 = time.perf_counter()
        async with session.post(hook, data=p, headers=headers) as resp:
            await resp.read()
        await fakes.twilio.wait_for_messages(base + 1, timeout=60)
        return (fakes.twilio.arrivals[base] - t0) * 1000


async def history_and_idle(redis_url: str, data: Path, fakes: Fakes) -> dict[str, float]:
    """One couple's 1st…200th turn; then turns of new couples before and after 50,000
    idle threads (copies of a real thread's keys) are in Redis."""
    out: dict[str, float] = {}
    async with gateway(redis_url, data, fakes) as (url, _pids):
        fakes.reset(0.0)
        user = "+5531900000001"
        times = [await one_turn(url, fakes, user, f"gastei {n} no mercado") for n in range(200)]
        out["turn_1_10_ms"] = statistics.median(times[:10])
        out["turn_191_200_ms"] = statistics.median(times[190:])
        out["history_ratio"] = out["turn_191_200_ms"] / out["turn_1_10_ms"]

        async def fresh_turns(tag: str) -> float:
            return statistics.median(
                [await one_turn(url, fakes, f"+55419{tag}{n:05d}", "oi, quanto gastei?")
                 for n in range(60)]
            )  # fmt: skip

        out["fresh_turn_ms"] = await fresh_turns("1")
        client = aioredis.from_url(redis_url)
        try:
            before = (await client.info("memory"))["used_memory"]
            # an idle thread: one that had a short conversation (state, history, the
            # bookkeeping of its messages), copied from one of the fresh couples above
            out["idle_threads"] = await _clone_threads(client, "+55419100000", 50_000)
            out["idle_memory_mb"] = ((await client.info("memory"))["used_memory"] - before) / 2**20
        finally:
            await client.aclose()
        out["fresh_turn_idle_ms"] = await fresh_turns("2")
        out["idle_ratio"] = out["fresh_turn_idle_ms"] / out["fresh_turn_ms"]
    return out


async def _clone_threads(client: aioredis.Redis, user: str, count: int) -> int:
    """``count`` copies of ``user``'s thread keys (state, history, …) under new numbers."""
    keys = [k.decode() async for k in client.scan_iter(f"*:{user}}}*")]
    dumps = {k: await client.dump(k) for k in keys}
    for start in range(0, count, 1000):
        pipe = client.pipeline(transaction=False)
        for n in range(start, min(count, start + 1000)):
            other = f"+5551{n:09d}"
            for key, value in dumps.items():
                if value is not None:
                    pipe.restore(key.replace(user, other), 0, value, replace=True)
        await pipe.execute()
    return count


async def run_all() -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        server = EmbeddedRedis(tmp / "redis", appendonly=True)
        server.start()
        out: dict[str, dict[str, float]] = {}
        try:
            async with Fakes.running() as fakes:
                url = server.url
                for n in (1000, 3000):
                    out[f"zero_{n}"] = await measured_burst(url, tmp / "z", fakes, n, 0.0)
                    _progress(out, f"zero_{n}")
                    out[f"latency_{n}"] = await measured_burst(url, tmp / "l", fakes, n, LATENCY)
                    _progress(out, f"latency_{n}")
                out["scale_out_3000"] = await measured_burst(
                    url, tmp / "s", fakes, 3000, LATENCY, workers=2
                )
                _progress(out, "scale_out_3000")
                out["floor_3000"] = await floor_burst(url, fakes, 3000, tmp)
                _progress(out, "floor_3000")
                out["bare_3000"] = await bare_acks(3000)
                _progress(out, "bare_3000")
                out["history"] = await history_and_idle(url, tmp / "h", fakes)
        finally:
            server.stop()
        return out


def _progress(out: dict[str, dict[str, float]], name: str) -> None:
    figures = ", ".join(f"{k} {v:.2f}" for k, v in out[name].items())
    print(f"  {name}: {figures}", file=sys.stderr, flush=True)


def main() -> None:
    import logging

    from gateway.logs import configure_logging

    configure_logging("console", "warning")
    logging.getLogger("aiohttp").setLevel(logging.ERROR)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 20_000)), hard))
    r = asyncio.run(run_all())
    rows: list[tuple[str, str, str]] = []
    for n in (1000, 3000):
        z, lt = r[f"zero_{n}"], r[f"latency_{n}"]
        rows += [
            (f"burst {n}, zero latency", f"{z['turns_per_s']:.0f} turns/s",
             f"ack p99 {z['ack_p99_ms']:.0f} ms"),
            (f"burst {n}, {LATENCY:g} s per LLM call", f"{lt['turns_per_s']:.0f} turns/s",
             f"ack p99 {lt['ack_p99_ms']:.0f} ms, errors {lt['ack_errors']:.0f}"),
            ("  ratio latency/zero (goal ≥ 0.8)", f"{lt['turns_per_s'] / z['turns_per_s']:.2f}",
             ""),
        ]  # fmt: skip
    s, f, b, lt = r["scale_out_3000"], r["floor_3000"], r["bare_3000"], r["latency_3000"]
    h = r["history"]
    rows += [
        ("burst 3000 at latency, web + 2 workers", f"{s['turns_per_s']:.0f} turns/s",
         f"ack p99 {s['ack_p99_ms']:.0f} ms"),
        ("ack p99, 3000 at once: bare aiohttp", f"{b['ack_p99_ms']:.0f} ms",
         f"p50 {b['ack_p50_ms']:.0f} ms"),
        ("  gateway (serve, turns running) / bare (goal ≤ 1.3)",
         f"{lt['ack_p99_ms'] / b['ack_p99_ms']:.2f}", f"{lt['ack_p99_ms']:.0f} ms"),
        ("  web + 2 workers / bare", f"{s['ack_p99_ms'] / b['ack_p99_ms']:.2f}", ""),
        ("CPU s per 1000 turns: floor app", f"{f['cpu_per_1000']:.2f}",
         f"{f['turns_per_s']:.0f} turns/s"),
        ("CPU s per 1000 turns: gateway (serve)", f"{lt['cpu_per_1000']:.2f}", ""),
        ("  ratio gateway/floor (goal ≤ 2)", f"{lt['cpu_per_1000'] / f['cpu_per_1000']:.2f}", ""),
        ("turn 1–10 vs 191–200, one couple", f"{h['history_ratio']:.2f}",
         f"{h['turn_1_10_ms']:.1f} ms → {h['turn_191_200_ms']:.1f} ms"),
        (f"turn with {h['idle_threads']:.0f} idle threads / without", f"{h['idle_ratio']:.2f}",
         f"{h['fresh_turn_ms']:.1f} ms → {h['fresh_turn_idle_ms']:.1f} ms, "
         f"+{h['idle_memory_mb']:.0f} MB"),
    ]  # fmt: skip
    print_table("burst at real LLM latency", rows)


if __name__ == "__main__":
    main()
