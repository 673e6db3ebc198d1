"""The Lua scripts (``scripts/*.lua``, package data), registered once per client.

Each script file starts with its contract (KEYS, ARGV, what it returns or raises). A line
``-- uses: emit, state`` prepends those functions from ``scripts/lib/``.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript

__all__ = ["SCRIPT_NAMES", "Scripts", "script_source"]

SCRIPT_NAMES = (
    "act",
    "commit",
    "finish_reply",
    "ingest",
    "load",
    "mark_sending",
    "park",
    "publish",
    "record_failure",
    "record_refused",
    "release",
    "renew",
    "requeue",
    "save_analysis",
    "transition",
    "unpark",
)

_USES = "-- uses:"


@cache
def script_source(name: str) -> str:
    """The script's text with the library functions it uses in front."""
    folder = files("gateway.store") / "scripts"
    body = (folder / f"{name}.lua").read_text(encoding="utf-8")
    first = body.split("\n", 1)[0]
    libs = (
        [lib.strip() for lib in first[len(_USES) :].split(",")] if first.startswith(_USES) else []
    )
    parts = [(folder / "lib" / f"{lib}.lua").read_text(encoding="utf-8") for lib in libs]
    return "\n".join([*parts, body])


class Scripts:
    """Every script, registered on one client (``EVALSHA``, loaded again after a flush)."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._scripts: dict[str, AsyncScript] = {
            name: redis.register_script(script_source(name)) for name in SCRIPT_NAMES
        }

    async def run(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return await self._scripts[name](keys=keys, args=args)
