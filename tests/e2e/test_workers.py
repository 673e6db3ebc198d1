"""Separate worker processes on one Redis: kill -9 mid-turn, several workers, order."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.e2e.conftest import ACCOUNT_SID, AUTH_TOKEN, BUSINESS, PROFILES, Gateway, agent_calls
from tests.fakes.llm import FakeLLM
from tests.fakes.twilio_api import FakeTwilioAPI

pytestmark = pytest.mark.slow


@pytest.fixture
async def spawn_worker(
    redis_url: str, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, tmp_path: Path
) -> AsyncIterator[Callable[..., subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_API_KEY": "sk-test",
        "LLM_PROFILES_PATH": str(PROFILES),
        "TWILIO_ACCOUNT_SID": ACCOUNT_SID,
        "TWILIO_AUTH_TOKEN": AUTH_TOKEN,
        "TWILIO_WHATSAPP_FROM": f"whatsapp:{BUSINESS}",
        "TWILIO_API_BASE_URL": fake_twilio.base_url,
        "MEL_DATA_DIR": str(tmp_path / "worker-data"),
        "MEL_CLAIM_IDLE_SECONDS": "3",
        "MEL_LOG_FORMAT": "json",
    }

    def spawn(**extra: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "worker"],
            env={**env, **extra},
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / f"worker-{len(procs)}.log", "wb"),  # noqa: SIM115
        )
        procs.append(proc)
        return proc

    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


async def _wait(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_kill_9_mid_turn_then_restart_gives_exactly_one_reply(
    start_gateway: Any,
    spawn_worker: Callable[[], subprocess.Popen[bytes]],
    fake_llm: FakeLLM,
    fake_twilio: FakeTwilioAPI,
) -> None:
    gw: Gateway = await start_gateway(run_worker=False)
    fake_llm.delay = 2.0
    fake_llm.responder = lambda req: "resposta única"
    first = spawn_worker()
    assert (await gw.twilio("qual o total do mês?")).status == 200
    await _wait(lambda: len(agent_calls(fake_llm)) >= 1, timeout=20)  # the turn is mid-LLM
    first.send_signal(signal.SIGKILL)
    first.wait()
    loop = asyncio.get_running_loop()
    killed_at = loop.time()
    fake_llm.delay = 0.0
    spawn_worker()
    await fake_twilio.wait_for_messages(1, timeout=35)
    assert loop.time() - killed_at < 30
    await asyncio.sleep(4)  # give any would-be duplicate time to show up
    assert [m["Body"] for m in fake_twilio.messages] == ["resposta única"]
    assert len(await gw.events("message.sent")) == 1


async def test_several_worker_processes_keep_order_and_answer_each_message_once(
    start_gateway: Any,
    spawn_worker: Callable[[], subprocess.Popen[bytes]],
    fake_llm: FakeLLM,
    fake_twilio: FakeTwilioAPI,
) -> None:
    gw: Gateway = await start_gateway(run_worker=False)
    fake_llm.delay = 0.05
    fake_llm.responder = lambda req: "eco: " + req["messages"][-1]["content"]
    spawn_worker()
    spawn_worker()
    users = [f"+55119{n:08d}" for n in range(8)]
    for i in range(4):
        await asyncio.gather(*(gw.twilio(f"{u} #{i}", user=u) for u in users))
    sent = await fake_twilio.wait_for_messages(32, timeout=40)
    await asyncio.sleep(1)
    assert len(fake_twilio.messages) == 32
    for u in users:
        bodies = [m["Body"] for m in sent if m["To"] == f"whatsapp:{u}"]
        assert bodies == [f"eco: {u} #{i}" for i in range(4)]


async def test_a_worker_whose_consumer_dies_exits_non_zero(
    redis: Any, spawn_worker: Callable[[], subprocess.Popen[bytes]]
) -> None:
    # the ready stream's key holds a string: the consumer cannot read it (not an outage)
    await redis.set("mel:ready", "not a stream")
    proc = spawn_worker()
    await _wait(lambda: proc.poll() is not None, timeout=20)
    assert proc.returncode == 1


async def test_sigterm_drains_and_exits_zero(
    redis: Any, spawn_worker: Callable[[], subprocess.Popen[bytes]]
) -> None:
    proc = spawn_worker()
    for _ in range(100):  # up and consuming: its group exists
        if await redis.exists("mel:ready"):
            break
        await asyncio.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    await _wait(lambda: proc.poll() is not None, timeout=20)
    assert proc.returncode == 0


async def test_a_worker_process_serves_its_own_metrics(
    start_gateway: Any,
    spawn_worker: Callable[..., subprocess.Popen[bytes]],
    fake_twilio: FakeTwilioAPI,
) -> None:
    """In the web + workers shape the turns run in the workers: their metrics are theirs."""
    gw: Gateway = await start_gateway(run_worker=False)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spawn_worker(MEL_METRICS_PORT=str(port))
    assert (await gw.twilio("qual o total do mês?")).status == 200
    await fake_twilio.wait_for_messages(1, timeout=30)
    url = f"http://127.0.0.1:{port}/metrics"
    async with aiohttp.ClientSession() as session:
        for _ in range(100):  # the reply is recorded, then the turn's task ends
            async with session.get(url) as resp:
                text = await resp.text()
            sent = 'mel_replies_total{channel="twilio",status="sent"} 1.0' in text
            if sent and "mel_turns_in_flight 0.0" in text:
                break
            await asyncio.sleep(0.1)
    assert 'mel_turns_total{outcome="agent"} 1.0' in text
    assert 'mel_replies_total{channel="twilio",status="sent"} 1.0' in text
    assert "mel_turns_in_flight 0.0" in text
    assert 'mel_llm_calls_total{profile="agent"} 1.0' in text
