"""The raw contents of ``guard/lexicon.toml``, read once at import, with typed access.

The file is the guard's data (word lists, phrase patterns, synonym groups); its header
says how to extend it. Here it is only read and checked: a missing table or a value of the
wrong type raises ``LexiconError`` naming the dotted path ("frustration.at_you.terms"), so
a typo in the file fails the guard's tests with a message a non-programmer can act on.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Final

__all__ = ["RAW", "LexiconError", "load", "string", "strings", "table"]

FILE: Final = "lexicon.toml"


class LexiconError(ValueError):
    """``guard/lexicon.toml`` is missing something the guard needs, or has a wrong type."""


def load() -> dict[str, object]:
    """Parse ``guard/lexicon.toml`` (shipped inside the package)."""
    text = resources.files("guard").joinpath(FILE).read_text(encoding="utf-8")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LexiconError(f"{FILE}: {exc}") from None


RAW: Final = load()


def _get(path: str) -> object:
    node: object = RAW
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise LexiconError(f"{FILE}: '{path}' is missing")
        node = node[part]
    return node


def table(path: str) -> dict[str, object]:
    """The TOML table at ``path`` ("loop.topics")."""
    value = _get(path)
    if not isinstance(value, dict):
        raise LexiconError(f"{FILE}: '{path}' must be a table")
    return value


def strings(path: str, value: object = None) -> list[str]:
    """The list of strings at ``path`` (or ``value`` when given, named ``path``)."""
    value = _get(path) if value is None else value
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise LexiconError(f"{FILE}: '{path}' must be a list of quoted strings")
    return value


def string(path: str, value: object = None) -> str:
    """The string at ``path`` (or ``value`` when given, named ``path``)."""
    value = _get(path) if value is None else value
    if not isinstance(value, str):
        raise LexiconError(f"{FILE}: '{path}' must be a quoted string")
    return value
