"""Media download: the voice notes and photos a couple sent, fetched from their provider.

Twilio serves ``MediaUrl{N}`` behind HTTP basic auth (account SID + auth token) and
redirects to its CDN; Meta answers ``GET /{version}/{media-id}`` (bearer token) with a
short-lived ``url`` that is downloaded with the same bearer token.

Safety, the same for both: only the configured API origin (``api_base_url`` /
``graph_base_url``, so tests run on loopback) and the provider's own CDN hosts (https on
443) are ever requested. A URL from a delivery body that points anywhere else (another
host or another port) is refused before any request, and so is a redirect elsewhere.
Credentials go to the first request of a chain only, never to a redirect target.
``max_bytes`` is enforced on Content-Length, on the provider's declared size and while
streaming; one total timeout bounds the whole fetch; the content type must be one of
``content_types``. Nothing is retried here: every failure is a ``MediaError``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import aiohttp
import structlog
from aiohttp import hdrs
from pydantic import BaseModel, ConfigDict, ValidationError
from yarl import URL

from channels.errors import MediaError, MediaErrorReason
from channels.models import Media

__all__ = [
    "META_MEDIA_HOSTS",
    "TWILIO_MEDIA_HOSTS",
    "WHATSAPP_MEDIA_TYPES",
    "FetchedMedia",
    "MediaFetcher",
    "MetaMediaFetcher",
    "TwilioMediaFetcher",
]

#: The audio and image types WhatsApp delivers (Meta, "Supported media types":
#: audio/aac, audio/amr, audio/mpeg, audio/mp4, audio/ogg with the opus codec — voice
#: notes —, image/jpeg, image/png, and image/webp for stickers; Twilio relays the same
#: files). Compared without parameters: ``audio/ogg; codecs=opus`` is ``audio/ogg``.
WHATSAPP_MEDIA_TYPES: frozenset[str] = frozenset(
    {
        "audio/aac",
        "audio/amr",
        "audio/mp4",
        "audio/mpeg",
        "audio/ogg",
        "image/jpeg",
        "image/png",
        "image/webp",
    }
)

#: Where Twilio's media URLs redirect (followed without credentials). ``mms.twiliocdn.com``:
#: Twilio support, "Protect Media Access with HTTP Basic Authentication for Programmable
#: Messaging" (authenticated media redirects to a 4-hour URL on that domain);
#: ``media.twiliocdn.com``: the ``Location`` Twilio answers for WhatsApp/MMS media in
#: captured 307 responses. The legacy unauthenticated host (``s3-external-1.amazonaws.com``,
#: a shared S3 endpoint) is deliberately left out: Twilio now enforces basic auth on all
#: media URLs (docs: Messaging API, "Media subresource").
TWILIO_MEDIA_HOSTS: frozenset[str] = frozenset({"mms.twiliocdn.com", "media.twiliocdn.com"})

#: Where Meta's media ``url`` points (downloaded with the bearer token): WhatsApp Cloud API
#: reference, "Media" → "Retrieve media URL" / "Download media"
#: (``https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=…``, valid 5 minutes).
META_MEDIA_HOSTS: frozenset[str] = frozenset({"lookaside.fbsbx.com"})

_MAX_REDIRECTS = 3
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024
_GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
_MEDIA_ID = re.compile(r"[0-9A-Za-z_-]{1,128}")

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class FetchedMedia:
    """A downloaded media file: its bytes, its type (``"audio/ogg"``, no parameters) and
    the file name the provider gave, if any."""

    data: bytes = field(repr=False)
    content_type: str
    filename: str | None = None


@runtime_checkable
class MediaFetcher(Protocol):
    """Downloads inbound media from one provider: ``TwilioMediaFetcher``, ``MetaMediaFetcher``."""

    @property
    def provider(self) -> str:
        """``"twilio"`` or ``"meta"``."""
        ...

    async def fetch(self, media: Media, *, max_bytes: int) -> FetchedMedia:
        """The file behind ``media``; ``MediaError`` (with its ``reason``) on any failure."""
        ...

    async def close(self) -> None:
        """Release connections; idempotent."""
        ...


# --------------------------------------------------------------------------- origins


_Origin = tuple[str, str, int]


def _origin(url: URL) -> _Origin | None:
    if not url.absolute or url.scheme not in ("http", "https") or not url.host:
        return None
    if url.user is not None or url.password is not None or url.port is None:
        return None  # userinfo would become credentials for a host we do not know
    return (url.scheme, url.host, url.port)


@dataclass(frozen=True, slots=True)
class _Origins:
    """The configured API origins (any scheme and port) plus provider hosts (https, 443)."""

    exact: frozenset[_Origin]
    https_hosts: frozenset[str] = frozenset()

    def allows(self, url: URL) -> bool:
        origin = _origin(url)
        if origin is None:
            return False
        scheme, host, port = origin
        return origin in self.exact or (
            scheme == "https" and port == 443 and host in self.https_hosts
        )


def _base_origin(base_url: str, setting: str) -> _Origin:
    origin = _origin(_parse(base_url) or URL())
    if origin is None:
        raise ValueError(f"{setting} is not an http(s) URL: {base_url!r}")
    return origin


def _parse(text: str) -> URL | None:
    try:
        return URL(text)
    except (TypeError, ValueError):
        return None


async def _read_small(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The start of a body that should be small (Graph's JSON, an error page)."""
    data = bytearray()
    async for chunk in response.content.iter_chunked(_CHUNK):
        data.extend(chunk)
        if len(data) >= limit:
            break
    return bytes(data[:limit])


