"""The aiohttp application factory, used by ``serve`` and by the tests."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import structlog
from aiohttp import web

from gateway.bootstrap import Components
from gateway.errors import GatewayError
from gateway.http.keys import COMPONENTS, METRICS, SETTINGS, STORE, TWILIO_TOKEN, WORKER
from gateway.http.support import create_support_app
from gateway.http.webhooks import routes as webhook_routes
from gateway.metrics import Metrics
from gateway.settings import Settings
from gateway.store.threads import StoreDown
from gateway.workers.services import Services

__all__ = ["create_app"]

log = structlog.get_logger("gateway.http.app")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def context_and_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Bind a request id to the logs; map the project's errors to HTTP statuses."""
    structlog.contextvars.clear_contextvars()
    request_id = request.headers.get("X-Request-Id") or uuid.uuid4().hex[:16]
    structlog.contextvars.bind_contextvars(request_id=request_id)
    try:
        response = await handler(request)
    except GatewayError as exc:
        log.info("http.error", status=exc.status, error=exc.message, path=request.path)
        response = web.json_response({"error": exc.message}, status=exc.status)
    except StoreDown as exc:
        log.warning("http.redis_unavailable", error=str(exc), path=request.path)
        response = web.json_response(
            {"error": "message store unavailable, retry later"}, status=503
        )
    response.headers["X-Request-Id"] = request_id
    return response


async def healthz(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    checks: dict[str, str] = {}
    try:
        await request.app[STORE].redis.ping()
        checks["redis"] = "ok"
    except StoreDown as exc:
        checks["redis"] = f"unavailable: {exc}"
    worker = request.app[WORKER]
    if worker is not None:
        checks["worker"] = "ok" if worker.running else "not running"
    ready = all(v == "ok" for v in checks.values())
    return web.json_response(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status=200 if ready else 503,
    )


async def metrics(request: web.Request) -> web.Response:
    m = request.app[METRICS]
    with contextlib.suppress(*StoreDown):
        depth, pending, lag = await request.app[STORE].queue_stats()
        m.queue_depth.set(depth)
        m.queue_pending.set(pending)
        m.queue_lag.set(lag)
    return web.Response(body=m.render(), content_type="text/plain", charset="utf-8")


def create_app(settings: Settings, *, run_worker: bool = True) -> web.Application:
    """The gateway: webhooks, health, metrics; the worker in-process unless told not to."""
    max_body = max(settings.max_body_twilio, settings.max_body_meta)
    app = web.Application(middlewares=[context_and_errors], client_max_size=max_body)
    app[SETTINGS] = settings
    app[METRICS] = Metrics()
    app[WORKER] = None

    async def components_ctx(app: web.Application) -> AsyncIterator[None]:
        async with Components(settings, app[METRICS]) as components:
            app[COMPONENTS] = components
            app[STORE] = components.store
            app[TWILIO_TOKEN] = components.twilio_token
            yield

    async def services_ctx(app: web.Application) -> AsyncIterator[None]:
        services = Services(app[COMPONENTS], settings)
        app[WORKER] = services.worker
        services.start()
        yield
        await services.stop()

    app.cleanup_ctx.append(components_ctx)
    if run_worker:
        app.cleanup_ctx.append(services_ctx)
    app.router.add_routes(webhook_routes)
    app.add_subapp("/support/", create_support_app())
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app
