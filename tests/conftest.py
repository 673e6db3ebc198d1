"""Shared fixtures: a real Redis server, fresh per test; the network sealed off."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

import guard
from gateway.store.embedded import EmbeddedRedis

_LOOPBACK = ("127.", "::1", "localhost")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``pure_python`` test replaces something the compiled guard calls directly (a module's
    function or constant), which only the pure guard would see: ``make test`` runs those in a
    second pass with the guard as pure Python (``MEL_GUARD_PURE``)."""
    if guard.COMPILED and item.get_closest_marker("pure_python") is not None:
        pytest.skip("needs the pure-Python guard: make test runs it in its MEL_GUARD_PURE pass")


@pytest.fixture(autouse=True)
def _no_internet(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach the internet, a real LLM or a real provider: make it impossible."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> object:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = str(address[0]) if isinstance(address, tuple) else str(address)
            if not host.startswith(_LOOPBACK):
                raise OSError(f"tests may not reach {host}: only loopback is allowed")
        return real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guarded)
    for var in ("OPENAI_API_KEY", "LLM_API_KEY", "LLM_BASE_URL", "TWILIO_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis: ``REDIS_URL`` when set, else an embedded redis-server."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    server = EmbeddedRedis(Path(tmp_path_factory.mktemp("redis")), appendonly=False)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A client on a freshly emptied database, closed after the test."""
    client: aioredis.Redis = aioredis.from_url(redis_url)
    await client.flushdb()
    try:
        yield client
    finally:
        await client.aclose()
