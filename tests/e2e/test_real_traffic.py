"""Real WhatsApp traffic (issue 12), end to end: voice notes, images, usernames (BSUIDs),
partial batches, several business numbers, edits and deletes, the silent kinds.

Every delivery goes through the signed webhook and the worker; the tests assert what the
couple and support observe: the reply on the fake provider, the events, the raw delivery
record, and the requests the fakes (Twilio media, Graph media, the transcription endpoint,
a forbidden loopback host) saw.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from gateway.media import MEDIA_PROBLEM_REPLIES
from guard import GUARD_RESPONSE_HUMAN_REQUEST
from tests.e2e.conftest import (
    ACCOUNT_SID,
    AGENT_MODEL,
    AUTH_TOKEN,
    BUSINESS,
    META_PHONE_ID,
    META_TOKEN,
    ROUTER_MODEL,
    Gateway,
    agent_calls,
)
from tests.fakes.graph_api import FakeGraphAPI
from tests.fakes.llm import FakeLLM, echo_responder, error
from tests.fakes.media import ForbiddenHost
from tests.fakes.payloads import (
    fixture_bytes,
    meta_fixture,
    meta_media_message,
    meta_payload,
    meta_reaction_message,
    meta_text_message,
    new_twilio_sid,
    new_wamid,
    twilio_inbound_params,
)
from tests.fakes.twilio_api import FakeTwilioAPI

DATA = Path(__file__).parent.parent / "data"
MEDIA_PROFILES = DATA / "e2e_llm_profiles_media.yaml"  # vision agent + transcription
VOICE = (DATA / "voice_note.ogg").read_bytes()
RECEIPT = (DATA / "receipt.jpg").read_bytes()
TRANSCRIBE_MODEL = "transcribe-model"
API_VERSION = "v21.0"
META_BUSINESS = "+15550783881"  # display_phone_number of the recorded Meta fixtures
BSUID = "BR.1502576394655843"  # tests/data/meta/bsuid_only_text.json
ASK_AUDIO = MEDIA_PROBLEM_REPLIES["audio"]
ASK_IMAGE = MEDIA_PROBLEM_REPLIES["image"]
SUPPORT = "support-real-traffic-token"
TWILIO_BASIC = "Basic " + base64.b64encode(f"{ACCOUNT_SID}:{AUTH_TOKEN}".encode()).decode()


# --- helpers ------------------------------------------------------------------------------


def twilio_media(
    url: str, content_type: str, *, user: str, body: str = "", to: str = BUSINESS
) -> dict[str, str]:
    """A Twilio inbound delivery carrying one media (``MediaUrl0``)."""
    return twilio_inbound_params(
        sid=new_twilio_sid(),
        from_=user,
        to=to,
        body=body,
        account_sid=ACCOUNT_SID,
        media=[(url, content_type)],
    )


def meta_media(kind: str, media_id: str, mime_type: str, *, user: str, **kw: Any) -> Any:
    """A Meta delivery with one media message (to the default business number)."""
    message = meta_media_message(kind, media_id=media_id, mime_type=mime_type, from_=user, **kw)
    return meta_payload([message])


def user_text(call: dict[str, Any]) -> str:
    """The text of the last user message of a chat-completions call."""
    message = next(m for m in reversed(call["messages"]) if m.get("role") == "user")
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def agent_call_index(fake: FakeLLM, n: int = -1) -> int:
    """The index in ``fake.requests`` of the ``n``-th agent call (for ``fake.images``)."""
    return [i for i, call in enumerate(fake.requests) if call.model == AGENT_MODEL][n]


def gets(fake: FakeTwilioAPI | FakeGraphAPI) -> list[dict[str, Any]]:
    """The media requests a fake provider saw (sends are POSTs)."""
    return [r for r in fake.requests if r["method"] == "GET"]


async def received(gw: Gateway, message_id: str) -> dict[str, Any]:
    found = [
        e for e in await gw.events("message.received") if e["data"]["message_id"] == message_id
    ]
    assert len(found) == 1, f"{len(found)} message.received for {message_id}"
    return found[0]


async def raw_records(gw: Gateway) -> list[dict[str, Any]]:
    return [json.loads(f[b"meta"]) for _id, f in await gw.store.redis.xrange(gw.store.keys.raw)]


async def settle(gw: Gateway, n_received: int) -> None:
    """Wait until ``n_received`` messages were turned and the worker is idle."""
    assert len(await gw.wait_events("message.received", n_received)) >= n_received
    await gw.idle()
    await asyncio.sleep(0.2)  # anything wrongly retried or sent late would show now


# --- 1. voice notes are transcribed and read as typed ------------------------------------


async def test_twilio_and_meta_voice_notes_are_fetched_transcribed_and_answered(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, fake_graph: FakeGraphAPI
) -> None:
    gw: Gateway = await start_gateway(llm_profiles_path=MEDIA_PROFILES, support_token=SUPPORT)
    fake_llm.responder = echo_responder
    twilio_said, meta_said = "gastei cinquenta reais no mercado", "paguei cento e vinte de luz"

    # Twilio: MediaUrl0 with basic auth → 307 to the CDN without credentials
    fake_llm.script_transcripts(twilio_said)
    note = fake_twilio.add_media(VOICE, "audio/ogg", filename="voice.ogg")
    params = twilio_media(note.url, "audio/ogg", user="+5511999990001")
    assert (await gw.twilio(params=params)).status == 200
    [reply] = await fake_twilio.wait_for_messages(1, timeout=10)
    assert reply["Body"] == f"Recebi: {twilio_said}"
    assert reply["To"] == "whatsapp:+5511999990001"
    first, cdn = gets(fake_twilio)
    assert first["path"] == note.url.removeprefix(fake_twilio.base_url)
    assert (first["authorization"], first["status"]) == (TWILIO_BASIC, 307)
    assert cdn["path"].startswith(f"/twiliocdn/{ACCOUNT_SID}/")
    assert (cdn["authorization"], cdn["status"]) == (None, 200)  # no credentials to the CDN
    assert note.completed == 1
    [call] = await fake_llm.wait_for_transcriptions(1)
    assert (call.model, call.language, call.audio, call.status) == (
        TRANSCRIBE_MODEL,
        "pt",
        VOICE,
        200,
    )
    assert (call.filename or "").endswith(".ogg")
    assert user_text(agent_calls(fake_llm)[-1]) == twilio_said
    event = await received(gw, params["MessageSid"])
    assert event["data"]["transcript"] == twilio_said
    assert event["data"]["text"] == twilio_said
    assert event["data"].get("media_problem") is None
    # Twilio retries the delivery: not fetched, transcribed or answered again
    assert (await gw.twilio(params=params)).status == 200
    await settle(gw, 1)
    assert (len(gets(fake_twilio)), len(fake_llm.transcriptions), len(fake_twilio.messages)) == (
        2,
        1,
        1,
    )
    # support reads the transcript in the thread's history
    thread = f"twilio:{BUSINESS}:+5511999990001"
    async with gw.session.get(
        gw.url(f"/support/threads/{thread}"), headers={"Authorization": f"Bearer {SUPPORT}"}
    ) as resp:
        assert resp.status == 200
        shown = (await resp.json())["transcript"]
    assert shown[0] == {"role": "user", "content": twilio_said}

    # Meta: GET /{version}/{media-id} (bearer) → url → download (bearer)
    fake_llm.script_transcripts(meta_said)
    audio = fake_graph.add_media(VOICE, "audio/ogg; codecs=opus")
    payload = meta_media("audio", audio.media_id, "audio/ogg; codecs=opus", user="+5511999990002")
    wamid = payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    assert (await gw.meta(payload)).status == 200
    [sent] = await fake_graph.wait_for_messages(1, timeout=10)
    assert sent["to"] == "5511999990002"
    assert sent["text"]["body"] == f"Recebi: {meta_said}"
    info, download = gets(fake_graph)
    assert info["path"] == f"/{API_VERSION}/{audio.media_id}"
    assert download["path"].startswith(f"/whatsapp_business/attachments/?mid={audio.media_id}")
    bearer = f"Bearer {META_TOKEN}"
    assert [(r["authorization"], r["status"]) for r in (info, download)] == [(bearer, 200)] * 2
    assert audio.completed == 1
    calls = await fake_llm.wait_for_transcriptions(2)
    assert (calls[1].language, calls[1].audio) == ("pt", VOICE)
    assert user_text(agent_calls(fake_llm)[-1]) == meta_said
    assert (await received(gw, wamid))["data"]["transcript"] == meta_said
    await gw.idle()


async def test_the_guard_reads_a_voice_notes_transcript_as_typed(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(llm_profiles_path=MEDIA_PROFILES)
    fake_llm.script_transcripts("quero falar com uma pessoa")
    note = fake_twilio.add_media(VOICE, "audio/ogg")
    params = twilio_media(note.url, "audio/ogg", user="+5511999990020")
    assert (await gw.twilio(params=params)).status == 200
    [reply] = await fake_twilio.wait_for_messages(1, timeout=10)
    await settle(gw, 1)
    assert reply["Body"] == GUARD_RESPONSE_HUMAN_REQUEST
    assert len(await gw.events("guard.preempted")) == 1
    assert len(await gw.events("session.human_handoff.requested")) == 1
    assert agent_calls(fake_llm) == []
    data = (await received(gw, params["MessageSid"]))["data"]
    assert data["transcript"] == "quero falar com uma pessoa"


async def test_a_voice_note_while_a_person_attends_is_transcribed_for_support(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    """Issue 12: the transcript "is stored on the message.received event and shown to
    support"; with a person on the thread, support is the one who reads it."""
    gw: Gateway = await start_gateway(llm_profiles_path=MEDIA_PROFILES, support_token=SUPPORT)
    user = "+5511999990023"
    assert (await gw.twilio("quero falar com uma pessoa", user=user)).status == 200
    await fake_twilio.wait_for_messages(1, timeout=10)
    await settle(gw, 1)
    thread = f"twilio:{BUSINESS}:{user}"
    state = await gw.store.threads.state(thread)
    assert state is not None
    assert state.with_person
    fake_llm.script_transcripts("a fatura veio com 300 a mais")
    note = fake_twilio.add_media(VOICE, "audio/ogg")
    params = twilio_media(note.url, "audio/ogg", user=user)
    assert (await gw.twilio(params=params)).status == 200
    await settle(gw, 2)
    assert len(fake_twilio.messages) == 1  # the bot stays silent while a person attends
    data = (await received(gw, params["MessageSid"]))["data"]
    assert data.get("transcript") == "a fatura veio com 300 a mais", (
        "support gets no transcript of a voice note sent during a handoff"
    )