def _mime(value: str | None) -> str:
    return (value or "").partition(";")[0].strip().lower()


# --------------------------------------------------------------------------- HTTP


class _HttpFetcher:
    """One ``aiohttp.ClientSession`` (created on first use, like ``MetaSender``) and the
    guarded download every provider shares."""

    provider = "media"

    def __init__(self, *, timeout: float, content_types: Collection[str]) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self._timeout = timeout
        self._types = frozenset(_mime(kind) for kind in content_types)
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        """Create the HTTP session now (optional: the first fetch does it otherwise)."""
        self._http()

    async def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def fetch(self, media: Media, *, max_bytes: int) -> FetchedMedia:
        """Download ``media`` (at most ``max_bytes``); ``MediaError`` on any failure."""
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        try:
            async with asyncio.timeout(self._timeout):
                fetched = await self._fetch(media, max_bytes)
        except TimeoutError:
            raise self._error("timeout", f"no complete answer within {self._timeout:g} s") from None
        except aiohttp.ClientConnectorError as exc:
            raise self._error("download_failed", f"cannot connect: {exc}") from exc
        except aiohttp.ClientError as exc:
            raise self._error("download_failed", f"transport error: {exc}") from exc
        _log.info(
            "media.fetched",
            provider=self.provider,
            content_type=fetched.content_type,
            bytes=len(fetched.data),
        )
        return fetched

    async def _fetch(self, media: Media, max_bytes: int) -> FetchedMedia:
        raise NotImplementedError

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout)
            )
        return self._session

    def _error(
        self, reason: MediaErrorReason, message: str, status: int | None = None
    ) -> MediaError:
        _log.warning(
            "media.failed", provider=self.provider, reason=reason, status=status, error=message
        )
        return MediaError(reason, message, provider=self.provider, status=status)

    def _refused(self, url: URL, what: str) -> MediaError:
        where = f"{url.scheme}://{url.host}:{url.port}" if _origin(url) else "a malformed URL"
        return self._error(
            "forbidden_host", f"{what} points to {where}, not to the provider: not fetched"
        )

    def _check_declared(self, declared: str | None) -> None:
        kind = _mime(declared)
        if kind not in _GENERIC_TYPES and kind not in self._types:
            raise self._error("unsupported_type", f"{kind} is not an accepted media type")

    async def _download(
        self,
        url: URL,
        *,
        credentials: Mapping[str, str],
        same_origin_redirects_keep_credentials: bool = False,
        allowed: _Origins,
        max_bytes: int,
        declared_type: str | None,
        filename: str | None,
    ) -> FetchedMedia:
        """GET ``url`` with ``credentials``, following up to 3 redirects inside ``allowed``
        without them (or, if asked, with them while the origin stays the same); the body
        is read up to ``max_bytes``."""
        session = self._http()
        headers = dict(credentials)
        credentialed = _origin(url)
        what = "the media URL"
        for _hop in range(_MAX_REDIRECTS + 1):
            if not allowed.allows(url):
                raise self._refused(url, what)
            async with session.get(url, headers=headers, allow_redirects=False) as response:
                if response.status in _REDIRECTS:
                    location = response.headers.get(hdrs.LOCATION)
                    target = _parse(location) if location else None
                    if target is None:
                        raise self._error(
                            "download_failed", "redirect without a usable Location", response.status
                        )
                    url, what = url.join(target), "a redirect"
                    keep = same_origin_redirects_keep_credentials and _origin(url) == credentialed
                    headers = dict(credentials) if keep else {}
                    continue
                if response.status != 200:
                    snippet = (await _read_small(response, 200)).decode("utf-8", "replace")
                    raise self._error(
                        "download_failed", f"HTTP {response.status}: {snippet}", response.status
                    )
                kind = self._content_type(response.headers.get(hdrs.CONTENT_TYPE), declared_type)
                length = response.content_length
                if length is not None and length > max_bytes:
                    response.close()
                    raise self._error(
                        "too_large", f"{length} bytes announced, more than {max_bytes}"
                    )
                data = bytearray()
                async for chunk in response.content.iter_chunked(_CHUNK):
                    data.extend(chunk)
                    if len(data) > max_bytes:
                        response.close()  # stop the transfer now, do not drain it
                        raise self._error(
                            "too_large", f"more than {max_bytes} bytes: stopped reading"
                        )
                disposition = response.content_disposition
                name = disposition.filename if disposition is not None else None
                return FetchedMedia(bytes(data), kind, name or filename)
        raise self._error("download_failed", f"more than {_MAX_REDIRECTS} redirects")

    def _content_type(self, served: str | None, declared: str | None) -> str:
        """The served type; the declared one when the server answers a generic type."""
        kind = _mime(served)
        if kind in _GENERIC_TYPES:
            kind = _mime(declared)
        if kind not in self._types:
            raise self._error(
                "unsupported_type", f"{kind or 'no type'} is not an accepted media type"
            )
        return kind


