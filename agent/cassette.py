"""LLM cassettes: record every chat completion once, replay it without the model.

:class:`CassetteLLM` is an :class:`~agent.llm.LLMClient` decorator. In ``record`` mode it
calls the real client and appends each request's response to a JSON-lines file; in
``replay`` mode it answers from that file and never calls a model. Answers become
reproducible, so a replay of recorded traffic against a changed build shows exactly the
replies the change altered (``mel-gateway replay diff``).

**The key** of a request is the SHA-256 of its canonical JSON: the profile name, the
messages (role, content, name, tool call id, tool calls), the tool schemas, tool_choice,
max_tokens and response_format. The model and temperature are not part of it (they come
from the profile's configuration, not from the conversation). Before hashing, the request
goes through ``normalise``; the default, :func:`mask_dates`, replaces the dates in the
system messages (the agent's system prompt says what day it is), so a cassette recorded
on Monday still answers on Tuesday. Pass another callable to mask more (or
``normalise=None`` to hash the request as it is).

**Repeats.** The n-th identical request of a run gets the n-th response recorded for it
(identical requests are common: "oi" as a first message, in every thread); past the last
recorded one, the last one is returned again.

**The file** holds one JSON object per line: ``{"v": 1, "key", "n", "profile",
"recorded_at", "request": {…normalised, tools as a hash…}, "response": {"message",
"usage", "model", "finish_reason"}}``. Record mode appends (one ``write`` per line on an
``O_APPEND`` descriptor, serialised within the process), so a restart keeps what was
recorded; delete the file to record afresh. A truncated last line (a crash mid-write) is
skipped when loading.

A replay **miss** raises :class:`CassetteMiss`, an :class:`~agent.errors.LLMError`, so
``AgentChat`` turns it into its failure reply like any model failure; the message names
the profile, the key and the last user message, and where the closest recorded request
of that profile differs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import structlog

from agent.errors import AgentError, LLMError
from agent.llm import LLMClient, LLMResponse, Usage
from agent.messages import ChatMessage

__all__ = [
    "CASSETTE_VERSION",
    "CassetteError",
    "CassetteLLM",
    "CassetteMiss",
    "CassetteMode",
    "Normaliser",
    "canonical_request",
    "mask_dates",
    "request_key",
]

CASSETTE_VERSION = 1
CassetteMode = Literal["record", "replay"]
Normaliser = Callable[[dict[str, Any]], dict[str, Any]]
"""Takes the canonical request (a fresh dict, free to change) and returns what is hashed."""

log = structlog.get_logger(__name__)

_WEEKDAY = r"(?:segunda|terça|quarta|quinta|sexta)-feira|sábado|domingo"
_LONG_DATE = re.compile(rf"\b(?:{_WEEKDAY}),?\s+\d{{1,2}}\s+de\s+\w+\s+de\s+\d{{4}}", re.I)
_ISO_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
)
_MONTH = re.compile(r"\b\d{4}-(?:0[1-9]|1[0-2])\b")
_SNIPPET = 60


class CassetteError(AgentError):
    """The cassette cannot be used (no file to replay, no model to record from, …)."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"LLM cassette {self.path}: {reason}")


class CassetteMiss(LLMError):
    """Replay mode met a request the cassette has no response for."""

    def __init__(self, profile: str, key: str, snippet: str, hint: str = "") -> None:
        self.key = key
        self.snippet = snippet
        reason = f"no recorded response for request {key[:16]} (last user message: {snippet!r})"
        super().__init__(profile, reason + (f"; {hint}" if hint else ""))

    @property
    def transient(self) -> bool:
        return False  # the cassette will not learn the answer by waiting


