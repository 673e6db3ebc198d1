"""What every fake provider server shares: an aiohttp app on loopback, a free port."""

from __future__ import annotations

from collections.abc import AsyncIterator
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
