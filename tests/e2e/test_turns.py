"""Turns end to end: replies sent once, in order, guard preempts without the LLM."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from structlog.testing import capture_logs

from gateway.http.keys import COMPONENTS
from guard import GUARD_RESPONSE_FRUSTRATED, GUARD_RESPONSE_HUMAN_REQUEST, GUARD_RESPONSE_LOOP
from tests.e2e.conftest import BUSINESS, Gateway, agent_calls
from tests.fakes.graph_api import FakeGraphAPI
from tests.fakes.llm import FakeLLM, tool_call
from tests.fakes.payloads import (
    meta_location_message,
    meta_payload,
    meta_reaction_message,
    meta_status,
    meta_text_message,
    twilio_status_params,
)
from tests.fakes.twilio_api import FakeTwilioAPI


async def test_reply_is_the_models_text_sent_through_twilio(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    fake_llm.script([tool_call("budgetTotal", {"month": "2026-06"}), "Vocês gastaram R$ 0,00."])
    await gateway.twilio("qual o total de junho?", user="+5511988887777")
    sent = await fake_twilio.wait_for_messages(1)
    assert sent[0]["Body"] == "Vocês gastaram R$ 0,00."
    assert sent[0]["To"] == "whatsapp:+5511988887777"
    assert sent[0]["From"] == f"whatsapp:{BUSINESS}"
    assert len(agent_calls(fake_llm)) == 2
    events = await gateway.wait_events("message.sent", 1)
    assert events[0]["data"]["provider_message_ids"] == [sent[0]["sid"]]


async def test_duplicate_delivery_is_acknowledged_and_answered_once(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    sid = "SM" + uuid.uuid4().hex
    first = await gateway.twilio("qual o total do mês?", sid=sid)
    second = await gateway.twilio("qual o total do mês?", sid=sid)
    assert (first.status, second.status) == (200, 200)
    await fake_twilio.wait_for_messages(1)
    await gateway.idle()
    await asyncio.sleep(0.3)
    assert len(fake_twilio.messages) == 1
    assert len(await gateway.events("message.received")) == 1
    assert len(agent_calls(fake_llm)) == 1


async def test_three_quick_messages_with_a_slow_llm_are_answered_in_order(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    fake_llm.delay = 0.4
    fake_llm.responder = lambda req: "resposta para: " + req["messages"][-1]["content"]
    for text in ("primeira pergunta", "segunda pergunta", "terceira pergunta"):
        assert (await gateway.twilio(text)).status == 200
    sent = await fake_twilio.wait_for_messages(3, timeout=20)
    assert [m["Body"] for m in sent] == [
        "resposta para: primeira pergunta",
        "resposta para: segunda pergunta",
        "resposta para: terceira pergunta",
    ]
    # each turn saw the previous ones in its history
    last_request = agent_calls(fake_llm)[-1]["messages"]
    contents = [m["content"] for m in last_request if m["role"] == "user"]
    assert contents[-3:] == ["primeira pergunta", "segunda pergunta", "terceira pergunta"]


async def test_many_threads_at_once_each_get_their_reply(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    fake_llm.delay = 0.3
    fake_llm.responder = lambda req: "ok " + req["messages"][-1]["content"]
    users = [f"+55119{n:08d}" for n in range(30)]
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.gather(*(gateway.twilio(f"msg {u}", user=u) for u in users))
    sent = await fake_twilio.wait_for_messages(30, timeout=20)
    elapsed = loop.time() - started
    assert sorted(m["To"] for m in sent) == sorted(f"whatsapp:{u}" for u in users)
    for m in sent:
        assert m["Body"] == "ok msg " + m["To"].removeprefix("whatsapp:")
    # threads run concurrently: 30 turns of 0.3 s each, in sequence, would take 9 s
    assert elapsed < 5


async def test_guard_preempts_reply_canonically_with_zero_llm_calls(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    await gateway.twilio("esse bot é uma porra, não funciona NADA", user="+5511900000001")
    await gateway.twilio("quero falar com uma pessoa, não com bot", user="+5511900000002")
    sent = await fake_twilio.wait_for_messages(2)
    by_user = {m["To"]: m["Body"] for m in sent}
    assert by_user["whatsapp:+5511900000001"] == GUARD_RESPONSE_FRUSTRATED
    assert by_user["whatsapp:+5511900000002"] == GUARD_RESPONSE_HUMAN_REQUEST
    assert len(agent_calls(fake_llm)) == 0
    preempts = await gateway.events("guard.preempted")
    assert sorted(e["data"]["kind"] for e in preempts) == ["frustrated", "human-request"]


async def test_loop_preempt_arises_from_the_counter_kept_across_turns(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    fake_llm.responder = lambda req: "Hmm, pode explicar melhor?"  # never calls a tool
    for text in ("qual o saldo?", "saldo?"):
        await gateway.twilio(text)
        await gateway.idle()
    assert len(agent_calls(fake_llm)) == 2
    await gateway.twilio("saldo mesmo?")
    sent = await fake_twilio.wait_for_messages(3)
    assert sent[-1]["Body"] == GUARD_RESPONSE_LOOP
    assert len(agent_calls(fake_llm)) == 2  # the third turn never reached the LLM


async def test_a_tool_call_resets_the_counter_so_no_loop(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    fake_llm.script(
        [
            "Hmm?",
            tool_call("budgetTotal", {"month": "2026-06"}),
            "Total: R$ 0,00",
            "Mais alguma coisa?",
        ]
    )
    for text in ("qual o saldo?", "saldo?", "saldo mesmo?"):
        await gateway.twilio(text)
        await gateway.idle()
    sent = await fake_twilio.wait_for_messages(3)
    assert GUARD_RESPONSE_LOOP not in [m["Body"] for m in sent]


async def test_multi_message_meta_delivery_answers_every_message_and_marks_read(
    gateway: Gateway, fake_llm: FakeLLM, fake_graph: FakeGraphAPI
) -> None:
    fake_llm.responder = lambda req: "recebi: " + req["messages"][-1]["content"]
    payload = meta_payload(
        messages=[
            meta_text_message("oi", from_="5511911110001", id="wamid.A1"),
            meta_text_message("tudo bem?", from_="5511911110002", id="wamid.B1"),
            meta_location_message(-23.55, -46.63, from_="5511911110003", id="wamid.C1"),
            meta_reaction_message("wamid.X", "👍", from_="5511911110004", id="wamid.D1"),
        ],
        statuses=[meta_status("wamid.unknown", "delivered")],
    )
    resp = await gateway.meta(payload)
    assert resp.status == 200
    sent = await fake_graph.wait_for_messages(3)
    assert sorted(m["to"] for m in sent) == ["5511911110001", "5511911110002", "5511911110003"]
    await gateway.idle()
    assert len(await gateway.events("message.received")) == 4  # the reaction is recorded
    assert len(fake_graph.messages) == 3  # … but never answered
    assert {r["message_id"] for r in fake_graph.read_receipts} >= {"wamid.A1", "wamid.B1"}
    statuses = await gateway.events("message.status")
    assert statuses[0]["data"]["status"] == "delivered"


async def test_status_callbacks_become_events_linked_to_the_reply(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    sid = "SM" + uuid.uuid4().hex
    await gateway.twilio("qual o total do mês?", sid=sid)
    sent = await fake_twilio.wait_for_messages(1)
    params = twilio_status_params(sid=sent[0]["sid"], status="delivered", to="+5511999990000")
    resp = await gateway.twilio(params=params, path="/webhooks/twilio/status")
    assert resp.status == 200
    events = await gateway.wait_events("message.status", 1)
    assert events[0]["data"]["status"] == "delivered"
    assert events[0]["data"]["in_reply_to"] == sid
    assert events[0]["thread_id"] == f"twilio:{BUSINESS}:+5511999990000"


async def test_a_failed_send_is_recorded_not_retried_into_a_duplicate(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    fake_twilio.fail_next(status=400, code=63016, message="outside the 24h window")
    await gateway.twilio("oi")
    failed = await gateway.wait_events("message.failed", 1)
    assert failed[0]["data"]["code"] in (63016, "63016")
    await gateway.idle()
    assert len(fake_twilio.requests) == 1
    async with gateway.session.get(gateway.url("/metrics")) as resp:
        assert 'mel_replies_total{channel="twilio",status="failed"} 1.0' in await resp.text()


async def test_long_reply_is_split_on_sentence_boundaries(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    sentence = "Essa é uma frase de exemplo sobre o orçamento do casal. "
    fake_llm.responder = lambda req: (sentence * 60).strip()
    await gateway.twilio("me explica tudo")
    events = await gateway.wait_events("message.sent", 1)
    parts = events[0]["data"]["parts"]
    assert parts >= 3
    sent = fake_twilio.messages
    assert all(len(m["Body"]) <= 1600 for m in sent)
    assert all(m["Body"].endswith(".") for m in sent)
    assert " ".join(m["Body"] for m in sent) == (sentence * 60).strip()


async def test_no_llm_configured_gives_the_unavailable_reply(
    start_gateway: Any, fake_twilio: FakeTwilioAPI
) -> None:
    from agent import ASSISTANT_UNAVAILABLE

    gw: Gateway = await start_gateway(llm_base_url=None)
    await gw.twilio("qual o total do mês?")
    sent = await fake_twilio.wait_for_messages(1)
    assert sent[0]["Body"] == ASSISTANT_UNAVAILABLE


async def test_a_lease_lost_mid_send_lets_the_send_finish_and_record_what_happened(
    start_gateway: Any, fake_twilio: FakeTwilioAPI
) -> None:
    """A paused event loop can outlive the thread's lease while a reply is on the wire:
    the send must not be cut (the provider has it), and its outcome is recorded."""
    gw: Gateway = await start_gateway(mel_claim_idle_seconds=1.0)
    worker = gw.server.app[COMPONENTS].worker
    renew = worker.threads.renew

    async def expired_while_sending(*args: Any, **kwargs: Any) -> bool:
        return False if worker._sending else await renew(*args, **kwargs)

    worker.threads.renew = expired_while_sending  # type: ignore[method-assign]
    fake_twilio.delay = 1.0  # the send outlasts a renewal (every ⅓ of the lease)
    assert (await gw.twilio("quanto gastei esse mês?")).status == 200
    await gw.wait_events("message.sent", 1, timeout=20)
    await asyncio.sleep(2.5)  # time for a reclaim that would call it uncertain
    assert len(fake_twilio.messages) == 1
    assert await gw.events("message.failed") == []


async def test_a_renewal_that_crosses_the_owners_own_release_is_not_a_lost_lease(
    start_gateway: Any, fake_twilio: FakeTwilioAPI
) -> None:
    """A renewal sent just after the worker released the thread itself fails (the lease is
    gone); that is no expiry: no warning, and the finished turn is not cancelled."""
    gw: Gateway = await start_gateway(mel_claim_idle_seconds=0.3)  # renewals every 0.1 s
    worker = gw.server.app[COMPONENTS].worker
    release = worker.threads.finish_reply
    released = asyncio.Event()

    async def late_renewal(*args: Any, **kwargs: Any) -> bool:
        await released.wait()  # on its way while the release runs: Redis says 0
        return False

    async def release_then_reply_late(*args: Any, **kwargs: Any) -> bool:
        done = await release(*args, **kwargs)  # the reply is recorded, the thread released
        assert done
        released.set()
        await asyncio.sleep(0.05)  # the release's answer reaches the owner a bit later
        return done

    worker.threads.renew = late_renewal  # type: ignore[method-assign]
    worker.threads.finish_reply = release_then_reply_late  # type: ignore[method-assign]
    fake_twilio.delay = 0.3  # a renewal goes out while the reply is on the wire
    with capture_logs() as logs:
        assert (await gw.twilio("quanto gastei esse mês?")).status == 200
        await fake_twilio.wait_for_messages(1)
        await asyncio.sleep(0.5)
    events = [e["event"] for e in logs]
    assert released.is_set()
    assert "worker.lease_expired" not in events
    assert "turn.committed" in events
    assert len(fake_twilio.messages) == 1


async def test_a_renewal_that_swallows_the_owners_cancel_ends_with_the_turn(
    start_gateway: Any, fake_twilio: FakeTwilioAPI
) -> None:
    """redis-py may complete a command although its task was cancelled (redis-py#2665).
    A renewal caught that way as the turn ends must not keep the finished turn waiting
    (holding its slot and its thread) or log a lost lease."""
    gw: Gateway = await start_gateway(mel_claim_idle_seconds=0.6)  # renewals every 0.2 s
    worker = gw.server.app[COMPONENTS].worker
    renew = worker.threads.renew

    async def renewal_that_finishes_anyway(*args: Any, **kwargs: Any) -> bool:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.15)  # on its way when the owner cancels it
        return await renew(*args, **kwargs)

    worker.threads.renew = renewal_that_finishes_anyway  # type: ignore[method-assign]
    fake_twilio.delay = 0.3  # the turn ends while a renewal is in flight
    with capture_logs() as logs:
        assert (await gw.twilio("quanto gastei esse mês?")).status == 200
        await fake_twilio.wait_for_messages(1)
        async with asyncio.timeout(0.4):  # the turn's task ends with it, not a grace later
            while worker.in_flight:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.6)
    assert "worker.lease_expired" not in [e["event"] for e in logs]
    assert len(fake_twilio.messages) == 1
