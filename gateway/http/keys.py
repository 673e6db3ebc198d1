"""Typed application keys: what the app holds, under which name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from gateway.bootstrap import Components
    from gateway.metrics import Metrics
    from gateway.settings import Settings
    from gateway.store.threads import Store
    from gateway.workers.turns import Worker

__all__ = ["COMPONENTS", "METRICS", "SETTINGS", "STORE", "TWILIO_TOKEN", "WORKER"]

SETTINGS: web.AppKey[Settings] = web.AppKey("settings")
METRICS: web.AppKey[Metrics] = web.AppKey("metrics")
STORE: web.AppKey[Store] = web.AppKey("store")
COMPONENTS: web.AppKey[Components] = web.AppKey("components")
WORKER: web.AppKey[Worker | None] = web.AppKey("worker")
TWILIO_TOKEN: web.AppKey[str | None] = web.AppKey("twilio_token")
