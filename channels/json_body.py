"""Bounded JSON decoding for webhook bodies: hostile input never raises anything but
``MalformedPayload``.

``json.loads`` alone lets through what later breaks the gateway: 5,000 nested arrays
(``RecursionError``), an integer over 4,300 digits (``ValueError``), and lone surrogates
(``"\\ud800"``: valid JSON, but the text cannot be encoded as UTF-8 for Redis).
"""

from __future__ import annotations

import json
import re
from typing import Any

from channels.errors import MalformedPayload

__all__ = ["MAX_JSON_DEPTH", "load_json", "repair_text"]

#: Deepest nesting accepted. A Meta delivery is about 10 levels deep (a shared contact's
#: phone inside a message inside a change inside an entry); 32 leaves room for growth.
MAX_JSON_DEPTH = 32

# A JSON string literal (escapes included), matched in one C-speed pass so that brackets
# inside texts ("[[[oi]]]") do not count as nesting.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_ONE_KIND = str.maketrans("{}", "[]")  # depth does not care which kind of bracket
# A \uD800-\uDFFF escape: only these can put a surrogate into the decoded text (the
# body itself was decoded from UTF-8, which has no surrogates).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def load_json(text: str, *, provider: str | None = None, what: str = "body") -> Any:
    """Decode ``text``; ``MalformedPayload`` naming ``what`` for anything but bounded JSON.

    Nesting deeper than ``MAX_JSON_DEPTH`` is refused before decoding. Lone surrogates
    (from ``\\ud800``-style escapes) are repaired to U+FFFD wherever they occur (keys
    included), so one bad character never poisons a delivery.
    """
    depth = _nesting_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise MalformedPayload(
            f"{what} is nested deeper than {MAX_JSON_DEPTH} levels", provider=provider
        )
    try:
        data = json.loads(text)
    except RecursionError:  # unbalanced brackets slipped past the count
        raise MalformedPayload(f"{what} is nested too deeply", provider=provider) from None
    except ValueError as exc:  # JSONDecodeError, and int() over 4,300 digits
        raise MalformedPayload(f"{what} is not JSON: {str(exc)[:120]}", provider=provider) from None
    if _SURROGATE_ESCAPE.search(text):
        data = _repair(data)
    return data


def repair_text(value: str) -> str:
    """``value`` with every lone surrogate replaced by U+FFFD (fit for UTF-8 and Redis)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", value)
    return value


def _nesting_depth(text: str) -> int:
    """How deeply ``text`` nests (at most ``MAX_JSON_DEPTH + 1``): strings and scalars are
    dropped, then empty bracket pairs peeled off one level per round, in C-speed passes."""
    brackets = _NOT_BRACKETS.sub("", _STRING.sub("", text)).translate(_ONE_KIND)
    depth = 0
    while brackets and depth <= MAX_JSON_DEPTH:
        peeled = brackets.replace("[]", "")
        if len(peeled) == len(brackets):  # unbalanced: json.loads will say where
            break
        brackets = peeled
        depth += 1
    return depth


def _repair(data: Any) -> Any:
    # Depth is bounded by MAX_JSON_DEPTH, so recursion is safe here.
    if isinstance(data, str):
        return repair_text(data)
    if isinstance(data, list):
        return [_repair(item) for item in data]
    if isinstance(data, dict):
        return {repair_text(key): _repair(value) for key, value in data.items()}
    return data
