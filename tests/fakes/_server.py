"""What every fake provider server shares: an aiohttp app on loopback, a free port."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self

from aiohttp import web


class LoopbackServer:
    """Serve ``routes()`` on 127.0.0.1; ``async with`` it, or ``async with X.running(…)``."""

    host = "127.0.0.1"

    def __init__(self) -> None:
        self.base_url = ""
        self._runner: web.AppRunner | None = None

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def runner_options(self) -> dict[str, Any]:
        return {"access_log": None}

    @classmethod
    @asynccontextmanager
    async def running(cls, *args: Any, **kwargs: Any) -> AsyncIterator[Self]:
        """Start on a free port, yield, stop."""
        server = cls(*args, **kwargs)
        await server.start()
        try:
            yield server
        finally:
            await server.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, **self.runner_options())
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


class RecordingServer(LoopbackServer):
    """A fake provider that records what it accepted (``messages``) and every request
    (``requests``), and lets a test wait for them."""

    label = "fake"

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self._changed = asyncio.Condition()

    async def wait_for_messages(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait until at least ``n`` messages were accepted; all accepted so far."""
        await self._wait(lambda: len(self.messages) >= n, timeout, f"{n} messages")
        return list(self.messages)

    async def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait until at least ``n`` requests arrived (accepted or not)."""
        await self._wait(lambda: len(self.requests) >= n, timeout, f"{n} requests")
        return list(self.requests)

    def _counts(self) -> str:
        return f"{len(self.messages)} messages / {len(self.requests)} requests"

    async def _wait(self, ready: Callable[[], bool], seconds: float, what: str) -> None:
        try:
            async with asyncio.timeout(seconds), self._changed:
                await self._changed.wait_for(ready)
        except TimeoutError:
            raise AssertionError(
                f"{self.label}: expected {what} within {seconds}s, got {self._counts()}"
            ) from None
