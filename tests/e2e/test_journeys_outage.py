"""Journey 7 (issue 11): an LLM outage loses no question. Slow: they wait for the real
first retry (5 s after the model failed)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agent.prompts import LLM_FAILURE_REPLY
from tests.e2e.conftest import AGENT_MODEL, PROFILES, Gateway, agent_calls
from tests.e2e.test_journeys import STICKINESS, open_gateway, transcript
from tests.fakes.llm import FakeLLM, Scripted, error, hang
from tests.fakes.twilio_api import FakeTwilioAPI

pytestmark = pytest.mark.slow

HOLDING = "Estou com uma instabilidade agora. Guardei sua mensagem e te respondo já já."


class Model:
    """The agent's model: down (``failure``) until the test brings it back."""

    def __init__(self, failure: Scripted) -> None:
        self.failure = failure
        self.down = True
        self.failed = 0

    def __call__(self, request: dict[str, Any]) -> Scripted:
        if self.down:
            self.failed += 1
            return self.failure
        return "resposta: " + str(request["messages"][-1]["content"])


def bodies(twilio: FakeTwilioAPI) -> list[str]:
    return [m["Body"] for m in twilio.messages]


@STICKINESS
async def test_journey7_an_outage_holds_parks_and_answers_once_in_order(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, sticky: bool
) -> None:
    gw = await open_gateway(start_gateway, fake_llm, sticky, llm_outage_message=HOLDING)
    model = Model(error(500))
    fake_llm.by_model[AGENT_MODEL] = model
    loop = asyncio.get_running_loop()
    started = loop.time()
    await gw.twilio("quanto gastamos com mercado?")
    await fake_twilio.wait_for_messages(1)
    assert bodies(fake_twilio) == [HOLDING]  # one short holding message
    [parked] = await gw.wait_events("message.parked", 1)
    first_retry = datetime.fromisoformat(parked["data"]["retry_at"]) - datetime.fromisoformat(
        parked["at"].replace("Z", "+00:00")
    )
    assert 4.0 <= first_retry.total_seconds() <= 10.0

    # the couple writes again meanwhile: no second holding message, nothing lost
    await gw.twilio("e com farmácia?")
    await asyncio.sleep(1.0)
    assert bodies(fake_twilio) == [HOLDING]
    model.down = False  # the model is back

    await fake_twilio.wait_for_messages(3, timeout=15)
    elapsed = loop.time() - started
    assert 4.0 <= elapsed <= 12.0
    await gw.idle()
    await asyncio.sleep(0.3)
    assert bodies(fake_twilio) == [  # exactly once, in order
        HOLDING,
        "resposta: quanto gastamos com mercado?",
        "resposta: e com farmácia?",
    ]
    assert model.failed == 1
    assert len(await gw.events("message.parked")) == 1
    assert len(await gw.events("message.received")) == 2
    # the second answer knew the first exchange
    history = [m["content"] for m in agent_calls(fake_llm)[-1]["messages"] if m["role"] != "system"]
    assert "resposta: quanto gastamos com mercado?" in history
    await transcript(gw, f"journey 7 (outage, stickiness {'on' if sticky else 'off'})")


async def test_journey7_after_the_retry_window_the_failure_reply(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, tmp_path: Path
) -> None:
    profiles = tmp_path / "profiles.yaml"  # the agent's model times out after 1 s
    text = PROFILES.read_text(encoding="utf-8")
    profiles.write_text(text.replace("timeout_seconds: 20", "timeout_seconds: 1", 1), "utf-8")
    gw: Gateway = await start_gateway(
        llm_profiles_path=profiles, llm_outage_message=HOLDING, llm_outage_retry_seconds=1
    )
    model = Model(hang())
    fake_llm.by_model[AGENT_MODEL] = model
    await gw.twilio("qual o total do mês?")
    await fake_twilio.wait_for_messages(1, timeout=5)
    assert bodies(fake_twilio) == [HOLDING]
    await fake_twilio.wait_for_messages(2, timeout=15)
    await gw.idle()
    assert bodies(fake_twilio) == [HOLDING, LLM_FAILURE_REPLY]  # one holding message only
    assert model.failed == 2  # the first try and the retry after the window
    assert len(await gw.events("message.parked")) == 1
    await transcript(gw, "journey 7 (outage longer than LLM_OUTAGE_RETRY_SECONDS)")


async def test_journey7_a_parked_question_survives_a_restart(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    first: Gateway = await start_gateway(llm_outage_message=HOLDING)
    model = Model(error(503))
    fake_llm.by_model[AGENT_MODEL] = model
    await first.twilio("quanto sobra do orçamento?")
    await fake_twilio.wait_for_messages(1)
    assert await first.wait_events("message.parked", 1)
    await first.server.close()  # the gateway stops while the question is parked
    model.down = False

    second: Gateway = await start_gateway(llm_outage_message=HOLDING)  # same Redis
    await fake_twilio.wait_for_messages(2, timeout=15)
    await second.idle()
    await asyncio.sleep(0.3)
    assert bodies(fake_twilio) == [HOLDING, "resposta: quanto sobra do orçamento?"]
    assert model.failed == 1
    await transcript(second, "journey 7 (parked across a restart)")
