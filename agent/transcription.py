"""Voice notes to text: the :class:`Transcriber` port and its adapter on the openai SDK.

:class:`OpenAICompatibleTranscriber` sends the audio to ``POST {base_url}/audio/
transcriptions`` (multipart ``file`` + ``model`` + ``language``, ``response_format=json``)
with the SDK's audio API, so OpenAI, Azure and OpenAI-compatible servers (faster-whisper,
vLLM, whisper.cpp) all work. Its settings are the optional ``transcription`` profile of
the profiles file; the endpoint and key resolve as a chat profile's do (``base_url`` /
``LLM_BASE_URL``, ``api_key_env`` / ``LLM_API_KEY``).

Every failure is a typed :class:`~agent.errors.TranscriptionError`; "not configured" (no
profile, no endpoint) is :class:`~agent.errors.TranscriptionUnavailable`, raised before
any call. The SDK never retries: the caller decides. Logs carry no transcript text.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from pathlib import PurePath
from typing import Any, Protocol

import openai
import structlog

from agent.errors import TranscriptionError, TranscriptionTimeout, TranscriptionUnavailable
from agent.llm import (
    API_KEY_ENV,
    BASE_URL_ENV,
    Endpoint,
    Usage,
    connection_error,
    new_sdk_client,
    resolve_endpoint,
)
from agent.profiles import TRANSCRIPTION_PROFILE, LLMProfiles, TranscriptionProfile

__all__ = [
    "AUDIO_EXTENSIONS",
    "OpenAICompatibleTranscriber",
    "Transcriber",
    "Transcript",
    "transcription_cost_micro_usd",
    "upload_name",
]

log = structlog.get_logger(__name__)

AUDIO_EXTENSIONS = frozenset(
    {"flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm"}
)
"""The file extensions OpenAI's endpoint accepts; it reads the format from the name."""

_EXTENSION_BY_TYPE = {
    "application/ogg": "ogg",
    "audio/flac": "flac",
    "audio/m4a": "m4a",
    "audio/mp3": "mp3",
    "audio/mp4": "m4a",
    "audio/mpeg": "mp3",
    "audio/ogg": "ogg",
    "audio/opus": "ogg",
    "audio/wav": "wav",
    "audio/wave": "wav",
    "audio/webm": "webm",
    "audio/x-flac": "flac",
    "audio/x-m4a": "m4a",
    "audio/x-wav": "wav",
    "video/mp4": "mp4",
    "video/webm": "webm",
}

_DETAILED_STATUSES = frozenset({400, 404, 413, 415, 422})
"""Statuses whose error message says what is wrong with the audio or the model."""


def transcription_cost_micro_usd(
    profile: TranscriptionProfile,
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    seconds: float | None = None,
) -> int:
    """Cost of one transcription in micro-USD, rounded up: tokens at the per-Mtok prices
    plus, when the endpoint reports the duration, seconds at ``price_per_minute``."""
    cost = (
        Decimal(input_tokens) * profile.price_input_per_mtok
        + Decimal(output_tokens) * profile.price_output_per_mtok
    )
    if seconds:
        cost += Decimal(str(seconds)) * profile.price_per_minute * Decimal(1_000_000) / 60
    return int(cost.to_integral_value(rounding=ROUND_CEILING))


@dataclass(frozen=True)
class Transcript:
    """What was said in a voice note, with what it cost.

    ``text`` is stripped; it may be empty (silence, noise): nothing to act on.
    ``usage``: input tokens (the audio) as ``prompt_tokens``, output tokens (the text) as
    ``completion_tokens``, the cost, one call. ``seconds``: the audio's duration when the
    endpoint reports it (duration-billed models), else ``None``.
    """

    text: str
    model: str
    language: str
    usage: Usage
    seconds: float | None = None


class Transcriber(Protocol):
    """The port: the text of one audio (a WhatsApp voice note is ``audio/ogg``)."""

    async def transcribe(self, audio: bytes, *, filename: str, content_type: str) -> Transcript:
        """Raises :class:`~agent.errors.TranscriptionUnavailable` when not configured,
        :class:`~agent.errors.TranscriptionError` when the call fails."""
        ...

    async def aclose(self) -> None: ...


def upload_name(filename: str, content_type: str) -> str:
    """The file name sent with the audio: ``filename`` when its extension is one the
    endpoint reads, else ``filename`` plus the extension of ``content_type`` (WhatsApp
    voice notes often come without a name: ``("", "audio/ogg; codecs=opus")`` → ``audio.ogg``)."""
    name = PurePath(filename.strip() or "audio").name or "audio"
    if PurePath(name).suffix.lower().removeprefix(".") in AUDIO_EXTENSIONS:
        return name
    extension = _EXTENSION_BY_TYPE.get(content_type.split(";", 1)[0].strip().lower())
    return f"{name}.{extension}" if extension else name


