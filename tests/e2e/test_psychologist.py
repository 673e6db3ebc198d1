"""The psychologist wired into the gateway: closed sessions get evidence-cited analyses,
exactly one current per session, retried, resumable, reanalysable, and support reads and
decides on them over the API and the CLI.

The model is the fake chat-completions server; a test profiles file gives the light and
heavy tiers their own models and prices, and :class:`Analyst` answers for both like a
model would — citing events it was shown in the prompt.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from agent.llm import OpenAICompatibleLLM
from agent.profiles import load_profiles
from agent.psychologist import (
    ANALYSIS_COMPLETED,
    ANALYSIS_FAILED,
    DEFAULT_AGENTS,
    EMIT_HYPOTHESES,
    HYPOTHESIS_ACCEPTED,
    HYPOTHESIS_ACCEPTED_FOR_ANAMNESE,
    HYPOTHESIS_DISMISSED,
    Psychologist,
    load_rules,
    validate_batch,
)
from gateway.cli.insights import run_insights
from gateway.metrics import Metrics
from gateway.store import Store
from gateway.store.psychologist import GROUP, PsychologistStore
from gateway.workers.psychologist import Job, PsychologistWorker
from tests.e2e.conftest import BUSINESS, Gateway
from tests.factories import closed, received, replied, started
from tests.fakes.llm import FakeLLM, Scripted, error, text, tool_call
from tests.fakes.twilio_api import FakeTwilioAPI

TOKEN = "support-secret-token"
LIGHT = "fake-psychologist-light"
HEAVY = "fake-psychologist-heavy"
USAGE = {"prompt_tokens": 1_000, "completion_tokens": 200}
LIGHT_COST = 1_000 * 1 + 200 * 2  # micro-USD at 1 / 2 USD per million tokens
HEAVY_COST = 1_000 * 10 + 200 * 40  # at 10 / 40


def thread(user: str) -> str:
    return f"twilio:{BUSINESS}:{user}"


THREAD = thread("+5511911110000")
TARGETS = {"user_ended": "router", "support_closed": "support", "processing_error": "gateway"}


class Analyst:
    """A psychologist model: cites the first and the last event of the log it was shown
    (and each one in between for a longer batch), targets an agent by the close cause,
    adds a termination analysis when the close was abnormal. ``queue`` answers first."""

    def __init__(self) -> None:
        self.queue: deque[Scripted] = deque()
        self.hypotheses = 1

    def __call__(self, request: dict[str, Any]) -> Scripted:
        if self.queue:
            return self.queue.popleft()
        prompt = request["messages"][1]["content"]
        ids = re.findall(r"^\[([^\]]+)\] ", prompt, re.MULTILINE)
        cause = re.search(r"- causa: (\w+) \((\w+)\)", prompt)
        assert cause is not None, prompt
        assert ids, prompt
        batch = []
        for n in range(self.hypotheses):
            h: dict[str, Any] = {
                "target_agent": TARGETS.get(cause.group(1), "budget_agent"),
                "title": f"Hipótese {n + 1} ({cause.group(1)})",
                "description": "O casal ficou sem a resposta que pediu.",
                "confidence": 80 - n,
                "evidence_event_ids": [ids[n % len(ids)], ids[-1]],
            }
            if cause.group(2) == "ANORMAL":
                h["termination_analysis"] = "A queda deixou o casal sem resposta."
            batch.append(h)
        return tool_call(EMIT_HYPOTHESES, {"hypotheses": batch}, **USAGE)


@pytest.fixture
def profiles_path(tmp_path: Path) -> Path:
    """The packaged profiles, with each psychologist tier on its own model and price."""
    data = yaml.safe_load(resources.files("agent").joinpath("llm_profiles.yaml").read_text())
    data["profiles"]["psychologist_light"].update(
        model=LIGHT, price_input_per_mtok=1, price_output_per_mtok=2
    )
    data["profiles"]["psychologist"].update(
        model=HEAVY, price_input_per_mtok=10, price_output_per_mtok=40
    )
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def analyst(fake_llm: FakeLLM) -> Analyst:
    model = Analyst()
    fake_llm.by_model[LIGHT] = model
    fake_llm.by_model[HEAVY] = model
    return model


@pytest.fixture
def start(
    start_gateway: Callable[..., Any], profiles_path: Path, analyst: Analyst
) -> Callable[..., Any]:
    """``await start(**overrides)``: a gateway with the support API, the test profiles
    and quick retries, once its psychologist consumer group exists (when it runs one)."""

    async def go(*, ready: bool = True, **overrides: Any) -> Gateway:
        values: dict[str, Any] = {
            "support_token": TOKEN,
            "llm_profiles_path": profiles_path,
            "psychologist_retry_backoff_seconds": 0.05,
            "psychologist_enabled": True,
            **overrides,
        }
        gw: Gateway = await start_gateway(**values)
        if ready and values.get("run_worker", True) and values["psychologist_enabled"]:
            await until(lambda: PsychologistStore(gw.store).group_exists())
        return gw

    return go


@pytest.fixture
async def make_worker(
    fake_llm: FakeLLM, profiles_path: Path
) -> AsyncIterator[Callable[..., PsychologistWorker]]:
    """Standalone consumers on the test's Redis (as other processes would run them)."""
    llms: list[OpenAICompatibleLLM] = []

    def make(store: Store, name: str, **kwargs: Any) -> PsychologistWorker:
        llm = OpenAICompatibleLLM(
            load_profiles(profiles_path), base_url=fake_llm.base_url, api_key="sk-test"
        )
        llms.append(llm)
        kwargs.setdefault("claim_idle", 1.0)
        kwargs.setdefault("backoff", 0.05)
        return PsychologistWorker(
            store, Psychologist(llm), rules=load_rules(), consumer=name, metrics=Metrics(), **kwargs
        )

    yield make
    for llm in llms:
        await llm.aclose()


