"""The console's page: three static files shipped as package data (``static/``), read
once, served as they are (no build step)."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Final

from aiohttp import web

__all__ = ["FILES", "routes"]

FILES: Final = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "app.css": "text/css",
    "icon.svg": "image/svg+xml",
}

routes = web.RouteTableDef()


@cache
def _read(name: str) -> bytes:
    return (files("gateway.http.console") / "static" / name).read_bytes()


def _file(name: str) -> web.Response:
    return web.Response(body=_read(name), content_type=FILES[name], charset="utf-8")


@routes.get("/")
async def index(_request: web.Request) -> web.Response:
    return _file("index.html")


@routes.get("/{name:app\\.js|app\\.css|icon\\.svg}")
async def asset(request: web.Request) -> web.Response:
    return _file(request.match_info["name"])