# --------------------------------------------------------------------------- providers


class TwilioMediaFetcher(_HttpFetcher):
    """Twilio ``MediaUrl{N}``: GET with HTTP basic auth (account SID + auth token), then
    its redirect to Twilio's CDN without credentials.

    The media URL must be on ``api_base_url``'s origin and under this account's
    ``/2010-04-01/Accounts/{AccountSid}/Messages/`` path, else nothing is requested.
    """

    provider = "twilio"

    def __init__(
        self,
        account_sid: str,
        auth_token: str,
        *,
        api_base_url: str = "https://api.twilio.com",
        timeout: float = 30.0,
        content_types: Collection[str] = WHATSAPP_MEDIA_TYPES,
    ) -> None:
        if not account_sid or not auth_token:
            raise ValueError("TwilioMediaFetcher needs an account SID and an auth token")
        super().__init__(timeout=timeout, content_types=content_types)
        api = _base_origin(api_base_url, "api_base_url")
        self._origins = _Origins(frozenset({api}))
        self._redirects = _Origins(frozenset({api}), TWILIO_MEDIA_HOSTS)
        base_path = URL(api_base_url).path.rstrip("/")
        self._prefix = f"{base_path}/2010-04-01/Accounts/{account_sid}/Messages/"
        self._auth = {"Authorization": aiohttp.BasicAuth(account_sid, auth_token).encode()}

    async def _fetch(self, media: Media, max_bytes: int) -> FetchedMedia:
        if not media.url:
            raise self._error("download_failed", "no MediaUrl on this media")
        url = _parse(media.url)
        if url is None or not self._origins.allows(url):
            raise self._refused(url or URL(), "the media URL")
        if not url.path.startswith(self._prefix) or "/Media/" not in url.path:
            raise self._error(
                "forbidden_host", "the media URL is not a media of this Twilio account"
            )
        self._check_declared(media.mime_type)
        return await self._download(
            url,
            credentials=self._auth,
            allowed=self._redirects,
            max_bytes=max_bytes,
            declared_type=media.mime_type,
            filename=media.filename,
        )


