"""TwilioMediaFetcher against the fake Twilio API: Basic auth, the CDN redirect, limits."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from channels import FetchedMedia, Media, MediaError, MediaFetcher, TwilioMediaFetcher
from tests.fakes.media import ForbiddenHost
from tests.fakes.twilio_api import FakeTwilioAPI

VOICE_NOTE = b"OggS\x00\x02" + bytes(range(256)) * 40  # ~10 KiB of "opus"
RECEIPT = b"\xff\xd8\xff\xe0" + b"JFIF" * 2000
BIG = bytes(64 * 1024 * 1024)  # 64 MiB: far more than socket buffers hold
MiB = 1024 * 1024


@pytest.fixture
async def fake() -> AsyncIterator[FakeTwilioAPI]:
    async with FakeTwilioAPI.running() as api:
        yield api


@pytest.fixture
async def elsewhere() -> AsyncIterator[ForbiddenHost]:
    async with ForbiddenHost.running() as host:
        yield host


@pytest.fixture
async def fetcher(fake: FakeTwilioAPI) -> AsyncIterator[TwilioMediaFetcher]:
    twilio = TwilioMediaFetcher(fake.account_sid, fake.auth_token, api_base_url=fake.base_url)
    yield twilio
    await twilio.close()


def audio(url: str, mime: str | None = "audio/ogg") -> Media:
    return Media(kind="audio", url=url, mime_type=mime)


async def test_a_voice_note_is_fetched_through_the_cdn_redirect(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher
) -> None:
    served = fake.add_media(VOICE_NOTE, "audio/ogg")
    fetched = await fetcher.fetch(audio(served.url), max_bytes=16 * MiB)
    assert fetched == FetchedMedia(VOICE_NOTE, "audio/ogg", None)
    media_url, cdn = fake.requests
    basic = aiohttp.BasicAuth(fake.account_sid, fake.auth_token).encode()
    assert (media_url["status"], media_url["authorization"]) == (307, basic)
    assert cdn["path"].startswith(f"/twiliocdn/{fake.account_sid}/")
    assert cdn["status"] == 200
    assert cdn["authorization"] is None  # the credentials never follow the redirect
    assert served.completed == 1


async def test_an_image_keeps_its_file_name(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher
) -> None:
    served = fake.add_media(RECEIPT, "image/jpeg", filename="fatura.jpg")
    fetched = await fetcher.fetch(
        Media(kind="image", url=served.url, mime_type="image/jpeg"), max_bytes=len(RECEIPT)
    )
    assert (fetched.data, fetched.content_type, fetched.filename) == (
        RECEIPT,
        "image/jpeg",
        "fatura.jpg",
    )


async def test_wrong_credentials(fake: FakeTwilioAPI) -> None:
    served = fake.add_media(VOICE_NOTE, "audio/ogg")
    fetcher = TwilioMediaFetcher(fake.account_sid, "wrong-token", api_base_url=fake.base_url)
    try:
        with pytest.raises(MediaError) as info:
            await fetcher.fetch(audio(served.url), max_bytes=MiB)
    finally:
        await fetcher.close()
    assert (info.value.reason, info.value.status, info.value.provider) == (
        "download_failed",
        401,
        "twilio",
    )
    assert [r["status"] for r in fake.requests] == [401]  # the CDN was never reached
    assert served.bytes_sent == 0


async def test_too_large_by_content_length_is_refused_before_the_body(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher
) -> None:
    served = fake.add_media(BIG, "audio/ogg")
    with pytest.raises(MediaError, match="announced") as info:
        await fetcher.fetch(audio(served.url), max_bytes=MiB)
    assert info.value.reason == "too_large"
    await asyncio.wait_for(served.ended.wait(), 10)
    assert served.completed == 0
    assert served.bytes_sent < len(BIG) // 4


async def test_too_large_is_stopped_while_streaming(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher
) -> None:
    served = fake.add_media(BIG, "audio/ogg", chunked=True)  # no Content-Length to go by
    with pytest.raises(MediaError, match="stopped reading") as info:
        await fetcher.fetch(audio(served.url), max_bytes=MiB)
    assert info.value.reason == "too_large"
    await asyncio.wait_for(served.ended.wait(), 10)
    assert (served.aborted, served.completed) == (1, 0)
    assert served.bytes_sent < len(BIG) // 4, served.bytes_sent  # the fake did not send it all


async def test_exactly_max_bytes_is_accepted(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher
) -> None:
    served = fake.add_media(VOICE_NOTE, "audio/ogg", chunked=True)
    fetched = await fetcher.fetch(audio(served.url), max_bytes=len(VOICE_NOTE))
    assert fetched.data == VOICE_NOTE


async def test_a_declared_unsupported_type_is_not_downloaded(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher
) -> None:
    served = fake.add_media(b"\x00\x00\x00\x18ftypmp42", "video/mp4")
    with pytest.raises(MediaError) as info:
        await fetcher.fetch(
            Media(kind="video", url=served.url, mime_type="video/mp4"), max_bytes=MiB
        )
    assert info.value.reason == "unsupported_type"
    assert fake.requests == []


async def test_a_served_unsupported_type_is_refused(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher
) -> None:
    served = fake.add_media(b"%PDF-1.7 extrato", "application/pdf")
    with pytest.raises(MediaError, match="application/pdf") as info:
        await fetcher.fetch(Media(kind="document", url=served.url), max_bytes=MiB)
    assert info.value.reason == "unsupported_type"


async def test_a_generic_served_type_falls_back_to_the_declared_one(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher
) -> None:
    served = fake.add_media(VOICE_NOTE, "application/octet-stream")
    fetched = await fetcher.fetch(audio(served.url, "audio/ogg; codecs=opus"), max_bytes=MiB)
    assert fetched.content_type == "audio/ogg"


async def test_a_forged_url_on_another_port_is_never_requested(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher, elsewhere: ForbiddenHost
) -> None:
    served = fake.add_media(VOICE_NOTE, "audio/ogg")
    forged = served.url.replace(fake.base_url, elsewhere.base_url)
    with pytest.raises(MediaError, match="not fetched") as info:
        await fetcher.fetch(audio(forged), max_bytes=MiB)
    assert info.value.reason == "forbidden_host"
    await asyncio.sleep(0.1)
    assert elsewhere.requests == []
    assert fake.requests == []


@pytest.mark.parametrize(
    "forge",
    [
        lambda url: url.replace("127.0.0.1", "localhost"),  # same port, another host
        lambda url: url.replace("http://", "https://"),  # another scheme
        lambda url: url.replace("http://", "http://AC:token@"),  # userinfo
        lambda url: url.replace("/Accounts/AC", "/Accounts/AX"),  # another account
        lambda url: url.split("/Messages/")[0] + "/Messages.json",  # not a media
        lambda url: "/2010-04-01/Accounts/x/Messages/y/Media/z",  # relative
        lambda url: "file:///etc/passwd",
    ],
)
async def test_other_forged_urls_are_refused_without_a_request(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher, forge: object
) -> None:
    served = fake.add_media(VOICE_NOTE, "audio/ogg")
    with pytest.raises(MediaError) as info:
        await fetcher.fetch(audio(forge(served.url)), max_bytes=MiB)  # type: ignore[operator]
    assert info.value.reason == "forbidden_host"
    assert fake.requests == []


async def test_a_redirect_to_another_origin_is_refused(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher, elsewhere: ForbiddenHost
) -> None:
    served = fake.add_media(VOICE_NOTE, "audio/ogg", redirect_to=f"{elsewhere.base_url}/cdn/x")
    with pytest.raises(MediaError, match="redirect") as info:
        await fetcher.fetch(audio(served.url), max_bytes=MiB)
    assert info.value.reason == "forbidden_host"
    await asyncio.sleep(0.1)
    assert elsewhere.requests == []
    assert [r["status"] for r in fake.requests] == [307]


async def test_a_redirect_to_the_real_cdn_over_http_is_refused(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher
) -> None:
    # the real CDN host is allowed over https only; the sealed network proves no request
    served = fake.add_media(VOICE_NOTE, "audio/ogg", redirect_to="http://mms.twiliocdn.com/x")
    with pytest.raises(MediaError) as info:
        await fetcher.fetch(audio(served.url), max_bytes=MiB)
    assert info.value.reason == "forbidden_host"


async def test_a_media_without_url(fetcher: TwilioMediaFetcher) -> None:
    with pytest.raises(MediaError) as info:
        await fetcher.fetch(Media(kind="audio", media_id="123"), max_bytes=MiB)
    assert info.value.reason == "download_failed"


async def test_timeout(aiohttp_server: AiohttpServer) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(2)
        return web.Response(body=VOICE_NOTE, content_type="audio/ogg")

    app = web.Application()
    app.router.add_get("/{tail:.*}", slow)
    server = await aiohttp_server(app)
    base = str(server.make_url("")).rstrip("/")
    fetcher = TwilioMediaFetcher("AC1", "token", api_base_url=base, timeout=0.2)
    try:
        with pytest.raises(MediaError) as info:
            await fetcher.fetch(
                audio(f"{base}/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1"), max_bytes=MiB
            )
    finally:
        await fetcher.close()
    assert info.value.reason == "timeout"


async def test_connection_refused() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    fetcher = TwilioMediaFetcher("AC1", "token", api_base_url=base)
    try:
        with pytest.raises(MediaError, match="cannot connect") as info:
            await fetcher.fetch(
                audio(f"{base}/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1"), max_bytes=MiB
            )
    finally:
        await fetcher.close()
    assert info.value.reason == "download_failed"


async def test_close_is_idempotent_and_the_fetcher_reopens(
    fake: FakeTwilioAPI, fetcher: TwilioMediaFetcher
) -> None:
    assert isinstance(fetcher, MediaFetcher)
    served = fake.add_media(VOICE_NOTE, "audio/ogg")
    await fetcher.fetch(audio(served.url), max_bytes=MiB)
    await fetcher.close()
    await fetcher.close()
    assert (await fetcher.fetch(audio(served.url), max_bytes=MiB)).data == VOICE_NOTE
