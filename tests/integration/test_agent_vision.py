"""Images of the current turn: sent as image parts to a ``vision: true`` profile only,
seen at the fake chat-completions endpoint through the real openai client."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from agent.errors import LLMError
from agent.llm import OpenAICompatibleLLM
from agent.messages import ChatMessage, ImagePart
from tests.fakes.llm import FakeLLM, SentImage, tool_call
from tests.integration.conftest import MakeAgent, profiles_with

RECEIPT = (Path(__file__).parent.parent / "data" / "receipt.jpg").read_bytes()
PHOTO = ImagePart(data=RECEIPT, content_type="image/jpeg")
DESCRIPTION = "[imagem recebida] nota do mercado"
THREAD = "twilio:+14155238886:+5511999990000"

MakeLLM = Callable[..., OpenAICompatibleLLM]


def photo_turn(*images: ImagePart) -> ChatMessage:
    return ChatMessage(role="user", content=DESCRIPTION, images=images or (PHOTO,))


async def test_a_vision_agent_gets_the_photo_with_its_description(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    agent = await make_agent(profiles=profiles_with(agent={"vision": True}))
    fake_llm.script("Vi a nota: R$ 52,30 no mercado.")

    result = await agent.ask(
        [
            ChatMessage(role="user", content="oi"),
            ChatMessage(role="assistant", content="Oi!"),
            photo_turn(),
        ],
        thread_id=THREAD,
    )

    assert result.reply.content == "Vi a nota: R$ 52,30 no mercado."
    sent = fake_llm.last_call["messages"]
    assert sent[-1]["content"][0] == {"type": "text", "text": DESCRIPTION}
    assert fake_llm.images() == [SentImage(len(sent) - 1, "image/jpeg", RECEIPT, PHOTO.data_url)]
    assert [m["content"] for m in sent[1:3]] == ["oi", "Oi!"]  # history stays text


async def test_a_text_only_agent_reads_the_description_only(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    agent = await make_agent(profiles=profiles_with(agent={"vision": False}))

    await agent.ask([photo_turn()], thread_id=THREAD)

    assert fake_llm.last_call["messages"][-1] == {"role": "user", "content": DESCRIPTION}
    assert fake_llm.images() == []


async def test_only_the_last_user_message_sends_its_images(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    agent = await make_agent(profiles=profiles_with(agent={"vision": True}))
    png = ImagePart(data=b"\x89PNG\r\n\x1a\n" + bytes(32), content_type="image/png")

    await agent.ask(
        [photo_turn(), ChatMessage(role="assistant", content="Anotei."), photo_turn(png, png)],
        thread_id=THREAD,
    )

    sent = fake_llm.last_call["messages"]
    assert sent[1] == {"role": "user", "content": DESCRIPTION}
    assert [(i.message_index, i.content_type) for i in fake_llm.images()] == [
        (3, "image/png"),
        (3, "image/png"),
    ]


async def test_the_photo_stays_in_view_through_the_tool_rounds(
    make_agent: MakeAgent, fake_llm: FakeLLM
) -> None:
    agent = await make_agent(profiles=profiles_with(agent={"vision": True}))
    fake_llm.script(tool_call("budgetTotal", {"month": "2026-06"}), "Cabe no orçamento.")

    result = await agent.ask([photo_turn()], thread_id=THREAD)

    assert result.outcome == "agent"
    assert fake_llm.call_count == 2
    assert [len(fake_llm.images(call)) for call in (0, 1)] == [1, 1]


async def test_other_roles_never_get_images(fake_llm: FakeLLM, make_llm: MakeLLM) -> None:
    llm = make_llm(base_url=fake_llm.base_url, profiles=profiles_with(agent={"vision": True}))

    await llm.complete("router", [photo_turn()])
    await llm.complete("agent", [photo_turn()])

    assert fake_llm.calls[0]["messages"] == [{"role": "user", "content": DESCRIPTION}]
    assert len(fake_llm.images(1)) == 1


async def test_a_model_that_cannot_read_images_refuses_them(make_llm: MakeLLM) -> None:
    async with FakeLLM.running(vision_models={"gpt-4.1"}) as fake:
        llm = make_llm(base_url=fake.base_url, profiles=profiles_with(agent={"vision": True}))

        with pytest.raises(LLMError) as caught:
            await llm.complete("agent", [photo_turn()])  # gpt-4.1-mini: not in the list

    assert caught.value.status == 400
    assert fake.requests[0].status == 400


async def test_the_fake_refuses_bytes_that_are_not_an_image(
    fake_llm: FakeLLM, make_llm: MakeLLM
) -> None:
    llm = make_llm(base_url=fake_llm.base_url, profiles=profiles_with(agent={"vision": True}))
    not_an_image = ImagePart(data=b"%PDF-1.7 boleto", content_type="image/jpeg")

    with pytest.raises(LLMError) as caught:
        await llm.complete("agent", [photo_turn(not_an_image)])

    assert caught.value.status == 400
    assert fake_llm.requests[0].status == 400


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ([{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,@@@"}}], "base64"),
        ([{"type": "image_url", "image_url": {"url": "data:text/plain;base64,b2k="}}], "MIME"),
        ([{"type": "image_url", "image_url": {"url": "file:receipt.jpg"}}], "data URL"),
        ([{"type": "image_url", "image_url": "data:image/png;base64,AA=="}], "expected a string"),
        ([{"type": "input_audio", "input_audio": {}}], "unsupported content part"),
        ([], "non-empty"),
    ],
)
async def test_the_fake_validates_image_parts(
    fake_llm: FakeLLM, content: list[object], reason: str
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{fake_llm.base_url}/chat/completions", json=body) as response,
    ):
        error = (await response.json())["error"]

    assert response.status == 400
    assert reason in error["message"]


async def test_the_fake_refuses_images_outside_user_messages(fake_llm: FakeLLM) -> None:
    part = {"type": "image_url", "image_url": {"url": PHOTO.data_url}}
    body = {"model": "m", "messages": [{"role": "system", "content": [part]}]}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{fake_llm.base_url}/chat/completions", json=body) as response,
    ):
        error = (await response.json())["error"]

    assert response.status == 400
    assert "only allowed in user messages" in error["message"]
