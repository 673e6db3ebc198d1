"""MetaMediaFetcher against the fake Graph API: media id → url → download, both with the
bearer token; limits and the origin allowlist."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from channels import FetchedMedia, Media, MediaError, MediaFetcher, MetaMediaFetcher
from tests.fakes.graph_api import FakeGraphAPI
from tests.fakes.media import ForbiddenHost

VOICE_NOTE = b"OggS\x00\x02" + bytes(range(256)) * 40
RECEIPT = b"\x89PNG\r\n\x1a\n" + b"IDAT" * 3000
BIG = bytes(64 * 1024 * 1024)
MiB = 1024 * 1024


@pytest.fixture
async def fake() -> AsyncIterator[FakeGraphAPI]:
    async with FakeGraphAPI.running() as api:
        yield api


@pytest.fixture
async def elsewhere() -> AsyncIterator[ForbiddenHost]:
    async with ForbiddenHost.running() as host:
        yield host


@pytest.fixture
async def fetcher(fake: FakeGraphAPI) -> AsyncIterator[MetaMediaFetcher]:
    meta = MetaMediaFetcher(fake.access_token, graph_base_url=fake.base_url)
    await meta.start()
    yield meta
    await meta.close()


def voice(media_id: str, mime: str | None = "audio/ogg; codecs=opus") -> Media:
    return Media(kind="audio", media_id=media_id, mime_type=mime)


async def test_a_voice_note_is_fetched_with_the_bearer_token_twice(
    fake: FakeGraphAPI, fetcher: MetaMediaFetcher
) -> None:
    assert isinstance(fetcher, MediaFetcher)
    served = fake.add_media(VOICE_NOTE, "audio/ogg; codecs=opus")
    fetched = await fetcher.fetch(voice(served.media_id), max_bytes=16 * MiB)
    assert fetched == FetchedMedia(VOICE_NOTE, "audio/ogg", None)
    info, download = fake.requests
    assert info["path"] == f"/v21.0/{served.media_id}"
    assert download["path"].startswith(f"/whatsapp_business/attachments/?mid={served.media_id}&")
    bearer = f"Bearer {fake.access_token}"
    assert [(r["status"], r["authorization"]) for r in fake.requests] == [
        (200, bearer),
        (200, bearer),
    ]


async def test_an_image_with_its_document_name(
    fake: FakeGraphAPI, fetcher: MetaMediaFetcher
) -> None:
    served = fake.add_media(RECEIPT, "image/png")
    media = Media(kind="image", media_id=served.media_id, mime_type="image/png", filename="nota")
    fetched = await fetcher.fetch(media, max_bytes=len(RECEIPT))
    assert (fetched.data, fetched.content_type, fetched.filename) == (RECEIPT, "image/png", "nota")


async def test_the_api_version_is_configurable(fake: FakeGraphAPI) -> None:
    served = fake.add_media(VOICE_NOTE, "audio/ogg")
    fetcher = MetaMediaFetcher(fake.access_token, graph_base_url=fake.base_url, api_version="v23.0")
    try:
        await fetcher.fetch(voice(served.media_id), max_bytes=MiB)
    finally:
        await fetcher.close()
    assert fake.requests[0]["path"] == f"/v23.0/{served.media_id}"


async def test_wrong_token(fake: FakeGraphAPI) -> None:
    served = fake.add_media(VOICE_NOTE, "audio/ogg")
    fetcher = MetaMediaFetcher("wrong-token", graph_base_url=fake.base_url)
    try:
        with pytest.raises(MediaError, match="Invalid OAuth access token") as info:
            await fetcher.fetch(voice(served.media_id), max_bytes=MiB)
    finally:
        await fetcher.close()
    assert (info.value.reason, info.value.status, info.value.provider) == (
        "download_failed",
        401,
        "meta",
    )
    assert len(fake.requests) == 1
    assert served.bytes_sent == 0


async def test_unknown_media_id(fake: FakeGraphAPI, fetcher: MetaMediaFetcher) -> None:
    with pytest.raises(MediaError, match="does not exist") as info:
        await fetcher.fetch(voice("1234567890"), max_bytes=MiB)
    assert (info.value.reason, info.value.status) == ("download_failed", 400)


@pytest.mark.parametrize("media_id", ["../me", "123/messages", "", None, "1?x=2"])
async def test_a_malformed_media_id_is_not_requested(
    fake: FakeGraphAPI, fetcher: MetaMediaFetcher, media_id: str | None
) -> None:
    with pytest.raises(MediaError) as info:
        await fetcher.fetch(Media(kind="audio", media_id=media_id), max_bytes=MiB)
    assert info.value.reason == "download_failed"
    assert fake.requests == []


async def test_too_large_by_declared_size_is_not_downloaded(
    fake: FakeGraphAPI, fetcher: MetaMediaFetcher
) -> None:
    served = fake.add_media(BIG, "audio/ogg")
    with pytest.raises(MediaError, match="declared") as info:
        await fetcher.fetch(voice(served.media_id), max_bytes=MiB)
    assert info.value.reason == "too_large"
    assert len(fake.requests) == 1  # the metadata only
    assert served.bytes_sent == 0


async def test_too_large_is_stopped_while_streaming(
    fake: FakeGraphAPI, fetcher: MetaMediaFetcher
) -> None:
    served = fake.add_media(BIG, "audio/ogg", chunked=True, declared_size=1000)  # Graph lies
    with pytest.raises(MediaError, match="stopped reading") as info:
        await fetcher.fetch(voice(served.media_id), max_bytes=MiB)
    assert info.value.reason == "too_large"
    await asyncio.wait_for(served.ended.wait(), 10)
    assert (served.aborted, served.completed) == (1, 0)
    assert served.bytes_sent < len(BIG) // 4, served.bytes_sent


async def test_an_unsupported_type_declared_by_graph_is_not_downloaded(
    fake: FakeGraphAPI, fetcher: MetaMediaFetcher
) -> None:
    served = fake.add_media(b"%PDF-1.7", "application/pdf")
    with pytest.raises(MediaError) as info:
        await fetcher.fetch(Media(kind="document", media_id=served.media_id), max_bytes=MiB)
    assert info.value.reason == "unsupported_type"
    assert len(fake.requests) == 1


async def test_an_unsupported_type_in_the_webhook_is_not_requested(
    fake: FakeGraphAPI, fetcher: MetaMediaFetcher
) -> None:
    served = fake.add_media(b"\x00\x00\x00\x18ftypmp42", "video/mp4")
    media = Media(kind="video", media_id=served.media_id, mime_type="video/mp4")
    with pytest.raises(MediaError) as info:
        await fetcher.fetch(media, max_bytes=MiB)
    assert info.value.reason == "unsupported_type"
    assert fake.requests == []


async def test_a_download_url_elsewhere_is_never_requested(
    fake: FakeGraphAPI, fetcher: MetaMediaFetcher, elsewhere: ForbiddenHost
) -> None:
    url = f"{elsewhere.base_url}/whatsapp_business/attachments/?mid=1"
    served = fake.add_media(VOICE_NOTE, "audio/ogg", download_url=url)
    with pytest.raises(MediaError, match="not fetched") as info:
        await fetcher.fetch(voice(served.media_id), max_bytes=MiB)
    assert info.value.reason == "forbidden_host"
    await asyncio.sleep(0.1)
    assert elsewhere.requests == []  # and the bearer token never went there
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1",  # not https
        "https://lookaside.fbsbx.com:8443/whatsapp_business/attachments/?mid=1",  # port
        "https://lookaside.fbsbx.com.example.net/x",  # look-alike
        "https://graph.facebook.com@example.net/x",  # userinfo trick
        "not a url at all",
    ],
)
async def test_look_alike_download_urls_are_refused(
    fake: FakeGraphAPI, fetcher: MetaMediaFetcher, url: str
) -> None:
    # the network is sealed to loopback: a refusal after a request would be download_failed
    served = fake.add_media(VOICE_NOTE, "audio/ogg", download_url=url)
    with pytest.raises(MediaError) as info:
        await fetcher.fetch(voice(served.media_id), max_bytes=MiB)
    assert info.value.reason == "forbidden_host"


async def test_a_redirect_to_another_origin_is_refused(
    fake: FakeGraphAPI, fetcher: MetaMediaFetcher, elsewhere: ForbiddenHost
) -> None:
    served = fake.add_media(VOICE_NOTE, "audio/ogg", redirect_to=f"{elsewhere.base_url}/x")
    with pytest.raises(MediaError, match="redirect") as info:
        await fetcher.fetch(voice(served.media_id), max_bytes=MiB)
    assert info.value.reason == "forbidden_host"
    await asyncio.sleep(0.1)
    assert elsewhere.requests == []
    assert [r["status"] for r in fake.requests] == [200, 302]


async def test_a_redirect_within_the_origin_keeps_the_token(
    fake: FakeGraphAPI, fetcher: MetaMediaFetcher
) -> None:
    target = fake.add_media(RECEIPT, "image/png")
    served = fake.add_media(VOICE_NOTE, "image/png", redirect_to=target.url)
    fetched = await fetcher.fetch(Media(kind="image", media_id=served.media_id), max_bytes=MiB)
    assert fetched.data == RECEIPT
    assert [r["status"] for r in fake.requests] == [200, 302, 200]
    assert {r["authorization"] for r in fake.requests} == {f"Bearer {fake.access_token}"}
