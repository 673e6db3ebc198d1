"""What the fake providers share to serve media: the file a test registers, its
streaming (with the bytes actually written), and a loopback host that must stay untouched.

``FakeTwilioAPI.add_media`` and ``FakeGraphAPI.add_media`` return a :class:`FakeMedia`
whose ``url`` (Twilio ``MediaUrl``) or ``media_id`` (Meta) goes into a delivery.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes._server import RecordingServer

__all__ = ["FakeMedia", "ForbiddenHost", "stream_media"]


@dataclass(eq=False)
class FakeMedia:
    """A media file a fake provider serves, and what happened to it.

    ``chunked``: no Content-Length (the size shows only while streaming). ``redirect_to``
    (Twilio) / ``download_url`` (Meta): where the provider points instead of its own
    fake CDN. ``declared_size`` (Meta): the ``file_size`` Graph announces, when it lies.
    """

    data: bytes
    content_type: str
    filename: str | None = None
    chunked: bool = False
    chunk_size: int = 64 * 1024
    redirect_to: str | None = None
    download_url: str | None = None
    declared_size: int | None = None
    url: str = ""  # Twilio: the MediaUrl; Meta: the download url Graph answers
    media_id: str = ""  # Meta: the media id in the webhook
    bytes_sent: int = 0  # body bytes written to clients, all downloads together
    completed: int = 0  # downloads written to the end
    aborted: int = 0  # downloads the client stopped reading
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # set when a download ends


async def stream_media(request: web.Request, media: FakeMedia) -> web.StreamResponse:
    """Write ``media`` in chunks, counting what reaches the socket; a client that hangs
    up counts as ``aborted``."""
    response = web.StreamResponse(headers={"Content-Type": media.content_type})
    if media.filename:
        response.headers["Content-Disposition"] = f'attachment; filename="{media.filename}"'
    if media.chunked:
        response.enable_chunked_encoding()
    else:
        response.content_length = len(media.data)
    try:
        await response.prepare(request)
        for start in range(0, len(media.data), media.chunk_size):
            chunk = media.data[start : start + media.chunk_size]
            await response.write(chunk)
            media.bytes_sent += len(chunk)
            await asyncio.sleep(0)  # let the client run between chunks, as a network would
        await response.write_eof()
        media.completed += 1
    except ConnectionError:  # the client hung up: what a fetcher over its limit does
        media.aborted += 1
    finally:
        media.ended.set()
    return response


class ForbiddenHost(RecordingServer):
    """Another loopback server (another port) that records every request it gets: a test
    points a forged media URL or a redirect here and expects ``requests == []``."""

    label = "forbidden host"

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._any)

    async def _any(self, request: web.Request) -> web.Response:
        record: dict[str, Any] = {
            "method": request.method,
            "path": request.path_qs,
            "authorization": request.headers.get("Authorization"),
        }
        async with self._changed:
            self.requests.append(record)
            self._changed.notify_all()
        return web.Response(body=b"\xff" * 16, content_type="audio/ogg")