@contextlib.asynccontextmanager
async def running(worker: PsychologistWorker) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 5)
    try:
        yield task
    finally:
        await worker.drain(1.0)
        await task


async def until(predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def api(gw: Gateway, method: str, path: str, token: str = TOKEN, **kw: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    async with gw.session.request(method, gw.url(f"/support{path}"), headers=headers, **kw) as r:
        body = await r.json() if r.content_type == "application/json" else await r.text()
        return r.status, body


async def publish_session(
    store: Store,
    session_id: str,
    *,
    reason: str | None = "user_ended",
    thread_id: str = THREAD,
    exchanges: int = 2,
) -> list[str]:
    """A session the way turns record one (closed with ``reason`` unless None); its ids."""
    ids = await store.events.publish(thread_id, session_id, started())
    for n in range(exchanges):
        ids += await store.events.publish(
            thread_id,
            session_id,
            received(f"qual o total do mês? ({n})"),
            replied("Vocês gastaram R$ 10,00."),
        )
    if reason is not None:
        ids += await close(store, session_id, reason, thread_id=thread_id)
    return ids


async def close(
    store: Store, session_id: str, reason: str, *, thread_id: str = THREAD
) -> list[str]:
    return await store.events.publish(thread_id, session_id, closed(reason))


async def completions(gw: Gateway | Store, session_id: str, n: int = 1) -> list[dict[str, Any]]:
    store = gw.store if isinstance(gw, Gateway) else gw

    async def found() -> list[dict[str, Any]]:
        events = await store.events.read("0-0", count=10_000)
        mine = [
            e
            for e in events
            if e["type"] == ANALYSIS_COMPLETED and e["data"]["session_id"] == session_id
        ]
        return mine if len(mine) >= n else []

    result: list[dict[str, Any]] = await until(found)
    return result


def psychologist_calls(fake: FakeLLM) -> list[dict[str, Any]]:
    return [c for c in fake.calls if c["model"] in (LIGHT, HEAVY)]


async def metric(gw: Gateway, name: str, **labels: str) -> float:
    async with gw.session.get(gw.url("/metrics")) as resp:
        text = await resp.text()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def pending(store: Store) -> int:
    summary: Any = await store.redis.xpending(store.keys.events, GROUP)
    return int(summary["pending"])


async def drained(store: Store) -> bool:
    return await pending(store) == 0


# --- the spec's acceptance ---------------------------------------------------------------


async def test_three_closes_couple_support_error_each_get_hypotheses_citing_their_events(
    start: Callable[..., Any], fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start()
    # 1. the couple ends it (END_SESSION), 2. support closes it, 3. an error drops it
    await publish_session(gw.store, "s_couple", reason="user_ended", thread_id=thread("+551101"))
    support_thread = thread("+5511922220000")
    await gw.twilio("oi, qual o total do mês?", user="+5511922220000")
    await fake_twilio.wait_for_messages(1)
    await gw.idle()
    status, _ = await api(gw, "POST", f"/threads/{support_thread}/close")
    assert status == 200
    closed = await gw.wait_events("session.closed", 2)
    support_session = next(e for e in closed if e["thread_id"] == support_thread)["session_id"]
    await publish_session(
        gw.store, "s_error", reason="error: RuntimeError: boom", thread_id=thread("+551103")
    )

    sessions = {
        "s_couple": "user_ended",
        support_session: "support_closed",
        "s_error": "processing_error",
    }
    for session_id, cause in sessions.items():
        await completions(gw, session_id)
        status, analysis = await api(gw, "GET", f"/sessions/{session_id}/analysis")
        assert status == 200
        current = analysis["current"]
        assert current["termination"]["cause"] == cause
        assert current["hypotheses"]
        status, log = await api(gw, "GET", f"/sessions/{session_id}/events")
        assert status == 200
        by_id = {e["id"]: e for e in log["events"]}
        for hypothesis in current["hypotheses"]:
            assert hypothesis["target_agent"] == TARGETS[cause]
            for event_id in hypothesis["evidence_event_ids"]:
                assert by_id[event_id]["session_id"] == session_id  # opens, and is its own
    abnormal = (await api(gw, "GET", "/sessions/s_error/analysis"))[1]["current"]
    assert abnormal["termination"]["abnormal"] is True
    assert abnormal["hypotheses"][0]["termination_analysis"]

    status, insights = await api(gw, "GET", "/insights")
    assert status == 200
    assert insights["count"] == 3
    assert [g["target_agent"] for g in insights["agents"]] == ["gateway", "router", "support"]
    shown = insights["agents"][0]["hypotheses"][0]
    assert shown["session_id"] == "s_error"
    assert shown["termination"]["cause"] == "processing_error"
    assert shown["termination_analysis"] == "A queda deixou o casal sem resposta."
    assert shown["events_url"] == "/support/sessions/s_error/events"
    assert (shown["status"], shown["confidence"]) == ("proposed", 80)


# --- the tool loop through the consumer --------------------------------------------------


async def test_a_rejected_batch_reaches_the_model_verbatim_and_the_correction_is_stored(
    start: Callable[..., Any], analyst: Analyst, fake_llm: FakeLLM
) -> None:
    gw: Gateway = await start()
    earlier = await publish_session(gw.store, "s-1")
    await completions(gw, "s-1")
    earlier_title = (await api(gw, "GET", "/sessions/s-1/analysis"))[1]["current"]["hypotheses"][0][
        "title"
    ]
    bad = {
        "hypotheses": [
            {
                "target_agent": "budget_agent",
                "title": "Total sem ferramenta",
                "description": "A mel respondeu sem chamar budgetTotal.",
                "confidence": 70,
                "evidence_event_ids": [earlier[1], "9999999999999-0"],
            }
        ]
    }
    analyst.queue.append(tool_call(EMIT_HYPOTHESES, bad, id="call_bad", **USAGE))

    ids = await publish_session(gw.store, "s-2")
    await completions(gw, "s-2")

    expected = validate_batch(
        bad,
        session_event_ids=ids,
        known_event_ids=set(ids) | set(earlier),
        abnormal=False,
        allowed_targets=[agent.name for agent in DEFAULT_AGENTS],
        cause="user_ended",
    ).error
    assert "pertence a outra sessão" in expected
    assert "'9999999999999-0' não existe" in expected
    calls = psychologist_calls(fake_llm)
    assert len(calls) == 3  # s-1, then s-2 twice
    tool_results = [m for m in calls[2]["messages"] if m["role"] == "tool"]
    assert tool_results == [{"role": "tool", "tool_call_id": "call_bad", "content": expected}]
    # the thread's earlier hypothesis was in the context, not repeated as new
    assert earlier_title in calls[1]["messages"][1]["content"]
    current = (await api(gw, "GET", "/sessions/s-2/analysis"))[1]["current"]
    assert (current["cost"]["iterations"], current["cost"]["rejected_batches"]) == (2, 1)
    assert current["cost"]["cost_micro_usd"] == 2 * LIGHT_COST


# --- idempotency -------------------------------------------------------------------------


async def test_a_duplicate_close_delivery_makes_no_second_llm_call(
    start: Callable[..., Any], fake_llm: FakeLLM
) -> None:
    gw: Gateway = await start()
    await publish_session(gw.store, "s-1")
    await completions(gw, "s-1")
    await close(gw.store, "s-1", "user_ended")  # delivered again, later
    await publish_session(gw.store, "s-2")
    await close(gw.store, "s-2", "user_ended")  # delivered twice, together

    await completions(gw, "s-2")
    await until(lambda: metric(gw, "mel_psychologist_analyses_total", outcome="skipped"))
    await until(lambda: drained(gw.store))
    assert await metric(gw, "mel_psychologist_analyses_total", outcome="skipped") == 2
    assert len(psychologist_calls(fake_llm)) == 2
    assert len(await gw.events(ANALYSIS_COMPLETED)) == 2
    for session_id in ("s-1", "s-2"):
        body = (await api(gw, "GET", f"/sessions/{session_id}/analysis"))[1]
        assert body["superseded"] == []


async def test_two_workers_on_one_session_leave_one_current_analysis(
    start: Callable[..., Any],
    make_worker: Callable[..., PsychologistWorker],
    fake_llm: FakeLLM,
) -> None:
    gw: Gateway = await start(run_worker=False)
    first = make_worker(gw.store, "first")
    second = make_worker(gw.store, "second")
    fake_llm.latency_by_model[LIGHT] = 1.5
    reading = asyncio.create_task(first.run())
    await asyncio.wait_for(first.ready.wait(), 5)
    await publish_session(gw.store, "s-1")
    await until(lambda: len(psychologist_calls(fake_llm)) == 1)
    first.stop()  # reads no more (its analysis goes on): the duplicate goes to the other
    await reading
    async with running(second):
        # the same close delivered again, to the other worker, while the first is still
        # mid-analysis: both pass the pre-check and both ask the model
        await close(gw.store, "s-1", "user_ended")
        await until(lambda: len(psychologist_calls(fake_llm)) == 2)
        await until(lambda: drained(gw.store))
    await first.drain(5.0)

    analyses = PsychologistStore(gw.store)
    body = await analyses.session_analyses("s-1")
    assert body["current"] is not None
    assert body["superseded"] == []
    assert await gw.store.redis.llen(gw.store.keys.analyses("s-1")) == 1
    assert len(await gw.events(ANALYSIS_COMPLETED)) == 1
    outcomes = {
        outcome: sum(
            w.metrics.registry.get_sample_value(
                "mel_psychologist_analyses_total", {"outcome": outcome, "tier": "light"}
            )
            or 0
            for w in (first, second)
            if w.metrics is not None
        )
        for outcome in ("completed", "discarded")
    }
    assert outcomes == {"completed": 1, "discarded": 1}


async def test_a_reanalysis_request_seen_twice_runs_once(
    start: Callable[..., Any],
    make_worker: Callable[..., PsychologistWorker],
    fake_llm: FakeLLM,
) -> None:
    gw: Gateway = await start(run_worker=False)
    worker = make_worker(gw.store, "only")
    db = PsychologistStore(gw.store)
    await db.ensure_group()
    await publish_session(gw.store, "s-1")
    request_id = await db.request_reanalysis("s-1")
    request = next(e for e in await gw.events() if e["id"] == request_id)
    job = Job.from_envelope(request)
    assert job is not None

    # e.g. a worker that died between storing the analysis and acknowledging the request
    assert await worker.run_once(job) == "completed"
    assert await worker.run_once(job) == "skipped"
    assert len(psychologist_calls(fake_llm)) == 1
    assert len((await db.session_analyses("s-1"))["superseded"]) == 0


async def test_a_reanalysis_supersedes_the_previous_analysis_and_never_deletes_it(
    start: Callable[..., Any],
) -> None:
    gw: Gateway = await start()
    await publish_session(gw.store, "s-1")
    await completions(gw, "s-1")
    before = (await api(gw, "GET", "/sessions/s-1/analysis"))[1]["current"]

    status, body = await api(
        gw, "POST", "/sessions/s-1/reanalyze", json={"tier": "heavy", "by": "ana"}
    )

    assert status == 202
    request_id = body["request_event_id"]
    done = (await completions(gw, "s-1", 2))[-1]
    assert done["data"]["trigger_event_id"] == request_id
    assert done["data"]["supersedes"] == before["id"]
    body = (await api(gw, "GET", "/sessions/s-1/analysis"))[1]
    current = body["current"]
    assert (current["trigger"], current["requested_by"]) == ("manual", "ana")
    assert (current["cost"]["tier"], current["cost"]["model"]) == ("heavy", HEAVY)
    assert [a["id"] for a in body["superseded"]] == [before["id"]]
    old = body["superseded"][0]
    assert (old["status"], old["superseded_by"]) == ("superseded", current["id"])
    assert old["hypotheses"] == before["hypotheses"]
    insights = (await api(gw, "GET", "/insights"))[1]
    shown = [h["id"] for g in insights["agents"] for h in g["hypotheses"]]
    assert shown == current["hypothesis_ids"]

    await publish_session(gw.store, "s-open", reason=None)
    assert (await api(gw, "POST", "/sessions/s-open/reanalyze"))[0] == 409
    assert (await api(gw, "POST", "/sessions/s-nope/reanalyze"))[0] == 404
    assert (await api(gw, "POST", "/sessions/s-1/reanalyze", json={"tier": "max"}))[0] == 400


# --- crashes and failures ----------------------------------------------------------------


async def test_a_worker_dead_mid_analysis_is_resumed_by_another_and_completes(
    start: Callable[..., Any],
    make_worker: Callable[..., PsychologistWorker],
    fake_llm: FakeLLM,
) -> None:
    gw: Gateway = await start(run_worker=False)
    doomed = make_worker(gw.store, "doomed")
    fake_llm.latency_by_model[LIGHT] = 60.0
    task = asyncio.create_task(doomed.run())
    await asyncio.wait_for(doomed.ready.wait(), 5)
    await publish_session(gw.store, "s-1")
    await until(lambda: len(psychologist_calls(fake_llm)) == 1)
    # dies mid-LLM call: no ack, no failure published, no heartbeat any more
    await doomed.drain(0)
    await task
    assert await pending(gw.store) == 1
    fake_llm.latency_by_model[LIGHT] = 0.0

    async with running(make_worker(gw.store, "heir")):
        done = await completions(gw, "s-1")
        await until(lambda: drained(gw.store))

    analysis = (await api(gw, "GET", "/sessions/s-1/analysis"))[1]["current"]
    assert analysis["attempt"] == 2
    assert analysis["id"] == done[0]["data"]["analysis_id"]
    assert await gw.events(ANALYSIS_FAILED) == []
    assert len(psychologist_calls(fake_llm)) == 2


@pytest.fixture
def spawn_psychologist(
    redis_url: str, fake_llm: FakeLLM, profiles_path: Path, tmp_path: Path
) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """``mel-gateway psychologist`` processes on the test's Redis and fake LLM."""
    procs: list[subprocess.Popen[bytes]] = []
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_API_KEY": "sk-test",
        "LLM_PROFILES_PATH": str(profiles_path),
        "MEL_DATA_DIR": str(tmp_path / "psychologist-data"),
        "MEL_CLAIM_IDLE_SECONDS": "2",
        "MEL_LOG_FORMAT": "json",
        "PSYCHOLOGIST_RETRY_BACKOFF_SECONDS": "0.1",
    }

    def spawn() -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"psychologist-{len(procs)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "psychologist"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        procs.append(proc)
        return proc

    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
async def test_kill_9_mid_analysis_then_a_restarted_process_completes_it(
    start: Callable[..., Any],
    spawn_psychologist: Callable[[], subprocess.Popen[bytes]],
    fake_llm: FakeLLM,
) -> None:
    gw: Gateway = await start(run_worker=False)
    db = PsychologistStore(gw.store)
    first = spawn_psychologist()
    await until(db.group_exists)
    fake_llm.latency_by_model[LIGHT] = 60.0
    await publish_session(gw.store, "s-1")
    await until(lambda: len(psychologist_calls(fake_llm)) == 1)

    first.send_signal(signal.SIGKILL)
    first.wait()
    fake_llm.latency_by_model[LIGHT] = 0.0
    second = spawn_psychologist()

    await completions(gw, "s-1")
    await until(lambda: drained(gw.store))
    current = (await db.session_analyses("s-1"))["current"]
    assert current["attempt"] == 2  # the killed run counted
    assert len(await gw.events(ANALYSIS_COMPLETED)) == 1
    assert await gw.events(ANALYSIS_FAILED) == []
    assert len(psychologist_calls(fake_llm)) == 2

    second.send_signal(signal.SIGTERM)  # drains and exits cleanly
    assert second.wait(timeout=15) == 0


async def test_failed_runs_are_retried_and_a_later_one_succeeds(
    start: Callable[..., Any], analyst: Analyst
) -> None:
    gw: Gateway = await start()
    analyst.queue.extend([error(500), error(503)])

    await publish_session(gw.store, "s-1")
    await completions(gw, "s-1")

    failed = await gw.events(ANALYSIS_FAILED)
    assert [(e["data"]["attempt"], e["data"]["final"]) for e in failed] == [
        (1, False),
        (2, False),
    ]
    assert [e["data"]["failure"] for e in failed] == ["llm_error: HTTP 500", "llm_error: HTTP 503"]
    assert all(e["data"]["session_id"] == "s-1" for e in failed)
    assert failed[0]["data"]["metering"]["tier"] == "light"
    body = (await api(gw, "GET", "/sessions/s-1/analysis"))[1]
    assert body["current"]["attempt"] == 3
    assert len(body["failures"]) == 2


async def test_spent_attempts_leave_a_recorded_failure_and_no_analysis(
    start: Callable[..., Any], analyst: Analyst
) -> None:
    gw: Gateway = await start(psychologist_max_attempts=2)
    analyst.queue.extend([error(500), error(500)])

    await publish_session(gw.store, "s-1")
    failed = await gw.wait_events(ANALYSIS_FAILED, 2)
    await until(lambda: drained(gw.store))

    assert [(e["data"]["attempt"], e["data"]["final"]) for e in failed] == [(1, False), (2, True)]
    status, body = await api(gw, "GET", "/sessions/s-1/analysis")
    assert status == 200
    assert (body["status"], body["current"]) == ("failed", None)
    assert [f["event_id"] for f in body["failures"]] == [e["id"] for e in reversed(failed)]
    # a later (manual) run may succeed
    await api(gw, "POST", "/sessions/s-1/reanalyze")
    await completions(gw, "s-1")
    assert (await api(gw, "GET", "/sessions/s-1/analysis"))[1]["status"] == "analysed"


async def test_a_run_over_budget_is_not_retried(
    start: Callable[..., Any], analyst: Analyst, fake_llm: FakeLLM
) -> None:
    """The same session costs the same again: retrying would spend the budget each time."""
    gw: Gateway = await start()
    analyst.queue.append(text("deixa eu pensar", prompt_tokens=60_000, completion_tokens=10))

    await publish_session(gw.store, "s-1")
    failed = await gw.wait_events(ANALYSIS_FAILED, 1)
    await until(lambda: drained(gw.store))

    assert [(e["data"]["failure"], e["data"]["final"]) for e in failed] == [
        ("budget_exceeded", True)
    ]
    assert len(psychologist_calls(fake_llm)) == 1
    assert (await api(gw, "GET", "/sessions/s-1/analysis"))[1]["status"] == "failed"


# --- tiers and cost ----------------------------------------------------------------------


async def test_light_and_heavy_runs_show_different_models_and_costs(
    start: Callable[..., Any], fake_llm: FakeLLM
) -> None:
    gw: Gateway = await start()
    await publish_session(gw.store, "s-short", exchanges=2)  # 7 events
    await publish_session(gw.store, "s-long", exchanges=10)  # 23 events

    await completions(gw, "s-short")
    await completions(gw, "s-long")

    costs = {}
    for session_id in ("s-short", "s-long"):
        cost = (await api(gw, "GET", f"/sessions/{session_id}/analysis"))[1]["current"]["cost"]
        costs[session_id] = (cost["tier"], cost["model"], cost["cost_micro_usd"])
    assert costs == {
        "s-short": ("light", LIGHT, LIGHT_COST),
        "s-long": ("heavy", HEAVY, HEAVY_COST),
    }
    assert [c["model"] for c in psychologist_calls(fake_llm)].count(HEAVY) == 1
    cost_metric = "mel_psychologist_cost_micro_usd_total"
    assert await metric(gw, cost_metric, tier="light", model=LIGHT) == LIGHT_COST
    assert await metric(gw, cost_metric, tier="heavy", model=HEAVY) == HEAVY_COST
    tokens = "mel_psychologist_tokens_total"
    assert await metric(gw, tokens, tier="heavy", kind="completion") == 200
    assert await metric(gw, "mel_psychologist_analyses_total", outcome="completed") == 2


# --- support decides ---------------------------------------------------------------------


async def test_support_accepts_and_dismisses_only_proposed_hypotheses(
    start: Callable[..., Any], analyst: Analyst
) -> None:
    gw: Gateway = await start()
    analyst.hypotheses = 4
    await publish_session(gw.store, "s-1")
    await completions(gw, "s-1")
    h1, h2, h3, h4 = (await api(gw, "GET", "/sessions/s-1/analysis"))[1]["current"][
        "hypothesis_ids"
    ]

    assert (await api(gw, "POST", f"/hypotheses/{h1}/accept", token="wrong"))[0] == 401
    status, body = await api(gw, "POST", f"/hypotheses/{h1}/accept", json={"by": "ana"})
    assert status == 200
    assert (body["hypothesis"]["status"], body["hypothesis"]["decided_by"]) == ("accepted", "ana")
    status, body = await api(gw, "POST", f"/hypotheses/{h1}/accept")
    assert (status, body["status"]) == (409, "accepted")
    assert (await api(gw, "POST", f"/hypotheses/{h1}/dismiss"))[0] == 409

    racing = await asyncio.gather(*(api(gw, "POST", f"/hypotheses/{h2}/accept") for _ in "ab"))
    assert sorted(status for status, _ in racing) == [200, 409]

    status, body = await api(gw, "POST", f"/hypotheses/{h3}/accept", json={"for_anamnese": True})
    assert status == 200
    types = {e["id"]: e["type"] for e in await gw.events()}
    assert [types[i] for i in body["event_ids"]] == [
        HYPOTHESIS_ACCEPTED,
        HYPOTHESIS_ACCEPTED_FOR_ANAMNESE,
    ]
    status, body = await api(gw, "POST", f"/hypotheses/{h4}/dismiss", json={"note": "ruído"})
    assert (status, body["hypothesis"]["note"]) == (200, "ruído")

    assert len(await gw.events(HYPOTHESIS_ACCEPTED)) == 3
    assert len(await gw.events(HYPOTHESIS_ACCEPTED_FOR_ANAMNESE)) == 1
    assert len(await gw.events(HYPOTHESIS_DISMISSED)) == 1
    assert (await api(gw, "POST", "/hypotheses/h_nope/accept"))[0] == 404
    assert (await api(gw, "POST", f"/hypotheses/{h4}/accept", json={"why": 1}))[0] == 400
    accepted = (await api(gw, "GET", "/insights?status=accepted"))[1]
    assert accepted["count"] == 3
    assert (await api(gw, "GET", "/insights?status=dismissed"))[1]["count"] == 1
    assert (await api(gw, "GET", "/insights?status=maybe"))[0] == 400
    assert (await api(gw, "GET", "/sessions/s-nope/analysis"))[0] == 404
    assert (await api(gw, "GET", "/sessions/s-nope/events"))[0] == 404


async def test_the_cli_lists_insights_by_agent_reanalyzes_and_decides(
    start: Callable[..., Any], capsys: pytest.CaptureFixture[str]
) -> None:
    gw: Gateway = await start()
    await publish_session(gw.store, "s-1", reason="error: RuntimeError: boom")
    await completions(gw, "s-1")

    def args(**kw: Any) -> argparse.Namespace:
        base = {"json": False, "status": None, "agent": None, "insights_command": None}
        return argparse.Namespace(**{**base, **kw})

    out = io.StringIO()
    assert await run_insights(gw.settings, args(), out) == 0
    text = out.getvalue()
    assert text.startswith("1 hypotheses on 1 agents")
    assert "gateway (1)\n  [ 80] Hipótese 1 (processing_error)  · proposed" in text
    assert "término (processing_error): A queda deixou o casal sem resposta." in text
    assert "session s-1 · evidence " in text

    out = io.StringIO()
    assert await run_insights(gw.settings, args(json=True), out) == 0
    hypothesis_id = json.loads(out.getvalue())["agents"][0]["hypotheses"][0]["id"]

    out = io.StringIO()
    again = args(insights_command="reanalyze", session="s-1", tier=None, by="cli", wait=15.0)
    assert await run_insights(gw.settings, again, out) == 0
    assert "reanalysis of s-1 queued" in out.getvalue()
    assert "1 hypotheses (light, fake-psychologist-light, 1400 micro-USD)" in out.getvalue()

    current = (await api(gw, "GET", "/sessions/s-1/analysis"))[1]["current"]
    new_id = current["hypothesis_ids"][0]
    assert new_id != hypothesis_id
    out = io.StringIO()
    decide = args(insights_command="accept", hypothesis=new_id, for_anamnese=True, by="cli")
    assert await run_insights(gw.settings, decide, out) == 0
    assert out.getvalue() == f"{new_id}: accepted (for the Anamnese)\n"
    assert await run_insights(gw.settings, decide, io.StringIO()) == 1
    assert "only a proposed hypothesis" in capsys.readouterr().err


# --- wiring ------------------------------------------------------------------------------


async def test_disabled_or_without_an_llm_no_analysis_runs(
    start: Callable[..., Any], fake_llm: FakeLLM
) -> None:
    with capture_logs() as logs:
        off: Gateway = await start(psychologist_enabled=False)
        await start(llm_base_url=None, ready=False)
    reasons = [e["reason"] for e in logs if e["event"] == "psychologist.disabled"]
    assert reasons == ["PSYCHOLOGIST_ENABLED=false", "no LLM configured (set LLM_BASE_URL)"]

    await publish_session(off.store, "s-1")
    await asyncio.sleep(1.0)
    assert not await PsychologistStore(off.store).group_exists()
    assert psychologist_calls(fake_llm) == []
    status, body = await api(off, "POST", "/sessions/s-1/reanalyze")
    assert status == 503
    assert "mel-gateway psychologist" in body["error"]
