"""The aiohttp application factory, used by ``serve`` and by the tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from gateway.bootstrap import Components, Role, bootstrap
from gateway.http.console import create_console_app
from gateway.http.errors import context_and_errors
from gateway.http.feed import FEED, FeedHub
from gateway.http.keys import COMPONENTS, METRICS, SETTINGS, STORE
from gateway.http.support import create_support_app
from gateway.http.webhooks import routes as webhook_routes
from gateway.metrics import Metrics
from gateway.settings import Settings
from gateway.store import StoreDown

__all__ = ["create_app", "create_metrics_app", "server_options"]


async def healthz(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    checks: dict[str, str] = {}
    try:
        await request.app[STORE].ping()
        checks["redis"] = "ok"
    except StoreDown as exc:
        checks["redis"] = f"unavailable: {exc}"
    supervisor = request.app[COMPONENTS].supervisor
    if supervisor is not None:
        checks["worker"] = "ok" if supervisor.running else "not running"
    ready = all(v == "ok" for v in checks.values())
    return web.json_response(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status=200 if ready else 503,
    )


async def metrics(request: web.Request) -> web.Response:
    m = request.app[METRICS]
    if FEED in request.app:
        m.feed_streams.set(request.app[FEED].open_streams)
    with contextlib.suppress(StoreDown):
        depth, pending, lag = await request.app[STORE].ready.stats()
        m.queue_depth.set(depth)
        m.queue_pending.set(pending)
        m.queue_lag.set(lag)
    return web.Response(body=m.render(), content_type="text/plain", charset="utf-8")


def create_metrics_app(c: Components) -> web.Application:
    """``/metrics`` and ``/healthz`` of a ``worker`` or ``psychologist`` process
    (``MEL_METRICS_PORT``): its turns, pools and loop, for the same scraper as ``serve``."""
    app = web.Application()
    app[METRICS] = c.metrics
    app[STORE] = c.store
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    return app


def server_options(settings: Settings) -> dict[str, Any]:
    """aiohttp's server options: an idle (and header-reading) timeout, so slow or silent
    connections are closed rather than held forever."""
    return {"keepalive_timeout": settings.mel_http_idle_timeout_seconds}


def create_app(settings: Settings, *, run_worker: bool = True) -> web.Application:
    """The gateway: webhooks, the support API and console, health, metrics; the worker's jobs
    in-process unless told not to."""
    max_body = max(settings.max_body_twilio, settings.max_body_meta)
    app = web.Application(middlewares=[context_and_errors], client_max_size=max_body)
    app[SETTINGS] = settings
    app[METRICS] = Metrics()

    async def components(app: web.Application) -> AsyncIterator[None]:
        role: Role = "serve" if run_worker else "web"
        async with bootstrap(settings, role, metrics=app[METRICS]) as c:
            app[COMPONENTS] = c
            app[STORE] = c.store
            app[FEED] = FeedHub(c.store.own_event_log(), max_streams=settings.mel_feed_max_streams)
            if c.supervisor is not None:
                c.supervisor.start()
            try:
                yield
            finally:
                if c.supervisor is not None:
                    await c.supervisor.stop()

    async def end_feeds(app: web.Application) -> None:
        """Open event streams end at once: shutdown does not wait for viewers."""
        if FEED in app:
            await app[FEED].close()

    app.cleanup_ctx.append(components)
    app.on_shutdown.append(end_feeds)
    app.router.add_routes(webhook_routes)
    app.add_subapp("/support/", create_support_app())
    app.add_subapp("/console/", create_console_app())
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app
