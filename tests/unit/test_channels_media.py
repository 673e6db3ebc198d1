"""The media fetchers' pure parts: the origin allowlist, configuration, the port, errors,
and what a business-scoped user id looks like."""

from __future__ import annotations

import pytest
from yarl import URL

from channels import (
    META_MEDIA_HOSTS,
    TWILIO_MEDIA_HOSTS,
    WHATSAPP_MEDIA_TYPES,
    ChannelError,
    FetchedMedia,
    Media,
    MediaError,
    MediaFetcher,
    MetaMediaFetcher,
    TwilioMediaFetcher,
    is_bsuid,
)
from channels.media import _Origins

API = ("https", "api.twilio.com", 443)
LOOPBACK = ("http", "127.0.0.1", 8123)
ORIGINS = _Origins(frozenset({API, LOOPBACK}), TWILIO_MEDIA_HOSTS | META_MEDIA_HOSTS)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1",
        "https://api.twilio.com:443/x",
        "https://API.twilio.com/x",  # hosts compare case-insensitively
        "http://127.0.0.1:8123/x",
        "https://mms.twiliocdn.com/AC1/abc?Expires=1",
        "https://media.twiliocdn.com/AC1/abc",
        "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1&ext=2&hash=3",
    ],
)
def test_allowed_origins(url: str) -> None:
    assert ORIGINS.allows(URL(url))


@pytest.mark.parametrize(
    "url",
    [
        "http://api.twilio.com/x",  # another scheme
        "https://api.twilio.com:8443/x",  # another port
        "http://127.0.0.1:8124/x",  # loopback, another port
        "http://localhost:8123/x",  # the same server by another name
        "https://127.0.0.1:8123/x",
        "http://mms.twiliocdn.com/x",  # CDN hosts: https on 443 only
        "https://mms.twiliocdn.com:444/x",
        "https://evil.twiliocdn.com/x",  # exact hosts, no suffix match
        "https://lookaside.fbsbx.com.example.net/x",
        "https://example.net/lookaside.fbsbx.com",
        "https://lookaside.fbsbx.com@example.net/x",
        "https://user:pass@lookaside.fbsbx.com/x",  # userinfo would become credentials
        "https://s3-external-1.amazonaws.com/media",  # Twilio's legacy public host: left out
        "/relative/path",
        "ftp://api.twilio.com/x",
        "file:///etc/passwd",
    ],
)
def test_refused_origins(url: str) -> None:
    assert not ORIGINS.allows(URL(url))


async def test_a_forged_url_against_the_real_defaults_is_refused_without_the_network() -> None:
    # the test network is sealed to loopback: any request would fail as download_failed
    fetcher = TwilioMediaFetcher("AC1", "token")
    try:
        with pytest.raises(MediaError) as info:
            await fetcher.fetch(
                Media(kind="audio", url="https://example.net/2010-04-01/Accounts/AC1/Messages/"),
                max_bytes=1024,
            )
    finally:
        await fetcher.close()
    assert info.value.reason == "forbidden_host"


@pytest.mark.parametrize(
    "make",
    [
        lambda: TwilioMediaFetcher("", "token"),
        lambda: TwilioMediaFetcher("AC1", ""),
        lambda: TwilioMediaFetcher("AC1", "token", api_base_url="api.twilio.com"),
        lambda: TwilioMediaFetcher("AC1", "token", timeout=0),
        lambda: MetaMediaFetcher(""),
        lambda: MetaMediaFetcher("token", graph_base_url="ftp://graph.facebook.com"),
    ],
)
def test_bad_fetcher_configuration(make: object) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
        make()  # type: ignore[operator]


async def test_max_bytes_must_be_positive() -> None:
    fetcher = MetaMediaFetcher("token")
    with pytest.raises(ValueError, match="max_bytes"):
        await fetcher.fetch(Media(kind="audio", media_id="1"), max_bytes=0)


async def test_fetchers_satisfy_the_port_and_close_idempotently() -> None:
    fetchers = [TwilioMediaFetcher("AC1", "token"), MetaMediaFetcher("token")]
    assert [f.provider for f in fetchers] == ["twilio", "meta"]
    for fetcher in fetchers:
        assert isinstance(fetcher, MediaFetcher)
        await fetcher.close()
        await fetcher.close()


def test_media_error_fields() -> None:
    error = MediaError("too_large", "too big", provider="meta", status=None)
    assert isinstance(error, ChannelError)
    assert (error.reason, error.provider, str(error)) == ("too_large", "meta", "too big")
    assert error.http_status == 502


def test_fetched_media_keeps_its_bytes_out_of_logs() -> None:
    assert "\\x00" not in repr(FetchedMedia(bytes(10), "audio/ogg"))


def test_voice_notes_and_photos_are_accepted_types() -> None:
    assert {"audio/ogg", "audio/mpeg", "audio/mp4", "audio/amr", "audio/aac"} <= (
        WHATSAPP_MEDIA_TYPES
    )
    assert {"image/jpeg", "image/png", "image/webp"} <= WHATSAPP_MEDIA_TYPES
    assert "video/mp4" not in WHATSAPP_MEDIA_TYPES


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("BR.1502576394655843", True),
        ("US.13491208655302741918", True),
        ("US.ENT.11815799212886844830", True),  # a parent BSUID
        (" BR.1502576394655843 ", True),
        ("+5511999990000", False),
        ("5511999990000", False),
        ("whatsapp:+5511999990000", False),
        ("br.1502576394655843", False),
        ("BRA.1502576394655843", False),
        ("BR.", False),
        ("BR.15025-76394", False),
        ("BR." + "1" * 129, False),
    ],
)
def test_is_bsuid(value: str, expected: bool) -> None:
    assert is_bsuid(value) is expected
