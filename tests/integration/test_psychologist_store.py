"""The psychologist's Redis storage: one current analysis per session under races,
supersession that keeps history, hypothesis transitions that only leave ``proposed``,
and events that never touch the analysed session's own log."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis

from agent.llm import Usage
from agent.psychologist import (
    ANALYSIS_COMPLETED,
    ANALYSIS_FAILED,
    HYPOTHESIS_ACCEPTED,
    HYPOTHESIS_ACCEPTED_FOR_ANAMNESE,
    HYPOTHESIS_DISMISSED,
    HYPOTHESIS_PROPOSED,
    SESSION_CLOSED,
    AnalysisOutcome,
    HypothesisIn,
    HypothesisStatus,
    InvalidTransition,
    Termination,
    classify_termination,
)
from gateway.store import Store
from gateway.store.psychologist import (
    GROUP,
    REANALYSIS_REQUESTED,
    PsychologistStore,
    PsychologistUnavailable,
    SessionLog,
    SessionNotClosed,
    UnknownHypothesis,
    UnknownSession,
)
from gateway.workers.psychologist import Job
from tests.factories import closed, received, replied, started

THREAD = "twilio:+14155238886:+5511999990000"


@pytest.fixture
def store(redis: aioredis.Redis) -> Store:
    return Store(redis, "mel")


@pytest.fixture
def db(store: Store) -> PsychologistStore:
    return PsychologistStore(store)


async def closed_session(
    store: Store, session_id: str, *, thread: str = THREAD, reason: str | None = "user_ended"
) -> SessionLog:
    """A short session published like the gateway publishes one; closed unless ``reason``
    is None."""
    await store.events.publish(
        thread,
        session_id,
        started(),
        received("qual o total do mês?"),
        replied("Vocês gastaram R$ 10,00."),
    )
    if reason is not None:
        await store.events.publish(thread, session_id, closed(reason))
    return await PsychologistStore(store).session_log(session_id)


def outcome(
    session: SessionLog, *titles: str, tier: str = "light", model: str = "m-light"
) -> AnalysisOutcome:
    ids = session.event_ids
    hypotheses = [
        HypothesisIn(
            target_agent="budget_agent",
            title=title,
            description=f"{title}: a mel respondeu sem chamar budgetTotal.",
            confidence=60 + index,
            evidence_event_ids=[ids[1], ids[2]],
        )
        for index, title in enumerate(titles or ("Total sem ferramenta",))
    ]
    return AnalysisOutcome(
        ok=True,
        hypotheses=hypotheses,
        failure=None,
        tier=tier,
        profile="psychologist_light",
        model=model,
        iterations=2,
        usage=Usage(1_000, 200, 1_400, 2),
        rejected_batches=1,
        budget_micro_usd=50_000,
        max_iterations=4,
    )


def ended() -> Termination:
    return classify_termination("user_ended", SESSION_CLOSED)


async def save(
    db: PsychologistStore, session: SessionLog, *titles: str, supersede: bool = False
) -> Any:
    return await db.save_analysis(
        session=session,
        outcome=outcome(session, *titles),
        termination=ended(),
        trigger="manual" if supersede else "session_closed",
        trigger_event_id="1-0",
        supersede=supersede,
    )


async def events(store: Store, kind: str | None = None) -> list[dict[str, Any]]:
    found = await store.events.read("0-0", count=10_000)
    return [e for e in found if kind is None or e["type"] == kind]


async def test_ten_racing_first_analyses_leave_exactly_one_current(
    store: Store, db: PsychologistStore
) -> None:
    session = await closed_session(store, "s-1")

    results = await asyncio.gather(*(save(db, session, f"h{n}") for n in range(10)))

    winners = [r for r in results if r.stored]
    assert len(winners) == 1
    winner = winners[0]
    assert {r.current_id for r in results} == {winner.analysis_id}
    assert await db.current_id("s-1") == winner.analysis_id
    body = await db.session_analyses("s-1")
    assert body["status"] == "analysed"
    assert body["current"]["id"] == winner.analysis_id
    assert body["superseded"] == []  # the losers were not stored at all
    assert len(await events(store, ANALYSIS_COMPLETED)) == 1
    assert len(await events(store, HYPOTHESIS_PROPOSED)) == 1
    assert await db.has_current("s-1")


async def test_an_analysis_is_stored_with_its_cost_termination_and_hypotheses(
    store: Store, db: PsychologistStore
) -> None:
    session = await closed_session(store, "s-1")

    saved = await save(db, session, "Total sem ferramenta", "Resposta longa")

    analysis = await db.analysis(saved.analysis_id)
    assert analysis["status"] == "current"
    assert analysis["trigger"] == "session_closed"
    assert analysis["termination"]["cause"] == "user_ended"
    assert analysis["event_count"] == len(session.events)
    assert analysis["cost"] == {
        "tier": "light",
        "profile": "psychologist_light",
        "model": "m-light",
        "iterations": 2,
        "llm_calls": 2,
        "prompt_tokens": 1_000,
        "completion_tokens": 200,
        "total_tokens": 1_200,
        "cost_micro_usd": 1_400,
        "budget_micro_usd": 50_000,
        "max_iterations": 4,
        "rejected_batches": 1,
    }
    titles = [h["title"] for h in analysis["hypotheses"]]
    assert titles == ["Total sem ferramenta", "Resposta longa"]
    first = analysis["hypotheses"][0]
    assert first["status"] == "proposed"
    assert first["evidence_event_ids"] == session.event_ids[1:3]
    assert (first["session_id"], first["thread_id"]) == ("s-1", THREAD)
    completed = (await events(store, ANALYSIS_COMPLETED))[0]
    assert completed["data"]["analysis_id"] == saved.analysis_id
    assert completed["data"]["cost_micro_usd"] == 1_400
    assert completed["data"]["hypothesis_ids"] == analysis["hypothesis_ids"]


async def test_a_reanalysis_supersedes_and_keeps_the_previous_analysis(
    store: Store, db: PsychologistStore
) -> None:
    session = await closed_session(store, "s-1")
    first = await save(db, session, "Primeira")
    old = await db.analysis(first.analysis_id)

    second = await save(db, session, "Segunda", supersede=True)

    assert second.stored
    assert second.superseded_id == first.analysis_id
    body = await db.session_analyses("s-1")
    assert body["current"]["id"] == second.analysis_id
    assert [a["id"] for a in body["superseded"]] == [first.analysis_id]
    kept = body["superseded"][0]
    assert kept["status"] == "superseded"
    assert kept["superseded_by"] == second.analysis_id
    assert [h["title"] for h in kept["hypotheses"]] == ["Primeira"]  # never deleted
    current = await db.current_hypotheses()
    assert [h["title"] for h in current] == ["Segunda"]
    assert old["hypothesis_ids"][0] not in {h["id"] for h in current}
    completed = await events(store, ANALYSIS_COMPLETED)
    assert completed[-1]["data"]["supersedes"] == first.analysis_id


async def test_racing_reanalyses_each_supersede_the_last_and_one_stays_current(
    store: Store, db: PsychologistStore
) -> None:
    session = await closed_session(store, "s-1")
    await save(db, session, "Primeira")

    results = await asyncio.gather(*(save(db, session, f"r{n}", supersede=True) for n in range(5)))

    assert all(r.stored for r in results)
    body = await db.session_analyses("s-1")
    assert len(body["superseded"]) == 5
    assert body["current"]["id"] == await db.current_id("s-1")
    assert sum(a["status"] == "current" for a in [body["current"], *body["superseded"]]) == 1
    # each one superseded exactly one other: a chain, no fork
    assert len({a["superseded_by"] for a in body["superseded"]}) == 5
    assert len(await db.current_hypotheses()) == 1


async def test_psychologist_events_do_not_touch_the_analysed_sessions_log(
    store: Store, db: PsychologistStore
) -> None:
    session = await closed_session(store, "s-1")
    before = await store.events.session_ids("s-1")

    saved = await save(db, session)
    hypothesis_id = (await db.analysis(saved.analysis_id))["hypothesis_ids"][0]
    await db.transition(hypothesis_id, HypothesisStatus.ACCEPTED, by="ana")
    await db.record_failure(
        session_id="s-1",
        thread_id=THREAD,
        trigger="session_closed",
        trigger_event_id="1-0",
        failure="max_iterations",
        attempt=1,
        max_attempts=5,
    )

    assert await store.events.session_ids("s-1") == before
    mine = [e for e in await events(store) if e["type"].startswith("psychologist.")]
    assert {e["type"] for e in mine} == {
        HYPOTHESIS_PROPOSED,
        ANALYSIS_COMPLETED,
        HYPOTHESIS_ACCEPTED,
        ANALYSIS_FAILED,
    }
    assert all(e["session_id"] is None for e in mine)
    assert all(e["thread_id"] == THREAD for e in mine)
    assert all(e["data"]["session_id"] == "s-1" for e in mine)


async def test_only_a_proposed_hypothesis_moves_and_two_racing_accepts_give_one(
    store: Store, db: PsychologistStore
) -> None:
    session = await closed_session(store, "s-1")
    saved = await save(db, session, "a", "b")
    first, second = (await db.analysis(saved.analysis_id))["hypothesis_ids"]

    results = await asyncio.gather(
        *(db.transition(first, HypothesisStatus.ACCEPTED, by=who) for who in ("ana", "bia")),
        return_exceptions=True,
    )

    accepted = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, InvalidTransition)]
    assert (len(accepted), len(refused)) == (1, 1)
    assert refused[0].current == "accepted"
    hypothesis = await db.hypothesis(first)
    assert hypothesis["status"] == "accepted"
    assert hypothesis["decided_by"] in ("ana", "bia")
    assert len(await events(store, HYPOTHESIS_ACCEPTED)) == 1
    with pytest.raises(InvalidTransition):
        await db.transition(first, HypothesisStatus.DISMISSED, by="ana")

    dismissed, ids = await db.transition(second, HypothesisStatus.DISMISSED, by="ana", note="ruído")
    assert (dismissed["status"], dismissed["note"]) == ("dismissed", "ruído")
    assert [e["id"] for e in await events(store, HYPOTHESIS_DISMISSED)] == ids
    with pytest.raises(UnknownHypothesis):
        await db.transition("h_nope", HypothesisStatus.ACCEPTED, by="ana")


async def test_accepting_for_the_anamnese_publishes_the_distinct_type(
    store: Store, db: PsychologistStore
) -> None:
    session = await closed_session(store, "s-1")
    saved = await save(db, session)
    hypothesis_id = (await db.analysis(saved.analysis_id))["hypothesis_ids"][0]

    hypothesis, ids = await db.transition(
        hypothesis_id, HypothesisStatus.ACCEPTED, by="ana", for_anamnese=True
    )

    assert hypothesis["for_anamnese"] is True
    published = [e for e in await events(store) if e["id"] in ids]
    assert [e["type"] for e in published] == [
        HYPOTHESIS_ACCEPTED,
        HYPOTHESIS_ACCEPTED_FOR_ANAMNESE,
    ]
    assert published[1]["data"]["hypothesis_id"] == hypothesis_id


async def test_a_failed_run_writes_no_analysis_but_records_and_publishes_the_failure(
    store: Store, db: PsychologistStore
) -> None:
    session = await closed_session(store, "s-1")
    failed = AnalysisOutcome(
        ok=False,
        hypotheses=[],
        failure="budget_exceeded",
        tier="light",
        profile="psychologist_light",
        model="m-light",
        iterations=1,
        usage=Usage(60_000, 10, 60_020, 1),
        rejected_batches=1,
        errors=["Lote rejeitado: …"],
    )

    ids = await db.record_failure(
        session_id=session.session_id,
        thread_id=THREAD,
        trigger="session_closed",
        trigger_event_id="1-0",
        failure="budget_exceeded",
        attempt=5,
        max_attempts=5,
        outcome=failed,
    )

    assert not await db.has_current("s-1")
    body = await db.session_analyses("s-1")
    assert (body["status"], body["current"]) == ("failed", None)
    record = body["failures"][0]
    assert record["event_id"] == ids[0]
    assert (record["failure"], record["attempt"], record["final"]) == ("budget_exceeded", 5, True)
    assert record["metering"]["cost_micro_usd"] == 60_020
    event = (await events(store, ANALYSIS_FAILED))[0]
    assert event["data"]["last_error"] == "Lote rejeitado: …"
    assert event["data"]["metering"]["cost_micro_usd"] == 60_020


async def test_the_threads_earlier_hypotheses_leave_out_dismissed_ones_and_this_session(
    store: Store, db: PsychologistStore
) -> None:
    one = await closed_session(store, "s-1")
    two = await closed_session(store, "s-2")
    elsewhere = await closed_session(store, "s-9", thread="meta:1:+5511888880000")
    kept, dropped = (await db.analysis((await save(db, one, "a", "b")).analysis_id))[
        "hypothesis_ids"
    ]
    await save(db, two, "c")
    await save(db, elsewhere, "d")
    await db.transition(dropped, HypothesisStatus.DISMISSED, by="ana")

    previous = await db.thread_hypotheses(THREAD, exclude_session="s-2")

    assert [h["id"] for h in previous] == [kept]


async def test_other_sessions_of_the_thread_lend_their_ids(
    store: Store, db: PsychologistStore
) -> None:
    one = await closed_session(store, "s-1")
    two = await closed_session(store, "s-2")
    await db.note_closed_session(THREAD, "s-1", 1)
    await db.note_closed_session(THREAD, "s-2", 2)

    assert await db.other_sessions_event_ids(THREAD, "s-2") == set(one.event_ids)
    assert await db.other_sessions_event_ids(THREAD, "s-1") == set(two.event_ids)


async def test_a_reanalysis_request_needs_a_known_closed_session_and_a_consumer(
    store: Store, db: PsychologistStore
) -> None:
    await closed_session(store, "s-open", reason=None)
    await closed_session(store, "s-1")

    with pytest.raises(UnknownSession):
        await db.request_reanalysis("s-nope")
    with pytest.raises(SessionNotClosed):
        await db.request_reanalysis("s-open")
    with pytest.raises(PsychologistUnavailable):
        await db.request_reanalysis("s-1")
    with pytest.raises(ValueError, match="unknown tier"):
        await db.request_reanalysis("s-1", tier="medium")

    await db.ensure_group()
    await db.ensure_group()  # idempotent
    event_id = await db.request_reanalysis("s-1", tier="heavy", by="ana")

    request = next(e for e in await events(store, REANALYSIS_REQUESTED) if e["id"] == event_id)
    assert request["data"] == {"session_id": "s-1", "tier": "heavy", "requested_by": "ana"}
    assert request["session_id"] is None
    job = Job.from_envelope(request)
    assert job is not None
    assert (job.session_id, job.manual, job.tier, job.trigger) == ("s-1", True, "heavy", "manual")
    assert await db.group_exists()
    groups: Any = await store.redis.xinfo_groups(store.keys.events)
    assert [g["name"].decode() for g in groups] == [GROUP]


async def test_jobs_come_from_closes_and_reanalysis_requests_only(store: Store) -> None:
    await closed_session(store, "s-1", reason="error: RuntimeError: boom")
    found = await events(store)

    jobs = [Job.from_envelope(e) for e in found]

    assert [j is not None for j in jobs] == [False, False, False, True]
    close = jobs[-1]
    assert close is not None
    assert (close.type, close.session_id, close.manual) == (
        "session.closed_abnormally",
        "s-1",
        False,
    )
    assert close.reason == "error: RuntimeError: boom"
    nameless = {**found[-1], "session_id": None}
    assert Job.from_envelope(nameless) is None