async def test_a_failed_or_empty_transcription_asks_to_type_and_is_not_retried(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    gw: Gateway = await start_gateway(llm_profiles_path=MEDIA_PROFILES)
    fake_llm.script_transcripts(error(500), "")  # the endpoint fails, then hears nothing
    failing = twilio_media(
        fake_twilio.add_media(VOICE, "audio/ogg").url, "audio/ogg", user="+5511999990021"
    )
    assert (await gw.twilio(params=failing)).status == 200
    await fake_twilio.wait_for_messages(1, timeout=10)
    await gw.idle()
    silent = twilio_media(
        fake_twilio.add_media(VOICE, "audio/ogg").url, "audio/ogg", user="+5511999990022"
    )
    assert (await gw.twilio(params=silent)).status == 200
    await fake_twilio.wait_for_messages(2, timeout=10)
    await settle(gw, 2)
    assert [m["Body"] for m in fake_twilio.messages] == [ASK_AUDIO, ASK_AUDIO]
    assert [c.status for c in fake_llm.transcriptions] == [500, 200]  # one try each
    assert (await received(gw, failing["MessageSid"]))["data"]["media_problem"] == (
        "transcription_failed"
    )
    assert (await received(gw, silent["MessageSid"]))["data"]["media_problem"] == (
        "empty_transcript"
    )
    assert agent_calls(fake_llm) == []


# --- 2. a voice note that cannot be used: the couple is asked to type it ------------------


async def test_voice_note_without_a_transcription_profile_asks_to_type_without_the_model(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    note = fake_twilio.add_media(VOICE, "audio/ogg")
    params = twilio_media(note.url, "audio/ogg", user="+5511999990003")
    assert (await gateway.twilio(params=params)).status == 200
    [reply] = await fake_twilio.wait_for_messages(1, timeout=10)
    assert reply["Body"] == ASK_AUDIO
    await settle(gateway, 1)
    data = (await received(gateway, params["MessageSid"]))["data"]
    assert data["media_problem"] == "no_transcription"
    assert data.get("transcript") is None
    assert fake_llm.call_count == 0  # neither the router nor the agent
    assert fake_llm.transcriptions == []
    assert gets(fake_twilio) == []  # nothing to transcribe it with: not even downloaded
    assert [e["data"]["text"] for e in await gateway.events("message.sent")] == [ASK_AUDIO]


async def test_voice_note_over_the_size_limit_is_not_transcribed(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, fake_graph: FakeGraphAPI
) -> None:
    gw: Gateway = await start_gateway(llm_profiles_path=MEDIA_PROFILES, mel_max_media_bytes=4096)
    big = VOICE * 512  # ~4.4 MB: more than loopback buffers take before the fetcher hangs up
    announced = fake_twilio.add_media(big, "audio/ogg")  # Content-Length over the limit
    streamed = fake_twilio.add_media(big, "audio/ogg", chunked=True)  # no length: streaming
    streamed.chunk_size = 1024
    lying = fake_graph.add_media(big, "audio/ogg", chunked=True, declared_size=1000)
    lying.chunk_size = 1024
    sids = []
    for user, media in (("+5511999990004", announced), ("+5511999990005", streamed)):
        params = twilio_media(media.url, "audio/ogg", user=user)
        sids.append(params["MessageSid"])
        assert (await gw.twilio(params=params)).status == 200
    payload = meta_media("audio", lying.media_id, "audio/ogg", user="+5511999990006")
    wamid = payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    assert (await gw.meta(payload)).status == 200

    replies = await fake_twilio.wait_for_messages(2, timeout=10)
    assert [m["Body"] for m in replies] == [ASK_AUDIO, ASK_AUDIO]
    [sent] = await fake_graph.wait_for_messages(1, timeout=10)
    assert sent["text"]["body"] == ASK_AUDIO
    await settle(gw, 3)
    for message_id in (*sids, wamid):
        assert (await received(gw, message_id))["data"]["media_problem"] == "too_large"
    assert fake_llm.transcriptions == []
    assert agent_calls(fake_llm) == []
    for media in (announced, streamed, lying):
        assert media.completed == 0, "the download was read to its end"
    # one download each, none retried
    cdn = [r for r in gets(fake_twilio) if r["path"].startswith("/twiliocdn/")]
    assert len(cdn) == 2
    assert len([r for r in gets(fake_graph) if "attachments" in r["path"]]) <= 1


async def test_a_download_the_provider_refuses_is_not_retried(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, fake_graph: FakeGraphAPI
) -> None:
    gw: Gateway = await start_gateway(llm_profiles_path=MEDIA_PROFILES)
    # a media URL of this account that Twilio does not know (404); a media id Graph refuses
    gone = (
        f"{fake_twilio.base_url}/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/"
        f"MM{'0' * 32}/Media/ME{'0' * 32}"
    )
    params = twilio_media(gone, "audio/ogg", user="+5511999990007")
    assert (await gw.twilio(params=params)).status == 200
    payload = meta_media("audio", "1234567890123456", "audio/ogg", user="+5511999990008")
    wamid = payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    assert (await gw.meta(payload)).status == 200

    [reply] = await fake_twilio.wait_for_messages(1, timeout=10)
    assert reply["Body"] == ASK_AUDIO
    [sent] = await fake_graph.wait_for_messages(1, timeout=10)
    assert sent["text"]["body"] == ASK_AUDIO
    await settle(gw, 2)
    await asyncio.sleep(0.5)
    for message_id in (params["MessageSid"], wamid):
        assert (await received(gw, message_id))["data"]["media_problem"] == "download_failed"
    assert [(r["authorization"], r["status"]) for r in gets(fake_twilio)] == [(TWILIO_BASIC, 404)]
    assert [(r["path"], r["status"]) for r in gets(fake_graph)] == [
        (f"/{API_VERSION}/1234567890123456", 400)
    ]
    assert fake_llm.transcriptions == []
    assert agent_calls(fake_llm) == []
    assert len(await gw.events("message.sent")) == 2


# --- 3. a forged media URL is never fetched ----------------------------------------------


async def test_forged_media_urls_and_redirects_elsewhere_are_not_fetched(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, fake_graph: FakeGraphAPI
) -> None:
    gw: Gateway = await start_gateway(llm_profiles_path=MEDIA_PROFILES)
    async with ForbiddenHost() as forbidden:
        # 1. a signed delivery whose MediaUrl0 points at another loopback server
        forged = (
            f"{forbidden.base_url}/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/"
            f"MM{'1' * 32}/Media/ME{'1' * 32}"
        )
        p1 = twilio_media(forged, "audio/ogg", user="+5511999990009")
        # 2. Twilio's own URL redirecting there
        redirected = fake_twilio.add_media(
            VOICE, "audio/ogg", redirect_to=f"{forbidden.base_url}/cdn/voice.ogg"
        )
        p2 = twilio_media(redirected.url, "audio/ogg", user="+5511999990010")
        # 3. Graph answering a download url there (the bearer token must not go there)
        elsewhere = fake_graph.add_media(
            VOICE, "audio/ogg", download_url=f"{forbidden.base_url}/whatsapp_business/x?mid=1"
        )
        p3 = meta_media("audio", elsewhere.media_id, "audio/ogg", user="+5511999990011")
        wamid = p3["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
        # 4. an image forged the same way, read by the vision agent
        p4 = twilio_media(forged, "image/jpeg", user="+5511999990012", body="nota")
        for params in (p1, p2, p4):
            assert (await gw.twilio(params=params)).status == 200
        assert (await gw.meta(p3)).status == 200

        replies = await fake_twilio.wait_for_messages(3, timeout=10)
        await fake_graph.wait_for_messages(1, timeout=10)
        await settle(gw, 4)
        assert forbidden.requests == []
        by_user = {m["To"]: m["Body"] for m in replies}
        assert by_user == {
            "whatsapp:+5511999990009": ASK_AUDIO,
            "whatsapp:+5511999990010": ASK_AUDIO,
            "whatsapp:+5511999990012": ASK_IMAGE,
        }
        assert fake_graph.messages[0]["text"]["body"] == ASK_AUDIO
        for message_id in (p1["MessageSid"], p2["MessageSid"], wamid, p4["MessageSid"]):
            data = (await received(gw, message_id))["data"]
            assert data["media_problem"] == "forbidden_host", message_id
        assert fake_llm.transcriptions == []
        assert agent_calls(fake_llm) == []
        assert redirected.completed == 0


# --- 4. images: an image part for a vision agent, the description otherwise ---------------


async def test_image_goes_to_a_vision_agent_as_an_image_part(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, fake_graph: FakeGraphAPI
) -> None:
    gw: Gateway = await start_gateway(llm_profiles_path=MEDIA_PROFILES)
    fake_llm.vision_models = frozenset({AGENT_MODEL})  # an image to the router would be a 400
    fake_llm.responder = lambda request: "Anotei: R$ 42,90 no mercado."

    photo = fake_twilio.add_media(RECEIPT, "image/jpeg")
    params = twilio_media(photo.url, "image/jpeg", user="+5511999990013", body="nota do mercado")
    assert (await gw.twilio(params=params)).status == 200
    [reply] = await fake_twilio.wait_for_messages(1, timeout=10)
    assert reply["Body"] == "Anotei: R$ 42,90 no mercado."
    [image] = fake_llm.images(agent_call_index(fake_llm))
    assert (image.content_type, image.data) == ("image/jpeg", RECEIPT)
    assert "nota do mercado" in user_text(agent_calls(fake_llm)[-1])
    assert all(
        not fake_llm.images(i) for i, c in enumerate(fake_llm.requests) if c.model == ROUTER_MODEL
    )
    assert photo.completed == 1
    assert all(c.status == 200 for c in fake_llm.requests)

    receipt = fake_graph.add_media(RECEIPT, "image/jpeg")
    payload = meta_media(
        "image", receipt.media_id, "image/jpeg", user="+5511999990014", caption="conta de luz"
    )
    assert (await gw.meta(payload)).status == 200
    [sent] = await fake_graph.wait_for_messages(1, timeout=10)
    assert sent["text"]["body"] == "Anotei: R$ 42,90 no mercado."
    [image] = fake_llm.images(agent_call_index(fake_llm))
    assert image.data == RECEIPT
    assert "conta de luz" in user_text(agent_calls(fake_llm)[-1])
    await settle(gw, 2)
    data = (await received(gw, params["MessageSid"]))["data"]
    assert data.get("media_problem") is None
    assert data["media"][0]["kind"] == "image"


async def test_image_without_a_vision_profile_is_not_downloaded_and_the_agent_reads_its_description(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    photo = fake_twilio.add_media(RECEIPT, "image/jpeg")
    params = twilio_media(photo.url, "image/jpeg", user="+5511999990015", body="nota do mercado")
    assert (await gateway.twilio(params=params)).status == 200
    await fake_twilio.wait_for_messages(1, timeout=10)
    await settle(gateway, 1)
    assert gets(fake_twilio) == []
    assert user_text(agent_calls(fake_llm)[-1]) == '[imagem recebida: legenda "nota do mercado"]'
    assert fake_llm.images(agent_call_index(fake_llm)) == []
    data = (await received(gateway, params["MessageSid"]))["data"]
    assert data["text"] == '[imagem recebida: legenda "nota do mercado"]'
    assert data.get("media_problem") is None


# --- 5. a Meta user known only by a username (BSUID) ---------------------------------------


async def test_bsuid_only_message_is_keyed_on_the_bsuid_and_answered_by_recipient(
    gateway: Gateway, fake_llm: FakeLLM, fake_graph: FakeGraphAPI
) -> None:
    thread = f"meta:{META_BUSINESS}:{BSUID}"
    with capture_logs(processors=[merge_contextvars]) as logs:
        assert (await gateway.meta(fixture_bytes("meta/bsuid_only_text.json"))).status == 200
        [sent] = await fake_graph.wait_for_messages(1, timeout=10)
        await settle(gateway, 1)
    assert sent["recipient"] == BSUID
    assert "to" not in sent
    assert sent["phone_number_id"] == META_PHONE_ID
    assert user_text(agent_calls(fake_llm)[-1]) == "gastei 120 no mercado"
    [event] = await gateway.events("message.received")
    assert event["thread_id"] == thread
    assert event["data"]["profile_name"] == "Bia"
    assert [e["thread_id"] for e in await gateway.events("message.sent")] == [thread]
    history = [json.loads(h) for h in await gateway.store.threads.history(thread)]
    assert [h["role"] for h in history] == ["user", "assistant"]
    state = await gateway.store.threads.state(thread)
    assert state is not None
    assert state.user_number == BSUID
    [record] = await raw_records(gateway)
    assert record["thread_ids"] == [thread]
    text = repr(logs)
    assert BSUID not in text, "the BSUID is logged unmasked"
    assert "BR.****5843" in text

    # Meta's status for that reply names the recipient by BSUID only
    status = meta_fixture("bsuid_statuses.json")
    status["entry"][0]["changes"][0]["value"]["statuses"][0]["id"] = sent["id"]
    assert (await gateway.meta(status)).status == 200
    [read] = await gateway.wait_events("message.status", 1)
    assert (read["thread_id"], read["data"]["status"]) == (thread, "read")
    assert read["data"]["in_reply_to"] == event["data"]["message_id"]

    # the message names no sender at all, the change's only contact has a BSUID
    assert (await gateway.meta(fixture_bytes("meta/bsuid_contact_only_text.json"))).status == 200
    # rollout: phone and BSUID together → keyed (and answered) on the phone
    assert (await gateway.meta(fixture_bytes("meta/bsuid_with_phone_text.json"))).status == 200
    await fake_graph.wait_for_messages(3, timeout=10)
    await settle(gateway, 3)
    contact_only, with_phone = fake_graph.messages[1:]
    assert (contact_only.get("recipient"), contact_only.get("to")) == ("BR.8830127744019928", None)
    assert (with_phone.get("to"), with_phone.get("recipient")) == ("5511999990000", None)
    threads = {e["thread_id"] for e in await gateway.events("message.received")}
    assert threads == {
        thread,
        f"meta:{META_BUSINESS}:BR.8830127744019928",
        f"meta:{META_BUSINESS}:+5511999990000",
    }


# --- 6. refused today: an interactive without its object, a group status -----------------


async def test_interactive_without_object_and_group_statuses_are_recorded_not_answered(
    gateway: Gateway, fake_llm: FakeLLM, fake_graph: FakeGraphAPI
) -> None:
    interactive = meta_fixture("interactive_without_object.json")
    wamid = interactive["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    groups = meta_fixture("group_statuses.json")
    status_ids = [s["id"] for s in groups["entry"][0]["changes"][0]["value"]["statuses"]]
    assert (await gateway.meta(fixture_bytes("meta/interactive_without_object.json"))).status == 200
    assert (await gateway.meta(fixture_bytes("meta/group_statuses.json"))).status == 200
    await settle(gateway, 1)
    data = (await received(gateway, wamid))["data"]
    assert data["kind"] == "unsupported"
    statuses = await gateway.events("message.status")
    assert sorted(e["data"]["provider_message_id"] for e in statuses) == sorted(status_ids)
    assert {e["data"]["provider_message_id"]: e["data"]["status"] for e in statuses} == dict(
        zip(status_ids, ["sent", "failed"], strict=True)
    )
    failed = next(e for e in statuses if e["data"]["status"] == "failed")
    assert failed["data"]["error_code"] == "131009"
    records = await raw_records(gateway)
    assert [r["status"] for r in records] == [200, 200]
    assert records[0]["message_ids"] == [wamid]
    assert all("rejected" not in r for r in records)
    assert fake_graph.messages == []
    assert fake_llm.call_count == 0
    assert await gateway.events("message.sent") == []


# --- 7. one bad item does not refuse a batch ------------------------------------------------


async def test_batch_with_bad_items_keeps_the_good_ones_and_records_each_bad_one(
    gateway: Gateway, fake_llm: FakeLLM, fake_graph: FakeGraphAPI
) -> None:
    fake_llm.responder = echo_responder
    resp = await gateway.meta(fixture_bytes("meta/batch_with_bad_items.json"))
    assert resp.status == 200
    [sent] = await fake_graph.wait_for_messages(1, timeout=10)
    await settle(gateway, 2)
    assert sent["to"] == "5511999990000"
    assert sent["text"]["body"] == "Recebi: paguei a luz: 180"
    assert (await received(gateway, "wamid.BATCH-OK-1"))["data"]["kind"] == "text"
    assert (await received(gateway, "wamid.BATCH-OK-2"))["data"]["kind"] == "reaction"
    [status] = await gateway.events("message.status")
    assert status["data"]["provider_message_id"] == "wamid.BATCH-STATUS-OK"
    [record] = await raw_records(gateway)
    assert record["status"] == 200
    assert record["message_ids"] == ["wamid.BATCH-OK-1", "wamid.BATCH-OK-2"]
    rejected = {r["path"]: r for r in record["rejected"]}
    assert set(rejected) == {
        "entry[0].changes[0].value.messages[1]",
        "entry[0].changes[0].value.statuses[1]",
        "entry[0].changes[1].value",
        "entry[1]",
    }
    bad_time = rejected["entry[0].changes[0].value.messages[1]"]
    assert bad_time["message_id"] == "wamid.BATCH-BAD-TIMESTAMP"
    assert "timestamp" in bad_time["reason"]
    assert "ontem" in bad_time["reason"]
    bad_status = rejected["entry[0].changes[0].value.statuses[1]"]
    assert bad_status["message_id"] == "wamid.BATCH-STATUS-BAD"
    assert "status" in bad_status["reason"]
    assert "display_phone_number" in rejected["entry[0].changes[1].value"]["reason"]
    assert "not an object" in rejected["entry[1]"]["reason"]
    assert all(r["reason"] for r in record["rejected"])
    assert len(fake_graph.messages) == 1  # the reaction is recorded, not answered


# --- 8. several business numbers: the reply leaves from the one written to ----------------


async def test_replies_leave_from_the_number_written_to_and_unserved_numbers_are_not_answered(
    start_gateway: Any, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI, fake_graph: FakeGraphAPI
) -> None:
    second_number = "+14155550100"
    service_form = dict(parse_qsl(fixture_bytes("twilio/inbound_messaging_service.form").decode()))
    service = fake_twilio.add_messaging_service(service_form["MessagingServiceSid"])
    second_id = fake_graph.add_phone_number_id("107777777777777")
    gw: Gateway = await start_gateway(
        twilio_numbers=f"whatsapp:{BUSINESS}, {second_number},{service}",
        meta_phone_number_ids=f"{META_PHONE_ID},{second_id}",
    )
    fake_llm.responder = echo_responder

    to_first = twilio_inbound_params(
        sid=new_twilio_sid(), from_="+5511977770001", to=BUSINESS, body="oi 1",
        account_sid=ACCOUNT_SID,
    )  # fmt: skip
    to_second = twilio_inbound_params(
        sid=new_twilio_sid(), from_="+5511977770002", to=second_number, body="oi 2",
        account_sid=ACCOUNT_SID,
    )  # fmt: skip
    not_served = twilio_inbound_params(
        sid=new_twilio_sid(), from_="+5511977770003", to="+14155559999", body="oi 3",
        account_sid=ACCOUNT_SID,
    )  # fmt: skip
    for params in (to_first, to_second, service_form, not_served):
        assert (await gw.twilio(params=params)).status == 200

    meta_first = meta_payload([meta_text_message("oi 4", from_="+5511977770004")])
    meta_second = meta_payload(
        [meta_text_message("oi 5", from_="+5511977770005")],
        display_phone_number="+15550001111",
        phone_number_id=second_id,
    )
    meta_unserved = meta_payload(
        [meta_text_message("oi 6", from_="+5511977770006")],
        display_phone_number="+15550002222",
        phone_number_id="999000999000999",
    )
    for payload in (meta_first, meta_second, meta_unserved):
        assert (await gw.meta(payload)).status == 200

    await fake_twilio.wait_for_messages(3, timeout=10)
    await fake_graph.wait_for_messages(2, timeout=10)
    await settle(gw, 7)

    by_user = {m["To"]: m for m in fake_twilio.messages}
    assert set(by_user) == {
        "whatsapp:+5511977770001",
        "whatsapp:+5511977770002",
        "whatsapp:+5511999990000",  # the Messaging Service fixture's sender
    }
    assert by_user["whatsapp:+5511977770001"]["From"] == f"whatsapp:{BUSINESS}"
    assert by_user["whatsapp:+5511977770002"]["From"] == f"whatsapp:{second_number}"
    through_service = by_user["whatsapp:+5511999990000"]
    assert through_service.get("MessagingServiceSid") == service
    assert not through_service.get("From")
    assert through_service["Body"] == "Recebi: gastei 50 no mercado"

    meta_by_user = {m["to"]: m for m in fake_graph.messages}
    assert set(meta_by_user) == {"5511977770004", "5511977770005"}
    assert meta_by_user["5511977770004"]["phone_number_id"] == META_PHONE_ID
    assert meta_by_user["5511977770005"]["phone_number_id"] == second_id
    posted = [
        r["path"] for r in fake_graph.requests if r["method"] == "POST" and r["json"].get("to")
        and r["json"].get("type") == "text"
    ]  # fmt: skip
    assert sorted(posted) == sorted(
        [f"/{API_VERSION}/{META_PHONE_ID}/messages", f"/{API_VERSION}/{second_id}/messages"]
    )

    unserved_id = meta_unserved["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    for message_id in (not_served["MessageSid"], unserved_id):
        data = (await received(gw, message_id))["data"]
        assert data["not_answered"] == "not_served", message_id
    for message_id in (to_first["MessageSid"], to_second["MessageSid"]):
        assert (await received(gw, message_id))["data"].get("not_answered") is None
    assert len(agent_calls(fake_llm)) == 5  # the two not served never reach the model
    assert len(await gw.events("message.sent")) == 5

    # read receipts (and the typing indicator) leave from the number written to
    meta_second_id = meta_second["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    receipts = {r["message_id"]: r for r in fake_graph.read_receipts}
    assert receipts[meta_second_id]["phone_number_id"] == second_id


async def test_our_number_inside_a_messaging_service_is_still_served(
    gateway: Gateway, fake_llm: FakeLLM, fake_twilio: FakeTwilioAPI
) -> None:
    """Twilio adds ``MessagingServiceSid`` to every inbound message whose number belongs to
    a Messaging Service (tests/data/twilio/inbound_messaging_service.form). Our number
    (TWILIO_WHATSAPP_FROM, no TWILIO_NUMBERS) in a service is still our number."""
    service = fake_twilio.add_messaging_service()
    params = twilio_inbound_params(
        sid=new_twilio_sid(), from_="+5511977770008", to=BUSINESS, body="quanto gastamos?",
        account_sid=ACCOUNT_SID, MessagingServiceSid=service,
    )  # fmt: skip
    assert (await gateway.twilio(params=params)).status == 200
    await settle(gateway, 1)
    data = (await received(gateway, params["MessageSid"]))["data"]
    assert data.get("not_answered") is None, "a message to our own number is 'not_served'"
    [reply] = await fake_twilio.wait_for_messages(1, timeout=5)
    assert reply.get("MessagingServiceSid") == service or reply.get("From") == (
        f"whatsapp:{BUSINESS}"
    )
    assert len(agent_calls(fake_llm)) == 1


async def test_a_message_to_a_number_we_do_not_serve_shows_no_typing_indicator(
    start_gateway: Any, fake_llm: FakeLLM, fake_graph: FakeGraphAPI
) -> None:
    """MetaSender.mark_read: "use typing=False for messages that will not be answered"."""
    other = fake_graph.add_phone_number_id("999000999000999")  # the app's, served elsewhere
    gw: Gateway = await start_gateway(meta_phone_number_ids=META_PHONE_ID)
    payload = meta_payload(
        [meta_text_message("oi", from_="+5511977770007")],
        display_phone_number="+15550002222",
        phone_number_id=other,
    )
    assert (await gw.meta(payload)).status == 200
    await settle(gw, 1)
    [event] = await gw.events("message.received")
    assert event["data"]["not_answered"] == "not_served"
    assert fake_graph.messages == []
    assert fake_llm.call_count == 0
    typing = [r for r in fake_graph.read_receipts if r.get("typing_indicator")]
    assert typing == [], "WhatsApp shows 'typing…' from a number we do not serve, forever silent"


# --- 9. edits and deletes --------------------------------------------------------------------


async def test_an_edit_reaches_the_agent_as_a_correction_and_a_delete_is_recorded(
    gateway: Gateway, fake_llm: FakeLLM, fake_graph: FakeGraphAPI
) -> None:
    fake_llm.responder = lambda request: "Anotado."
    original = new_wamid()
    first = meta_payload(
        [meta_text_message("gastei 50 no mercado", id=original)],
        display_phone_number=META_BUSINESS,
    )
    assert (await gateway.meta(first)).status == 200
    await fake_graph.wait_for_messages(1, timeout=10)
    await gateway.idle()

    edit = meta_fixture("edit.json")
    edited = edit["entry"][0]["changes"][0]["value"]["messages"][0]
    edited["edit"]["original_message_id"] = original
    assert (await gateway.meta(edit)).status == 200
    await fake_graph.wait_for_messages(2, timeout=10)
    await gateway.idle()
    said = user_text(agent_calls(fake_llm)[-1])
    assert "gastei 500 no mercado" in said
    assert "gastei 50 no mercado" in said  # the earlier text it corrects
    assert said != "gastei 500 no mercado"  # read as a correction, not a new expense
    assert (await received(gateway, edited["id"]))["data"]["kind"] == "edit"

    revoke = meta_fixture("revoke.json")
    deleted = revoke["entry"][0]["changes"][0]["value"]["messages"][0]
    deleted["revoke"]["original_message_id"] = original
    assert (await gateway.meta(revoke)).status == 200
    await settle(gateway, 3)
    data = (await received(gateway, deleted["id"]))["data"]
    assert data["kind"] == "delete"
    assert len(fake_graph.messages) == 2  # the delete is not answered
    assert len(agent_calls(fake_llm)) == 2
    thread = f"meta:{META_BUSINESS}:+5511999990000"
    assert {e["thread_id"] for e in await gateway.events("message.received")} == {thread}


# --- 10. reactions, stickers, polls: recorded, silent; request_welcome: the greeting -------


async def test_silent_kinds_are_recorded_and_request_welcome_gets_the_greeting(
    start_gateway: Any, fake_llm: FakeLLM, fake_graph: FakeGraphAPI
) -> None:
    welcome = "Oi! Eu sou a mel. Posso anotar os gastos de vocês dois."
    # a vision agent and transcription: even so, a sticker is not downloaded
    gw: Gateway = await start_gateway(welcome_message=welcome, llm_profiles_path=MEDIA_PROFILES)
    silent = {
        "sticker.json": ["media"],
        "unsupported_edit_and_poll.json": ["unsupported", "unsupported"],
        "system_user_changed_user_id.json": ["unsupported"],
    }
    ids: dict[str, str] = {}
    for name, kinds in silent.items():
        messages = meta_fixture(name)["entry"][0]["changes"][0]["value"]["messages"]
        ids.update({m["id"]: kind for m, kind in zip(messages, kinds, strict=True)})
        assert (await gw.meta(fixture_bytes(f"meta/{name}"))).status == 200
    reaction = meta_reaction_message(new_wamid(), "👍", from_="+5511999990000")
    ids[reaction["id"]] = "reaction"
    assert (
        await gw.meta(meta_payload([reaction], display_phone_number=META_BUSINESS))
    ).status == 200
    await settle(gw, len(ids))
    for message_id, kind in ids.items():
        assert (await received(gw, message_id))["data"]["kind"] == kind, message_id
    texts = {
        e["data"]["message_id"]: e["data"]["text"] for e in await gw.events("message.received")
    }
    assert "enquete" in texts["wamid.HBgNNTUxMTk5OTk5MDAwMBUCABIYFjNFQjBVTlNVUC1QT0xMLTAwMQA="]
    assert fake_graph.messages == []
    assert gets(fake_graph) == []  # a sticker is not downloaded
    assert fake_llm.call_count == 0
    typing = [r["message_id"] for r in fake_graph.read_receipts if r.get("typing_indicator")]
    assert typing == [], "typing shown for messages that are never answered"
    assert len(await raw_records(gw)) == len(silent) + 1

    greeting = meta_fixture("request_welcome.json")
    wamid = greeting["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    assert (await gw.meta(greeting)).status == 200
    [sent] = await fake_graph.wait_for_messages(1, timeout=10)
    assert sent["text"]["body"] == welcome
    assert sent["to"] == "5511999990000"
    await settle(gw, len(ids) + 1)
    assert (await received(gw, wamid))["data"]["kind"] == "welcome"
    assert fake_llm.call_count == 0  # the greeting needs no model
    [event] = await gw.events("message.sent")
    assert event["data"]["text"] == welcome

    # a submitted Flow helps: the agent reads the form's answers
    assert (await gw.meta(fixture_bytes("meta/flow_nfm_reply.json"))).status == 200
    await fake_graph.wait_for_messages(2, timeout=10)
    await settle(gw, len(ids) + 2)
    said = user_text(agent_calls(fake_llm)[-1])
    assert "categoria: mercado" in said
    assert "valor: 120,50" in said
    assert "flow_token" not in said
