"""OpenAICompatibleTranscriber: the openai SDK's audio API against the fake's
``/audio/transcriptions`` (multipart parsed as the real endpoint parses it)."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from pathlib import Path

import aiohttp
import openai
import pytest

from agent.errors import (
    AgentError,
    TranscriptionError,
    TranscriptionTimeout,
    TranscriptionUnavailable,
)
from agent.profiles import LLMProfiles, load_profiles
from agent.transcription import OpenAICompatibleTranscriber
from tests.fakes.llm import (
    DEFAULT_TRANSCRIPT,
    FakeLLM,
    TranscriptionCall,
    error,
    hang,
    raw,
    transcribed,
)
from tests.integration.conftest import profiles_with

VOICE_NOTE = (Path(__file__).parent.parent / "data" / "voice_note.ogg").read_bytes()
OGG = "audio/ogg; codecs=opus"  # what WhatsApp says a voice note is

MakeTranscriber = Callable[..., OpenAICompatibleTranscriber]


@pytest.fixture
async def make_transcriber() -> AsyncIterator[MakeTranscriber]:
    """``make_transcriber(base_url=..., api_key=..., profiles=..., environ=...)``."""
    made: list[OpenAICompatibleTranscriber] = []

    def make(
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        profiles: LLMProfiles | None = None,
        environ: dict[str, str] | None = None,
    ) -> OpenAICompatibleTranscriber:
        transcriber = OpenAICompatibleTranscriber(
            profiles or load_profiles(), base_url=base_url, api_key=api_key, environ=environ or {}
        )
        made.append(transcriber)
        return transcriber

    yield make
    for transcriber in made:
        await transcriber.aclose()


async def test_a_voice_note_is_sent_as_the_real_api_wants_and_its_text_returned(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber
) -> None:
    fake_llm.script_transcripts("  Gastei cinquenta reais no mercado hoje.  ")

    transcript = await make_transcriber(base_url=fake_llm.base_url).transcribe(
        VOICE_NOTE, filename="voice_note.ogg", content_type=OGG
    )

    assert transcript.text == "Gastei cinquenta reais no mercado hoje."
    assert (transcript.model, transcript.language) == ("gpt-4o-mini-transcribe", "pt")
    sent = fake_llm.last_transcription
    assert sent.path == "/v1/audio/transcriptions"
    assert sent.status == 200
    assert (sent.model, sent.language, sent.response_format) == (
        "gpt-4o-mini-transcribe",
        "pt",
        "json",
    )
    assert (sent.filename, sent.content_type) == ("voice_note.ogg", OGG)
    assert sent.audio == VOICE_NOTE
    assert sent.headers["Authorization"] == "Bearer not-needed"
    assert fake_llm.call_count == 0  # no chat completion


async def test_token_usage_is_metered_at_the_profile_prices(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber
) -> None:
    fake_llm.script_transcripts(transcribed("oi", input_tokens=1000, output_tokens=100))

    transcript = await make_transcriber(base_url=fake_llm.base_url).transcribe(
        VOICE_NOTE, filename="a.ogg", content_type=OGG
    )

    # packaged gpt-4o-mini-transcribe: 3.00 (audio) and 5.00 USD per Mtok
    assert (transcript.usage.prompt_tokens, transcript.usage.completion_tokens) == (1000, 100)
    assert transcript.usage.cost_micro_usd == 3000 + 500
    assert (transcript.usage.calls, transcript.seconds) == (1, None)


async def test_duration_usage_is_metered_per_minute(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber
) -> None:
    profiles = profiles_with(
        transcription={"model": "whisper-1", "price_per_minute": Decimal("0.006")}
    )
    fake_llm.script_transcripts(transcribed("oi", seconds=30))

    transcript = await make_transcriber(base_url=fake_llm.base_url, profiles=profiles).transcribe(
        VOICE_NOTE, filename="a.ogg", content_type=OGG
    )

    assert transcript.seconds == 30
    assert transcript.usage.cost_micro_usd == 3000  # half a minute at US$ 0.006
    assert fake_llm.last_transcription.model == "whisper-1"


async def test_the_profile_language_is_sent(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber
) -> None:
    profiles = profiles_with(transcription={"language": "es"})

    transcript = await make_transcriber(base_url=fake_llm.base_url, profiles=profiles).transcribe(
        VOICE_NOTE, filename="a.ogg", content_type=OGG
    )

    assert fake_llm.last_transcription.language == "es"
    assert transcript.text == DEFAULT_TRANSCRIPT


async def test_a_nameless_voice_note_gets_the_extension_of_its_type(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber
) -> None:
    transcriber = make_transcriber(base_url=fake_llm.base_url)

    await transcriber.transcribe(VOICE_NOTE, filename="", content_type=OGG)
    await transcriber.transcribe(VOICE_NOTE, filename="wamid.HBgM", content_type="audio/mpeg")

    assert [call.filename for call in fake_llm.transcriptions] == ["audio.ogg", "wamid.HBgM.mp3"]
    assert {call.status for call in fake_llm.transcriptions} == {200}


async def test_a_format_the_endpoint_cannot_read_is_an_error_with_its_reason(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber
) -> None:
    with pytest.raises(TranscriptionError) as caught:
        await make_transcriber(base_url=fake_llm.base_url).transcribe(
            b"#!AMR\n...", filename="voice", content_type="audio/amr"
        )

    assert caught.value.status == 400
    assert caught.value.reason.startswith("HTTP 400: Invalid file format.")
    assert fake_llm.last_transcription.filename == "voice"


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_http_errors_are_transcription_errors_without_retries(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber, status: int
) -> None:
    fake_llm.script_transcripts(error(status))

    with pytest.raises(TranscriptionError) as caught:
        await make_transcriber(base_url=fake_llm.base_url).transcribe(
            VOICE_NOTE, filename="a.ogg", content_type=OGG
        )

    assert type(caught.value) is TranscriptionError
    assert caught.value.status == status
    assert str(caught.value) == f"transcription: HTTP {status}"
    assert len(fake_llm.transcriptions) == 1


async def test_the_key_is_required_and_never_shown(make_transcriber: MakeTranscriber) -> None:
    async with FakeLLM.running(api_key="sk-right") as fake:
        good = make_transcriber(base_url=fake.base_url, api_key="sk-right")
        assert (await good.transcribe(VOICE_NOTE, filename="a.ogg", content_type=OGG)).text

        bad = make_transcriber(base_url=fake.base_url, api_key="sk-wrong")
        with pytest.raises(TranscriptionError) as caught:
            await bad.transcribe(VOICE_NOTE, filename="a.ogg", content_type=OGG)

    assert caught.value.status == 401
    assert "sk-wrong" not in str(caught.value)
    assert [call.status for call in fake.transcriptions] == [200, 401]
    assert fake.transcriptions[1].audio is None  # refused before the form was read


async def test_the_profile_can_have_its_own_endpoint_and_key(
    make_transcriber: MakeTranscriber,
) -> None:
    async with FakeLLM.running(api_key="stt-key") as stt, FakeLLM.running() as default:
        profiles = profiles_with(transcription={"base_url": stt.base_url, "api_key_env": "STT_KEY"})
        transcriber = make_transcriber(
            base_url=default.base_url, profiles=profiles, environ={"STT_KEY": "stt-key"}
        )

        await transcriber.transcribe(VOICE_NOTE, filename="a.ogg", content_type=OGG)

    assert len(stt.transcriptions) == 1
    assert stt.transcriptions[0].headers["Authorization"] == "Bearer stt-key"
    assert default.transcriptions == []


async def test_a_hanging_endpoint_times_out_at_the_profile_timeout(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber
) -> None:
    profiles = profiles_with(transcription={"timeout_seconds": 0.2})
    fake_llm.script_transcripts(hang())

    started = time.perf_counter()
    with pytest.raises(TranscriptionTimeout, match=r"no answer within 0\.2s"):
        await make_transcriber(base_url=fake_llm.base_url, profiles=profiles).transcribe(
            VOICE_NOTE, filename="a.ogg", content_type=OGG
        )

    assert 0.15 < time.perf_counter() - started < 2
    assert len(fake_llm.transcriptions) == 1
    assert fake_llm.transcriptions[0].status == 0  # received, never answered


async def test_no_transcription_profile_is_unavailable_without_a_call(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber
) -> None:
    base = load_profiles()
    without = LLMProfiles(base.profiles, "my-profiles.yaml")
    transcriber = make_transcriber(base_url=fake_llm.base_url, profiles=without)

    with pytest.raises(TranscriptionUnavailable) as caught:
        await transcriber.transcribe(VOICE_NOTE, filename="a.ogg", content_type=OGG)

    assert not transcriber.is_configured()
    assert caught.value.reason == "no 'transcription' profile in my-profiles.yaml"
    assert isinstance(caught.value, TranscriptionError | AgentError)
    assert fake_llm.transcriptions == []


async def test_no_endpoint_is_unavailable_without_a_call(make_transcriber: MakeTranscriber) -> None:
    transcriber = make_transcriber()

    with pytest.raises(TranscriptionUnavailable, match="set LLM_BASE_URL"):
        await transcriber.transcribe(VOICE_NOTE, filename="a.ogg", content_type=OGG)
    assert transcriber.endpoint is None


async def test_from_env_reads_LLM_BASE_URL_and_LLM_API_KEY(fake_llm: FakeLLM) -> None:
    transcriber = OpenAICompatibleTranscriber.from_env(
        load_profiles(), {"LLM_BASE_URL": fake_llm.base_url, "LLM_API_KEY": "sk-env"}
    )
    try:
        await transcriber.transcribe(VOICE_NOTE, filename="a.ogg", content_type=OGG)
    finally:
        await transcriber.aclose()

    assert fake_llm.last_transcription.headers["Authorization"] == "Bearer sk-env"


async def test_empty_audio_is_refused_without_a_call(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber
) -> None:
    with pytest.raises(TranscriptionError, match="empty audio"):
        await make_transcriber(base_url=fake_llm.base_url).transcribe(
            b"", filename="a.ogg", content_type=OGG
        )

    assert fake_llm.transcriptions == []


async def test_an_answer_without_text_is_an_error(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber
) -> None:
    fake_llm.script_transcripts(raw({"transcript": "oi"}))

    with pytest.raises(TranscriptionError, match="the response has no text"):
        await make_transcriber(base_url=fake_llm.base_url).transcribe(
            VOICE_NOTE, filename="a.ogg", content_type=OGG
        )


async def test_a_refused_connection_is_a_transcription_error(
    make_transcriber: MakeTranscriber,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    with pytest.raises(TranscriptionError, match="connection failed") as caught:
        await make_transcriber(base_url=f"http://127.0.0.1:{port}/v1").transcribe(
            VOICE_NOTE, filename="a.ogg", content_type=OGG
        )
    assert type(caught.value) is TranscriptionError


# -- the fake itself -------------------------------------------------------------------------


async def test_the_fake_answers_at_the_root_path_from_a_responder(
    make_transcriber: MakeTranscriber,
) -> None:
    def responder(call: TranscriptionCall) -> str:
        return f"{call.size} bytes de {call.content_type}"

    async with FakeLLM.running(transcriber=responder) as fake:
        transcript = await make_transcriber(base_url=fake.root_url).transcribe(
            VOICE_NOTE, filename="a.ogg", content_type="audio/ogg"
        )

    assert transcript.text == f"{len(VOICE_NOTE)} bytes de audio/ogg"
    assert fake.transcriptions[0].path == "/audio/transcriptions"


async def test_the_fake_shapes_text_and_verbose_answers_like_the_api(fake_llm: FakeLLM) -> None:
    fake_llm.script_transcripts("paguei a luz", transcribed("paguei a luz", seconds=2.5))
    client = openai.AsyncOpenAI(base_url=fake_llm.base_url, api_key="x", max_retries=0)
    try:
        as_text = await client.audio.transcriptions.create(
            file=("a.ogg", VOICE_NOTE, "audio/ogg"), model="whisper-1", response_format="text"
        )
        verbose = await client.audio.transcriptions.create(
            file=("a.ogg", VOICE_NOTE, "audio/ogg"),
            model="whisper-1",
            language="pt",
            response_format="verbose_json",
        )
    finally:
        await client.close()

    assert as_text.strip() == "paguei a luz"
    assert (verbose.text, verbose.duration, verbose.language) == ("paguei a luz", 2.5, "pt")


@pytest.mark.parametrize(
    ("form", "param", "message"),
    [
        ({"model": "whisper-1"}, "file", "Missing required parameter: 'file'."),
        ({"file": True}, "model", "you must provide a model parameter"),
        ({"file": True, "model": "m", "language": "portuguese"}, "language", "ISO-639-1"),
        ({"file": True, "model": "m", "response_format": "xml"}, "response_format", "xml"),
    ],
)
async def test_the_fake_refuses_a_bad_form_with_an_openai_error(
    fake_llm: FakeLLM, form: dict[str, object], param: str, message: str
) -> None:
    data = aiohttp.FormData(default_to_multipart=True)
    for name, value in form.items():
        if value is True:
            data.add_field(name, VOICE_NOTE, filename="a.ogg", content_type="audio/ogg")
        else:
            data.add_field(name, str(value))

    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{fake_llm.base_url}/audio/transcriptions", data=data) as response,
    ):
        body = await response.json()

    assert response.status == 400
    assert body["error"]["param"] == param
    assert message in body["error"]["message"]
    assert body["error"]["type"] == "invalid_request_error"
    assert fake_llm.last_transcription.status == 400


async def test_the_fake_can_be_watched_and_reset(
    fake_llm: FakeLLM, make_transcriber: MakeTranscriber
) -> None:
    fake_llm.script_transcripts(["um", "dois"])
    assert fake_llm.pending_transcripts == 2

    await make_transcriber(base_url=fake_llm.base_url).transcribe(
        VOICE_NOTE, filename="a.ogg", content_type=OGG
    )

    assert [call.status for call in await fake_llm.wait_for_transcriptions(1)] == [200]
    fake_llm.reset()
    assert (fake_llm.transcriptions, fake_llm.pending_transcripts) == ([], 0)
    with pytest.raises(AssertionError, match="expected 1 transcription requests"):
        await fake_llm.wait_for_transcriptions(1, timeout=0.05)