class OpenAICompatibleTranscriber:
    """:class:`Transcriber` over the openai SDK's audio API, for the ``transcription``
    profile of ``profiles``. Defaults (``base_url``, ``api_key``) as for
    :class:`~agent.llm.OpenAICompatibleLLM`; build it with the same arguments."""

    def __init__(
        self,
        profiles: LLMProfiles,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self.profile = profiles.transcription
        self.source = profiles.source
        self.default_base_url = base_url or None
        self._default_api_key = api_key or None
        self._environ = environ
        self._client: openai.AsyncOpenAI | None = None

    @classmethod
    def from_env(
        cls, profiles: LLMProfiles, environ: Mapping[str, str] = os.environ
    ) -> OpenAICompatibleTranscriber:
        """Defaults from ``LLM_BASE_URL`` and ``LLM_API_KEY``."""
        return cls(
            profiles,
            base_url=environ.get(BASE_URL_ENV, "").strip() or None,
            api_key=environ.get(API_KEY_ENV, "").strip() or None,
            environ=environ,
        )

    @property
    def endpoint(self) -> Endpoint | None:
        """Where the audio goes, or ``None`` when transcription is not configured."""
        if self.profile is None:
            return None
        return resolve_endpoint(
            self.profile,
            default_base_url=self.default_base_url,
            default_api_key=self._default_api_key,
            environ=self._environ,
        )

    @property
    def unavailable_reason(self) -> str | None:
        """Why transcription is not configured (for the start-up warning), or ``None``."""
        if self.profile is None:
            return f"no {TRANSCRIPTION_PROFILE!r} profile in {self.source}"
        if self.endpoint is None:
            return f"no endpoint configured (set {BASE_URL_ENV} or the profile's base_url)"
        return None

    def is_configured(self) -> bool:
        return self.unavailable_reason is None

    async def transcribe(self, audio: bytes, *, filename: str, content_type: str) -> Transcript:
        profile, endpoint = self.profile, self.endpoint
        if profile is None or endpoint is None:
            raise TranscriptionUnavailable(self.unavailable_reason or "not configured")
        if not audio:
            raise TranscriptionError("empty audio")
        if self._client is None:
            self._client = new_sdk_client(endpoint)
        seconds = profile.timeout_seconds
        started = time.perf_counter()
        try:
            async with asyncio.timeout(seconds):
                result = await self._client.audio.transcriptions.create(
                    file=(upload_name(filename, content_type), audio, content_type),
                    model=profile.model,
                    language=profile.language,
                    response_format="json",
                    timeout=seconds,
                )
        except (TimeoutError, openai.APITimeoutError) as exc:
            refused = connection_error(exc)
            if refused is not None:  # the aiohttp transport reports a refusal as a timeout
                raise TranscriptionError(f"connection failed: {refused}") from exc
            raise TranscriptionTimeout(f"no answer within {seconds:g}s") from exc
        except openai.APIStatusError as exc:
            raise TranscriptionError(_status_reason(exc), status=exc.status_code) from exc
        except openai.APIConnectionError as exc:
            raise TranscriptionError(f"connection failed: {exc}") from exc
        except openai.APIResponseValidationError as exc:
            raise TranscriptionError(f"unexpected response: {exc}") from exc
        except openai.OpenAIError as exc:
            raise TranscriptionError(f"{type(exc).__name__}: {exc}") from exc
        transcript = _to_transcript(profile, result)
        log.debug(
            "transcription.completed",
            model=transcript.model,
            ms=round((time.perf_counter() - started) * 1000),
            audio_bytes=len(audio),
            seconds=transcript.seconds,
            characters=len(transcript.text),
            cost_micro_usd=transcript.usage.cost_micro_usd,
        )
        return transcript

    async def aclose(self) -> None:
        """Close the SDK client (and its connection pool)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()


def _status_reason(exc: openai.APIStatusError) -> str:
    """``HTTP 400: Invalid file format. ...`` for errors about the request; the status
    alone otherwise (an auth error's message may echo part of the key)."""
    reason = f"HTTP {exc.status_code}"
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    if exc.status_code in _DETAILED_STATUSES and isinstance(message, str) and message:
        reason += f": {message[:200]}"
    return reason


def _to_transcript(profile: TranscriptionProfile, result: Any) -> Transcript:
    """SDK ``Transcription`` → :class:`Transcript`; attribute access only, so a server
    that leaves ``usage`` out (most OpenAI-compatible ones) works."""
    text = getattr(result, "text", None)
    if not isinstance(text, str):
        raise TranscriptionError("the response has no text")
    usage = getattr(result, "usage", None)
    input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
    output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
    seconds = getattr(usage, "seconds", None)
    seconds = float(seconds) if isinstance(seconds, int | float) else None
    cost = transcription_cost_micro_usd(
        profile, input_tokens=input_tokens, output_tokens=output_tokens, seconds=seconds
    )
    return Transcript(
        text=text.strip(),
        model=profile.model,
        language=profile.language,
        usage=Usage(input_tokens, output_tokens, cost, 1),
        seconds=seconds,
    )
