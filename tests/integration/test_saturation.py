"""What a process does when it asks too much at once: a full Redis pool makes calls wait
(and only then fail, as exhaustion, not as an outage); a lagging event loop holds new
turns back; both are counted for the metrics."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio as aioredis

from gateway.store import MeteredPool, PoolExhausted, Store, StoreDown
from gateway.workers.admission import Admission


def _store(url: str, *, size: int, wait: float) -> tuple[Store, MeteredPool]:
    pool = MeteredPool.from_url(url, max_connections=size, timeout=wait)
    return Store(aioredis.Redis(connection_pool=pool)), pool


async def _hold_the_only_connection(store: Store, seconds: float) -> asyncio.Task[object]:
    task = asyncio.create_task(store.redis.blpop(["nothing-comes"], timeout=seconds))
    await asyncio.sleep(0.05)  # it has the connection now
    return task


async def test_a_call_waits_for_a_free_connection_and_the_wait_is_counted(redis_url: str) -> None:
    store, pool = _store(redis_url, size=1, wait=5)
    try:
        holder = await _hold_the_only_connection(store, 1)
        started = time.monotonic()
        await store.ping()  # waits for the BLPOP to give the connection back
        assert time.monotonic() - started > 0.5
        await holder
        assert pool.waits == 1
        assert pool.wait_seconds > 0.5
        assert pool.exhausted == 0
        await store.ping()  # an idle connection: no wait
        assert pool.waits == 1
    finally:
        await store.redis.aclose()


async def test_a_pool_that_stays_full_is_exhausted_not_down(redis_url: str) -> None:
    store, pool = _store(redis_url, size=1, wait=0.2)
    try:
        holder = await _hold_the_only_connection(store, 1)
        with pytest.raises(PoolExhausted, match=r"no free Redis connection within 0\.2s"):
            await store.ping()
        assert pool.exhausted == 1
        await holder
        await store.ping()  # the server was fine all along
    finally:
        await store.redis.aclose()


async def test_an_unreachable_server_is_still_down() -> None:
    store, pool = _store("redis://127.0.0.1:1", size=1, wait=0.2)
    try:
        with pytest.raises(StoreDown):
            await store.ping()
        assert pool.exhausted == 0
    finally:
        await store.redis.aclose()


async def test_a_lagging_loop_closes_the_gate_until_it_keeps_time_again() -> None:
    lag = Admission(limit=0.05, interval=0.02)
    await lag.tick()
    await lag.admit()  # on time: through at once
    time.sleep(0.12)  # noqa: ASYNC251 - the loop is blocked (a crowd of turns, say)
    await lag.tick()
    assert lag.lag > 0.05
    waiting = asyncio.create_task(lag.admit())
    await asyncio.sleep(0.01)
    assert not waiting.done()  # no new turn starts while the loop runs late
    await lag.tick()  # the next timer fires on time
    await asyncio.wait_for(waiting, 1)
    assert lag.pauses == 1
    assert lag.paused_seconds > 0


async def test_stopping_the_lag_job_opens_the_gate() -> None:
    lag = Admission(limit=0.01, interval=0.02)
    await lag.tick()
    time.sleep(0.05)  # noqa: ASYNC251 - the loop is blocked
    await lag.tick()
    waiting = asyncio.create_task(lag.admit())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    lag.stop()
    await asyncio.wait_for(waiting, 1)


async def test_turns_start_between_the_deliveries_of_steady_traffic() -> None:
    lag = Admission(limit=1.0, crowd=2)
    with lag.acknowledging_one(), lag.acknowledging_one():  # ordinary traffic
        await asyncio.wait_for(lag.admit(), 0.1)  # through at once: turns are not starved
        with lag.acknowledging_one():  # a third at once: a crowd
            waiting = asyncio.create_task(lag.admit())
            await asyncio.sleep(0.02)
            assert not waiting.done()
        await asyncio.wait_for(waiting, 1)  # the crowd thinned
    assert lag.pauses == 1


async def test_no_turn_starts_while_a_crowd_of_deliveries_is_being_acknowledged() -> None:
    lag = Admission(limit=1.0, crowd=0)
    with lag.acknowledging_one():
        waiting = asyncio.create_task(lag.admit())
        await asyncio.sleep(0.02)
        assert not waiting.done()  # the webhook's acknowledgement comes first
        with lag.acknowledging_one():  # a second one overlaps the first
            pass
        await asyncio.sleep(0.02)
        assert not waiting.done()
    await asyncio.wait_for(waiting, 1)
    assert lag.pauses == 1


def held_turns(lag: Admission, count: int) -> tuple[list[int], list[asyncio.Task[None]]]:
    """``count`` turns waiting at the gate; each notes its number once through."""
    passed: list[int] = []

    async def turn(n: int) -> None:
        await lag.admit()
        passed.append(n)

    return passed, [asyncio.create_task(turn(n)) for n in range(count)]


async def test_held_turns_all_pass_in_order_once_the_crowd_thins() -> None:
    lag = Admission(limit=1.0, crowd=0)
    with lag.acknowledging_one():
        passed, turns = held_turns(lag, 5)
        await asyncio.sleep(0.01)
        assert passed == []
    await asyncio.wait_for(asyncio.gather(*turns), 1)
    assert passed == [0, 1, 2, 3, 4]  # in the order they came
    assert lag.pauses == 5


async def test_held_turns_pass_a_batch_per_loop_iteration_and_a_crowd_stops_the_rest() -> None:
    lag = Admission(limit=1.0, crowd=0, batch=4)
    with lag.acknowledging_one():
        passed, turns = held_turns(lag, 20)
        await asyncio.sleep(0.01)
    for _ in range(3):  # the gate opened: a batch a loop iteration, not the whole herd
        await asyncio.sleep(0)
    assert 0 < len(passed) <= 8
    with lag.acknowledging_one():  # deliveries come in again: the rest wait
        before = len(passed)
        await asyncio.sleep(0.02)
        assert len(passed) <= before + 4  # at most the batch already let through
        assert len(passed) < 20
    await asyncio.wait_for(asyncio.gather(*turns), 1)
    assert passed == list(range(20))  # in the order they came
