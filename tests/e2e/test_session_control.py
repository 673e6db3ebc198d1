"""Route stickiness and the global nodes, through the running gateway."""

from __future__ import annotations

import json
from typing import Any

from gateway.conversation.thread import ThreadState
from tests.e2e.conftest import BUSINESS, ROUTER_MODEL, Gateway, agent_calls
from tests.fakes.llm import FakeLLM
from tests.fakes.twilio_api import FakeTwilioAPI

CLASSIFIER_MODEL = "route-continuity-model"
THREAD = f"twilio:{BUSINESS}:+5511999990000"


def classifier_says(fake: FakeLLM, decision: str, confidence: float = 0.97) -> None:
    fake.by_model[CLASSIFIER_MODEL] = lambda req: json.dumps(
        {"decision": decision, "confidence": confidence}
    )


async def test_continue_bypasses_the_router_and_records_the_turn_state(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(enable_route_stickiness=True)
    fake_llm.responder = lambda req: "Seu orçamento está em dia."
    classifier_says(fake_llm, "CONTINUE")
    await gw.twilio("como está meu orçamento?")
    await fake_twilio.wait_for_messages(1)
    await gw.idle()
    assert len(fake_llm.calls_for(ROUTER_MODEL)) == 1  # first turn: no active agent yet
    await gw.twilio("e o que sobra pra lazer?")
    await fake_twilio.wait_for_messages(2)
    await gw.idle()
    assert len(fake_llm.calls_for(ROUTER_MODEL)) == 1  # second turn: bypassed
    assert len(fake_llm.calls_for(CLASSIFIER_MODEL)) == 2
    continuity = await gw.events("router.continuity")
    expected = {
        "decision": "CONTINUE",
        "confidence": 0.97,
        "active_agent": "budget_agent",
        "route_bypassed": True,
        "profile_name": "route_continuity",
    }
    assert expected.items() <= continuity[-1]["data"].items()
    replied = await gw.events("agent.replied")
    assert replied[-1]["data"]["route_decision"]["method"] == "continuity"
    state = await gw.store.threads.state(THREAD)
    assert state is not None
    assert state.active_agent == "budget_agent"
    assert state.route_bypassed
    assert state.continuity is not None
    assert state.continuity["decision"] == "CONTINUE"


async def test_low_confidence_falls_back_to_the_router(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(enable_route_stickiness=True)
    classifier_says(fake_llm, "CONTINUE", confidence=0.5)
    for text in ("como está meu orçamento?", "e a fatura?"):
        await gw.twilio(text)
        await gw.idle()
    assert len(fake_llm.calls_for(ROUTER_MODEL)) == 2
    assert (await gw.events("router.continuity"))[-1]["data"]["route_bypassed"] is False


async def test_end_session_replies_closes_and_runs_no_agent(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(enable_route_stickiness=True)
    classifier_says(fake_llm, "END_SESSION")
    await gw.twilio("obrigado, pode encerrar")
    sent = await fake_twilio.wait_for_messages(1)
    assert sent[0]["Body"] == gw.settings.end_session_message
    assert agent_calls(fake_llm) == []
    await gw.idle()
    types = [e["type"] for e in await gw.events()]
    assert types.index("session.end.requested") < types.index("session.closed")
    closed = await gw.events("session.closed")
    assert closed[0]["data"]["reason"] == "user_ended"
    state = await gw.store.threads.state(THREAD)
    assert state is not None
    assert state.session_id == ""
    assert state.active_agent == ""
    assert state.counter == 0


async def test_classifier_handoff_mutes_the_bot_when_support_is_there(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(enable_route_stickiness=True, support_token="t")
    classifier_says(fake_llm, "HUMAN_HANDOFF")
    await gw.twilio("acho que esse caso precisa de um olhar de vocês")
    sent = await fake_twilio.wait_for_messages(1)
    assert sent[0]["Body"] == gw.settings.human_handoff_message
    requested = await gw.wait_events("session.human_handoff.requested", 1)
    assert requested[0]["data"]["source"] == "continuity"
    assert (await gw.store.threads.state(THREAD) or ThreadState()).mode == "human"
    assert agent_calls(fake_llm) == []
