"""Typed application keys: what the app holds, under which name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from gateway.bootstrap import Components
    from gateway.metrics import Metrics
    from gateway.settings import Settings
    from gateway.store import Store

__all__ = ["COMPONENTS", "METRICS", "SETTINGS", "STORE"]

SETTINGS: web.AppKey[Settings] = web.AppKey("settings")
METRICS: web.AppKey[Metrics] = web.AppKey("metrics")
COMPONENTS: web.AppKey[Components] = web.AppKey("components")
STORE: web.AppKey[Store] = web.AppKey("store")
