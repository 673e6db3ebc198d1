"""The transcriber without the network: configuration, upload names, cost arithmetic."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agent.llm import Endpoint
from agent.profiles import LLMProfiles, TranscriptionProfile, load_profiles
from agent.transcription import (
    OpenAICompatibleTranscriber,
    transcription_cost_micro_usd,
    upload_name,
)

WHISPER = TranscriptionProfile(
    provider="openai_compatible",
    model="whisper-1",
    timeout_seconds=30,
    price_per_minute=Decimal("0.006"),
)


def test_the_packaged_profile_is_configured_once_there_is_an_endpoint() -> None:
    unset = OpenAICompatibleTranscriber(load_profiles(), environ={})
    assert not unset.is_configured()
    assert unset.unavailable_reason == (
        "no endpoint configured (set LLM_BASE_URL or the profile's base_url)"
    )

    set_ = OpenAICompatibleTranscriber.from_env(
        load_profiles(), {"LLM_BASE_URL": "http://127.0.0.1:8000/v1", "LLM_API_KEY": "sk-1"}
    )
    assert set_.is_configured()
    assert set_.endpoint == Endpoint("http://127.0.0.1:8000/v1", "sk-1")


def test_a_file_without_the_profile_is_not_configured_whatever_the_endpoint() -> None:
    profiles = LLMProfiles(load_profiles().profiles, "mine.yaml")
    transcriber = OpenAICompatibleTranscriber(profiles, base_url="http://127.0.0.1:8000/v1")

    assert transcriber.endpoint is None
    assert transcriber.unavailable_reason == "no 'transcription' profile in mine.yaml"


@pytest.mark.parametrize(
    ("filename", "content_type", "sent"),
    [
        ("voice_note.ogg", "audio/ogg; codecs=opus", "voice_note.ogg"),
        ("", "audio/ogg; codecs=opus", "audio.ogg"),
        ("  ", "audio/mpeg", "audio.mp3"),
        ("wamid.HBgM", "audio/mp4", "wamid.HBgM.m4a"),
        ("Recording.M4A", "audio/mp4", "Recording.M4A"),
        ("../../etc/passwd", "audio/wav", "passwd.wav"),
        ("voice", "audio/amr", "voice"),  # no extension the endpoint reads: left for it to say
    ],
)
def test_the_upload_name_carries_an_extension_the_endpoint_reads(
    filename: str, content_type: str, sent: str
) -> None:
    assert upload_name(filename, content_type) == sent


def test_cost_is_micro_usd_rounded_up_by_tokens_or_by_minute() -> None:
    tokens = load_profiles().transcription
    assert tokens is not None  # gpt-4o-mini-transcribe: 3.00 / 5.00 USD per Mtok

    assert transcription_cost_micro_usd(tokens, input_tokens=1000, output_tokens=100) == 3500
    assert transcription_cost_micro_usd(tokens, input_tokens=1) == 3
    assert transcription_cost_micro_usd(tokens) == 0
    assert transcription_cost_micro_usd(WHISPER, seconds=60) == 6000
    assert transcription_cost_micro_usd(WHISPER, seconds=0.01) == 1  # never free
