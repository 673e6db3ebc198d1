"""Small conversions shared by the store modules."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

__all__ = ["as_str", "dumps", "pairs"]


def as_str(value: Any) -> str:
    """A Redis reply value as text (bytes decoded, None as "")."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode()
    return str(value)


def pairs(flat: Sequence[Any]) -> dict[str, str]:
    """A flat ``HGETALL`` reply from a script (k1, v1, k2, v2, …) as a dict."""
    return {as_str(flat[i]): as_str(flat[i + 1]) for i in range(0, len(flat), 2)}


def dumps(data: Any) -> str:
    """Compact JSON text (orjson; the standard library for what it refuses, such as an
    integer over 64 bits)."""
    try:
        return orjson.dumps(data).decode()
    except TypeError:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
