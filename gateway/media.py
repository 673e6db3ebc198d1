"""What a couple's media means to the agent: a voice note becomes its transcript, an image
goes to a vision-capable agent as an image part; the rest is described in words.

Media is fetched here, in the worker (never in the webhook), from the provider's own
hosts only (``channels.media``), with a size limit; nothing is retried. When a voice note
(or an image the agent would read) cannot be used, the reason is recorded and the couple
is asked to write it instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from agent import ImagePart, Transcriber, TranscriptionError, TranscriptionUnavailable
from agent.messages import VISION_IMAGE_TYPES
from channels import FetchedMedia, InboundMessage, Media, MediaError, MediaFetcher

__all__ = ["MEDIA_PROBLEM_REPLIES", "MediaInput", "MediaReader"]

log = structlog.get_logger("gateway.media")

MEDIA_PROBLEM_REPLIES: Mapping[str, str] = {
    "audio": ("Não consegui ouvir seu áudio agora. Pode me mandar o que você disse por escrito?"),
    "image": (
        "Não consegui abrir sua imagem agora. Pode me contar por escrito o que tem nela "
        "(o valor, a loja, a data)?"
    ),
}
"""What the couple reads when their media cannot be used (PT-BR)."""


@dataclass(frozen=True, slots=True)
class MediaInput:
    """The message as the agent reads it. ``problem``: why the media could not be used
    (``no_transcription``, ``transcription_failed``, ``empty_transcript``, or a download
    reason: ``forbidden_host``, ``too_large``, ``unsupported_type``, ``download_failed``,
    ``timeout``); ``reply``: what to tell the couple then (None: carry on)."""

    text: str
    images: tuple[ImagePart, ...] = ()
    transcript: str | None = None
    problem: str | None = None
    reply: str | None = None


class MediaReader:
    def __init__(
        self,
        fetchers: Mapping[str, MediaFetcher],
        transcriber: Transcriber | None,
        *,
        max_bytes: int,
        vision: bool,
    ) -> None:
        self.fetchers = fetchers
        self.transcriber = transcriber
        self.max_bytes = max_bytes
        self.vision = vision

    async def read(self, msg: InboundMessage) -> MediaInput:
        """The agent's input for a message that carries media (others: its text)."""
        text = msg.agent_text()
        audio = next((m for m in msg.media if m.kind == "audio"), None)
        if audio is not None:
            return await self._voice_note(msg, audio, text)
        images = [m for m in msg.media if m.kind == "image"]
        if images and self.vision:
            return await self._images(msg, images, text)
        return MediaInput(text)

    async def _voice_note(self, msg: InboundMessage, audio: Media, text: str) -> MediaInput:
        if self.transcriber is None:
            return _unusable(text, "no_transcription", "audio")
        try:
            fetched = await self._fetch(msg, audio)
            transcript = await self.transcriber.transcribe(
                fetched.data,
                filename=fetched.filename or "audio",
                content_type=fetched.content_type,
            )
        except MediaError as exc:
            return _unusable(text, exc.reason, "audio")
        except TranscriptionUnavailable:
            return _unusable(text, "no_transcription", "audio")
        except TranscriptionError as exc:
            log.warning("media.transcription_failed", reason=exc.reason)
            return _unusable(text, "transcription_failed", "audio")
        if not transcript.text:
            return _unusable(text, "empty_transcript", "audio")
        return MediaInput(transcript.text, transcript=transcript.text)

    async def _images(self, msg: InboundMessage, images: list[Media], text: str) -> MediaInput:
        parts: list[ImagePart] = []
        for image in images:
            try:
                fetched = await self._fetch(msg, image)
            except MediaError as exc:
                return _unusable(text, exc.reason, "image")
            if fetched.content_type not in VISION_IMAGE_TYPES:
                return _unusable(text, "unsupported_type", "image")
            parts.append(ImagePart(data=fetched.data, content_type=fetched.content_type))
        return MediaInput(text, images=tuple(parts))

    async def _fetch(self, msg: InboundMessage, media: Media) -> FetchedMedia:
        fetcher = self.fetchers.get(msg.channel)
        if fetcher is None:
            raise MediaError("download_failed", f"no media access configured for {msg.channel}")
        return await fetcher.fetch(media, max_bytes=self.max_bytes)


def _unusable(text: str, problem: str, kind: str) -> MediaInput:
    log.info("media.unusable", problem=problem, kind=kind)
    return MediaInput(text, problem=problem, reply=MEDIA_PROBLEM_REPLIES[kind])