def canonical_request(
    profile: str,
    messages: Sequence[ChatMessage],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    max_tokens: int | None = None,
    response_format: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What identifies a request, as plain JSON data (a new dict each time)."""
    return {
        "profile": profile,
        "messages": [json.loads(json.dumps(m.to_openai(), ensure_ascii=False)) for m in messages],
        "tools": [json.loads(json.dumps(t)) for t in tools] if tools else None,
        "tool_choice": tool_choice,
        "max_tokens": max_tokens,
        "response_format": response_format,
    }


def mask_dates(request: dict[str, Any]) -> dict[str, Any]:
    """The default normaliser: dates and months in system messages become placeholders."""
    for message in request.get("messages") or ():
        content = message.get("content")
        if message.get("role") == "system" and isinstance(content, str):
            content = _LONG_DATE.sub("<date>", content)
            content = _ISO_DATE.sub("<date>", content)
            message["content"] = _MONTH.sub("<month>", content)
    return request


def _canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_key(request: dict[str, Any]) -> str:
    """The SHA-256 (hex) of a (normalised) request's canonical JSON."""
    return hashlib.sha256(_canonical_json(request).encode("utf-8")).hexdigest()


def _last_user_snippet(messages: Sequence[ChatMessage]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            text = " ".join(message.content.split())
            return text if len(text) <= _SNIPPET else text[: _SNIPPET - 1] + "…"
    return ""


def _response_json(response: LLMResponse) -> dict[str, Any]:
    u = response.usage
    return {
        "message": response.message.model_dump(mode="json", exclude_none=True),
        "usage": {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "cost_micro_usd": u.cost_micro_usd,
            "calls": u.calls,
        },
        "model": response.model,
        "finish_reason": response.finish_reason,
    }


def _response_from(data: dict[str, Any], profile: str) -> LLMResponse:
    usage = data.get("usage") or {}
    return LLMResponse(
        message=ChatMessage.model_validate(data["message"]),
        usage=Usage(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            cost_micro_usd=int(usage.get("cost_micro_usd", 0)),
            calls=int(usage.get("calls", 1)),
        ),
        model=str(data.get("model") or ""),
        profile=profile,
        finish_reason=data.get("finish_reason"),
    )


def _stored_request(request: dict[str, Any]) -> dict[str, Any]:
    """The request as written to the file: tool schemas (large, constant) as a hash."""
    stored = dict(request)
    tools = stored.pop("tools", None)
    stored["tools_sha256"] = request_key({"tools": tools}) if tools else None
    return stored


class CassetteLLM:
    """:class:`~agent.llm.LLMClient` that records to, or replays from, a cassette file.

    ``inner`` is the real client: required to record, never called in replay mode (it is
    still closed by :meth:`aclose`). ``normalise`` maps the canonical request before it is
    hashed (default :func:`mask_dates`; ``None``: no normalisation).
    """

    def __init__(
        self,
        inner: LLMClient | None,
        path: Path | str,
        mode: CassetteMode,
        *,
        normalise: Normaliser | None = mask_dates,
    ) -> None:
        if mode not in ("record", "replay"):
            raise CassetteError(path, f"mode must be 'record' or 'replay', not {mode!r}")
        self.inner = inner
        self.path = Path(path)
        self.mode: CassetteMode = mode
        self.normalise = normalise
        self._recorded: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._requests: dict[str, dict[str, Any]] = {}  # key → stored request (for hints)
        self._seen: dict[str, int] = defaultdict(int)  # key → requests made in this process
        self._lock = asyncio.Lock()
        if mode == "record":
            if inner is None:
                raise CassetteError(self.path, "record mode needs a configured LLM to record")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                self._load()
                self._end_torn_line()
        else:
            if not self.path.is_file():
                raise CassetteError(self.path, "no such file to replay (record it first)")
            self._load()

    @property
    def recorded(self) -> int:
        """How many responses the cassette holds."""
        return sum(len(v) for v in self._recorded.values())

    def _load(self) -> None:
        numbered: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        with self.path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    key = str(entry["key"])
                    response = dict(entry["response"])
                    n = int(entry.get("n", len(numbered[key])))
                except (ValueError, KeyError, TypeError):
                    log.warning("cassette.bad_line", path=str(self.path), line=number)
                    continue
                numbered[key].append((n, response))
                if isinstance(entry.get("request"), dict):
                    self._requests.setdefault(key, entry["request"])
        for key, items in numbered.items():  # concurrent calls finish out of order
            items.sort(key=lambda item: item[0])
            self._recorded[key] = [response for _n, response in items]
        if self.mode == "record":  # new recordings of a known request come after the old
            for key, responses in self._recorded.items():
                self._seen[key] = len(responses)

    def key_of(
        self,
        profile: str,
        messages: Sequence[ChatMessage],
        **options: Any,
    ) -> tuple[str, dict[str, Any]]:
        """The key of a request and its normalised form."""
        request = canonical_request(profile, messages, **options)
        if self.normalise is not None:
            request = self.normalise(request)
        return request_key(request), request

    async def complete(
        self,
        profile: str,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> LLMResponse:
        options: dict[str, Any] = {
            "tools": tools,
            "tool_choice": tool_choice,
            "max_tokens": max_tokens,
            "response_format": response_format,
        }
        key, request = self.key_of(profile, messages, **options)
        occurrence = self._seen[key]
        self._seen[key] += 1
        if self.mode == "replay":
            return self._replay(profile, messages, key, request, occurrence)
        assert self.inner is not None  # checked in __init__
        response = await self.inner.complete(profile, messages, **options)
        recorded = _response_json(response)
        entry: dict[str, Any] = {
            "v": CASSETTE_VERSION,
            "key": key,
            "n": occurrence,
            "profile": profile,
            "recorded_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "request": _stored_request(request),
            "response": recorded,
        }
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        async with self._lock:
            await asyncio.to_thread(self._append, line.encode("utf-8"))
            self._recorded[key].append(recorded)
        return response

    def _end_torn_line(self) -> None:
        """A crash mid-write leaves a line without its newline: end it, so the next
        recording starts on a line of its own (the torn one is skipped when loading)."""
        with self.path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() == 0:
                return
            fh.seek(-1, os.SEEK_END)
            torn = fh.read(1) != b"\n"
        if torn:
            self._append(b"\n")

    def _append(self, data: bytes) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            written = os.write(fd, data)
            while written < len(data):  # pragma: no cover - regular files write it all
                written += os.write(fd, data[written:])
        finally:
            os.close(fd)

    def _replay(
        self,
        profile: str,
        messages: Sequence[ChatMessage],
        key: str,
        request: dict[str, Any],
        occurrence: int,
    ) -> LLMResponse:
        responses = self._recorded.get(key)
        if not responses:
            snippet = _last_user_snippet(messages)
            hint = self._closest(request)
            log.warning("cassette.miss", profile=profile, key=key[:16], hint=hint)
            raise CassetteMiss(profile, key, snippet, hint)
        data = responses[min(occurrence, len(responses) - 1)]
        try:
            return _response_from(data, profile)
        except (KeyError, TypeError, ValueError) as exc:
            raise LLMError(profile, f"cassette entry {key[:16]} is unreadable: {exc}") from exc

    def _closest(self, request: dict[str, Any]) -> str:
        """Where the most similar recorded request of the same profile differs."""
        wanted = [_canonical_json(m) for m in request.get("messages") or ()]
        best: tuple[int, str] | None = None
        for stored in self._requests.values():
            if stored.get("profile") != request.get("profile"):
                continue
            have = [_canonical_json(m) for m in stored.get("messages") or ()]
            same = 0
            while same < min(len(have), len(wanted)) and have[same] == wanted[same]:
                same += 1
            if best is None or same > best[0]:
                if same == len(have) == len(wanted):
                    where = "in its tools or options"
                elif same < len(wanted):
                    role = request["messages"][same].get("role", "?")
                    where = f"at message {same} ({role})"
                else:
                    where = f"after message {same - 1} (the recorded one is longer)"
                best = (same, where)
        if best is None:
            return f"the cassette has no request of profile {request.get('profile')!r}"
        return f"the closest recorded request differs {best[1]}"

    async def aclose(self) -> None:
        if self.inner is not None:
            await self.inner.aclose()
