"""The support console: a web page under ``/console/`` where support agents log in,
watch the queue, claim, answer, release and close, and decide on the psychologist's
insights (``docs/console.md``)."""

from __future__ import annotations

from aiohttp import web

from gateway.http.console.api import routes as api_routes
from gateway.http.console.auth import console_guard, login, logout, me, security_headers
from gateway.http.console.static import routes as static_routes

__all__ = ["create_console_app"]


def create_console_app() -> web.Application:
    app = web.Application(middlewares=[console_guard])
    app.on_response_prepare.append(security_headers)
    app.router.add_routes(static_routes)
    app.router.add_post("/api/login", login)
    app.router.add_post("/api/logout", logout)
    app.router.add_get("/api/me", me)
    app.router.add_routes(api_routes)
    return app