class _GraphMedia(BaseModel):
    """Graph's answer to ``GET /{version}/{media-id}``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    url: str
    mime_type: str | None = None
    file_size: int | None = None  # a number or a numeric string, depending on the version
    sha256: str | None = None


class MetaMediaFetcher(_HttpFetcher):
    """Meta Cloud API media: ``GET {graph}/{version}/{media-id}`` with the bearer token →
    ``url`` (on ``graph_base_url``'s origin or Meta's media host) → GET it with the bearer
    token; a redirect keeps the token only while it stays on that url's origin."""

    provider = "meta"

    def __init__(
        self,
        access_token: str,
        *,
        graph_base_url: str = "https://graph.facebook.com",
        api_version: str = "v21.0",
        timeout: float = 30.0,
        content_types: Collection[str] = WHATSAPP_MEDIA_TYPES,
    ) -> None:
        if not access_token:
            raise ValueError("MetaMediaFetcher needs an access token")
        super().__init__(timeout=timeout, content_types=content_types)
        graph = _base_origin(graph_base_url, "graph_base_url")
        self._graph = graph_base_url.rstrip("/")
        self._version = api_version.strip("/")
        self._downloads = _Origins(frozenset({graph}), META_MEDIA_HOSTS)
        self._auth = {"Authorization": f"Bearer {access_token}"}

    async def _fetch(self, media: Media, max_bytes: int) -> FetchedMedia:
        if not media.media_id or not _MEDIA_ID.fullmatch(media.media_id):
            raise self._error("download_failed", f"not a Meta media id: {media.media_id!r}")
        self._check_declared(media.mime_type)
        info = await self._info(media.media_id)
        self._check_declared(info.mime_type)
        if info.file_size is not None and info.file_size > max_bytes:
            raise self._error(
                "too_large", f"{info.file_size} bytes declared, more than {max_bytes}"
            )
        url = _parse(info.url)
        if url is None:
            raise self._error("download_failed", "Graph answered a malformed media url")
        return await self._download(
            url,
            credentials=self._auth,
            same_origin_redirects_keep_credentials=True,  # the host the token went to anyway
            allowed=self._downloads,
            max_bytes=max_bytes,
            declared_type=info.mime_type or media.mime_type,
            filename=media.filename,
        )

    async def _info(self, media_id: str) -> _GraphMedia:
        url = URL(f"{self._graph}/{self._version}/{media_id}")
        async with self._http().get(url, headers=self._auth, allow_redirects=False) as response:
            raw = await _read_small(response, 64 * 1024)
            status = response.status
        if status != 200:
            message = f"Graph answered HTTP {status}: {_graph_message(raw)}"
            raise self._error("download_failed", message, status)
        try:
            return _GraphMedia.model_validate_json(raw)
        except ValidationError:
            message = f"unexpected Graph answer: {raw[:200]!r}"
            raise self._error("download_failed", message, status) from None


class _GraphError(BaseModel):
    message: str = ""
    code: int | None = None


class _GraphErrorBody(BaseModel):
    error: _GraphError


def _graph_message(raw: bytes) -> str:
    """Graph's ``error.message`` when the body is Graph's error JSON, else the body's start."""
    try:
        error = _GraphErrorBody.model_validate_json(raw).error
    except ValidationError:
        return raw[:200].decode("utf-8", "replace")
    return f"{error.message} (code {error.code})" if error.code is not None else error.message
