"""The LLM port and its one adapter: any OpenAI-compatible chat-completions endpoint.

:class:`LLMClient` is the protocol the agent depends on; :class:`OpenAICompatibleLLM`
implements it by POSTing the chat-completions JSON with plain aiohttp (OpenAI, OCI
Generative AI, Azure, Ollama, vLLM and llama.cpp servers all speak it). Each call returns
token usage and its cost in micro-USD from the profile's prices; every failure is a typed
:class:`~agent.errors.LLMError`; nothing is retried here: the caller decides. Image parts
of a message reach only a profile that declares ``vision: true``.

Why not the openai SDK on this path: measured by ``bench/llm_client_bench.py``, the SDK
(even on its aiohttp transport, posting a prebuilt body) costs ≈ 4x the CPU of a plain
aiohttp POST of the same body (≈ 1.3 vs 0.3 ms a call); the gateway makes two a turn. The SDK stays
for the transcriber (off the hot path): :func:`new_sdk_client`.

Connections: one :class:`~agent.llm_pool.EndpointPool` per distinct endpoint, sized by
``max_connections``. A call beyond it waits for a free connection (at most
``pool_timeout``, then :class:`~agent.llm_pool.LLMPoolTimeout`); the profile's
``timeout_seconds`` starts once the connection is held. :meth:`OpenAICompatibleLLM.stats`
shows in-flight calls and pool waits per profile and per endpoint.

:func:`resolve_endpoint` and :func:`new_sdk_client` are shared with the transcriber.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any, Protocol

import aiohttp
import openai
import orjson
import structlog

from agent.errors import LLMBadResponse, LLMError, LLMTimeout, LLMUnavailable
from agent.llm_pool import (
    DEFAULT_KEEPALIVE_SECONDS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_POOL_TIMEOUT,
    EndpointPool,
    LLMPoolTimeout,
    LLMStats,
    PoolStats,
    PoolWaitHook,
    ProfileCounters,
    ProfileStats,
)
from agent.messages import ChatMessage, ToolCallRequest
from agent.profiles import LLMProfile, LLMProfiles, TranscriptionProfile

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_POOL_TIMEOUT",
    "NO_API_KEY",
    "Endpoint",
    "LLMClient",
    "LLMPoolTimeout",
    "LLMResponse",
    "LLMStats",
    "OpenAICompatibleLLM",
    "PoolStats",
    "PoolWaitHook",
    "ProfileStats",
    "Usage",
    "connection_error",
    "cost_micro_usd",
    "new_sdk_client",
    "resolve_endpoint",
]

BASE_URL_ENV = "LLM_BASE_URL"
API_KEY_ENV = "LLM_API_KEY"
NO_API_KEY = "not-needed"
_OPENAI_HEADER_ENV = {"OpenAI-Organization": "OPENAI_ORG_ID", "OpenAI-Project": "OPENAI_PROJECT_ID"}
"""Headers the openai SDK sent from these variables when set; sent the same way here."""

log = structlog.get_logger(__name__)


def cost_micro_usd(profile: LLMProfile, prompt_tokens: int, completion_tokens: int) -> int:
    """Cost of one call in micro-USD, rounded up. Prices are USD per million tokens,
    so micro-USD = tokens x price, exactly, in Decimal."""
    cost = (
        Decimal(prompt_tokens) * profile.price_input_per_mtok
        + Decimal(completion_tokens) * profile.price_output_per_mtok
    )
    return int(cost.to_integral_value(rounding=ROUND_CEILING))


@dataclass(frozen=True)
class Usage:
    """Tokens, cost and number of calls; add them up with ``+``."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_micro_usd: int = 0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost_usd(self) -> Decimal:
        """The cost in USD, exact (for display; sum in micro-USD)."""
        return Decimal(self.cost_micro_usd) / Decimal(1_000_000)

    def __add__(self, other: object) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cost_micro_usd + other.cost_micro_usd,
            self.calls + other.calls,
        )


@dataclass(frozen=True)
class LLMResponse:
    """The assistant message of one completion, with what it cost."""

    message: ChatMessage
    usage: Usage
    model: str
    profile: str
    finish_reason: str | None


class LLMClient(Protocol):
    """The port: one chat completion for a named profile."""

    async def complete(
        self,
        profile: str,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> LLMResponse: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Endpoint:
    """Where a profile's calls go. ``api_key`` is never logged."""

    base_url: str
    api_key: str

    def __repr__(self) -> str:
        return f"Endpoint(base_url={self.base_url!r}, api_key=***)"


# The transcriber's SDK client: the SDK's aiohttp transport (measured: ~1.6x the turns per
# second of its default httpx one) with a smaller pool than the SDK's 1000.
_POOL_LIMITS = type(openai.DEFAULT_CONNECTION_LIMITS)(
    max_connections=64, max_keepalive_connections=16, keepalive_expiry=30.0
)


def resolve_endpoint(
    profile: LLMProfile | TranscriptionProfile,
    *,
    default_base_url: str | None,
    default_api_key: str | None,
    environ: Mapping[str, str],
) -> Endpoint | None:
    """Where a profile's calls go: its ``base_url``, else the default; the key from
    ``environ[profile.api_key_env]`` when set, else the default key, else ``"not-needed"``.
    ``None`` when there is no base URL at all."""
    base_url = profile.base_url or default_base_url
    if not base_url:
        return None
    key = None
    if profile.api_key_env:
        key = environ.get(profile.api_key_env, "").strip() or None
    return Endpoint(base_url, key or default_api_key or NO_API_KEY)


def new_sdk_client(endpoint: Endpoint) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` for ``endpoint``: no SDK retries, the pooled aiohttp transport."""
    return openai.AsyncOpenAI(
        base_url=endpoint.base_url,
        api_key=endpoint.api_key,
        max_retries=0,
        http_client=openai.DefaultAioHttpClient(limits=_POOL_LIMITS),
    )


def connection_error(exc: BaseException) -> ConnectionError | None:
    """The ConnectionError (refused, reset) behind an exception, if any."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, ConnectionError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class OpenAICompatibleLLM:
    """:class:`LLMClient` over plain aiohttp, one connection pool per distinct endpoint.

    Per profile: ``base_url`` = the profile's, else the default ``base_url``; the key =
    ``environ[profile.api_key_env]`` when that variable is set, else the default
    ``api_key``, else ``"not-needed"`` (keyless endpoints such as Ollama). A profile with
    no endpoint at all raises :class:`LLMUnavailable` when called.

    Pools: ``max_connections`` per endpoint (size it from the caller's concurrency: the
    calls it may have in flight at once to one endpoint). A call beyond that waits for a
    free connection, at most ``pool_timeout`` seconds (``None``: unbounded), then raises
    :class:`LLMPoolTimeout`; the profile's ``timeout_seconds`` starts once the
    connection is held. ``on_pool_wait(profile, seconds)`` is called for every call
    that had to wait; :meth:`stats` is the rest (in flight, waiting, totals).
    """

    def __init__(
        self,
        profiles: LLMProfiles,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        environ: Mapping[str, str] = os.environ,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        pool_timeout: float | None = DEFAULT_POOL_TIMEOUT,
        keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS,
        on_pool_wait: PoolWaitHook | None = None,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if pool_timeout is not None and pool_timeout <= 0:
            raise ValueError("pool_timeout must be positive (or None: no bound)")
        self.profiles = profiles
        self.default_base_url = base_url or None
        self._default_api_key = api_key or None
        self._environ = environ
        self.max_connections = max_connections
        self.pool_timeout = pool_timeout
        self.keepalive_seconds = keepalive_seconds
        self.on_pool_wait = on_pool_wait
        self._pools: dict[tuple[str, str], EndpointPool] = {}
        self._counters: dict[str, ProfileCounters] = {}
        self._headers = {
            header: value
            for header, variable in _OPENAI_HEADER_ENV.items()
            if (value := environ.get(variable, "").strip())
        }

    @classmethod
    def from_env(
        cls, profiles: LLMProfiles, environ: Mapping[str, str] = os.environ
    ) -> OpenAICompatibleLLM:
        """Defaults from ``LLM_BASE_URL`` and ``LLM_API_KEY``."""
        return cls(
            profiles,
            base_url=environ.get(BASE_URL_ENV, "").strip() or None,
            api_key=environ.get(API_KEY_ENV, "").strip() or None,
            environ=environ,
        )

    def endpoint(self, profile_name: str) -> Endpoint | None:
        """The endpoint a profile's calls go to, or ``None`` when none is configured."""
        return resolve_endpoint(
            self.profiles.get(profile_name),
            default_base_url=self.default_base_url,
            default_api_key=self._default_api_key,
            environ=self._environ,
        )

    def is_configured(self, profile_name: str | None = None) -> bool:
        """Whether ``profile_name`` (or, with ``None``, any profile) has an endpoint."""
        names = [profile_name] if profile_name is not None else list(self.profiles)
        return any(self.endpoint(name) is not None for name in names)

    def unconfigured_profiles(self) -> list[str]:
        """Profiles with no endpoint, for the start-up warning."""
        return [name for name in self.profiles if self.endpoint(name) is None]

    def stats(self) -> LLMStats:
        """Every endpoint's pool and every profile's calls, now and since start: cheap,
        meant to be read when the metrics are scraped."""
        return LLMStats(
            pools=tuple(pool.stats() for pool in self._pools.values()),
            profiles={name: counters.snapshot() for name, counters in self._counters.items()},
        )

    def _pool(self, endpoint: Endpoint) -> EndpointPool:
        key = (endpoint.base_url, endpoint.api_key)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = EndpointPool(
                endpoint.base_url,
                endpoint.api_key,
                max_connections=self.max_connections,
                keepalive_seconds=self.keepalive_seconds,
                headers=self._headers,
            )
        return pool

    def _profile_counters(self, profile: str) -> ProfileCounters:
        counters = self._counters.get(profile)
        if counters is None:
            counters = self._counters[profile] = ProfileCounters()
        return counters

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
        settings = self.profiles.get(profile)
        endpoint = self.endpoint(profile)
        if endpoint is None:
            raise LLMUnavailable(profile, f"no endpoint configured (set {BASE_URL_ENV})")
        body = request_body(settings, messages, tools, tool_choice, max_tokens, response_format)
        payload = orjson.dumps(body)  # compact UTF-8; ~5× cheaper than json on big prompts
        pool = self._pool(endpoint)
        counters = self._profile_counters(profile)
        await pool.acquire(
            profile, counters, pool_timeout=self.pool_timeout, on_wait=self.on_pool_wait
        )
        started = time.perf_counter()  # the model's time starts with the connection held
        try:
            async with asyncio.timeout(settings.timeout_seconds):
                status, raw = await pool.post(payload)
        except TimeoutError as exc:
            raise LLMTimeout(profile, f"no answer within {settings.timeout_seconds:g}s") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise LLMError(profile, f"connection failed: {exc}") from exc
        finally:
            pool.release(counters)
        elapsed_ms = round((time.perf_counter() - started) * 1000)
        if not 200 <= status < 300:
            raise LLMError(profile, f"HTTP {status}", status=status)
        response = _to_response(profile, settings, _decode(profile, raw))
        log.debug(
            "llm.completed",
            profile=profile,
            model=response.model,
            ms=elapsed_ms,
            prompt_tokens=response.usage.prompt_tokens,
            completion_tokens=response.usage.completion_tokens,
            cost_micro_usd=response.usage.cost_micro_usd,
            finish_reason=response.finish_reason,
        )
        return response

    async def aclose(self) -> None:
        """Close every endpoint's connections (their stats stay readable; a later call
        opens new ones)."""
        for pool in list(self._pools.values()):
            await pool.aclose()


def request_body(
    settings: LLMProfile,
    messages: Sequence[ChatMessage],
    tools: Sequence[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    max_tokens: int | None = None,
    response_format: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The chat-completions request body for a profile (the fields an OpenAI-compatible
    server reads)."""
    body: dict[str, Any] = {
        "model": settings.model,
        "messages": _wire_messages(messages, vision=settings.vision),
        "temperature": settings.temperature,
        "max_tokens": max_tokens if max_tokens is not None else settings.max_tokens,
    }
    if tools:
        body["tools"] = list(tools)
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if response_format is not None:
        body["response_format"] = response_format
    return body


def _wire_messages(messages: Sequence[ChatMessage], *, vision: bool) -> list[dict[str, Any]]:
    """The messages as sent: with their image parts only for a vision profile."""
    if vision:
        return [message.to_openai() for message in messages]
    return [message.without_images().to_openai() for message in messages]


def _decode(profile: str, raw: bytes) -> dict[str, Any]:
    """The response body as a JSON object, else :class:`LLMBadResponse`."""
    try:
        data = orjson.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise LLMBadResponse(profile, f"the response is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise LLMBadResponse(profile, f"the response is not a JSON object: {type(data).__name__}")
    return data


def _to_response(profile: str, settings: LLMProfile, completion: dict[str, Any]) -> LLMResponse:
    """A chat-completion JSON object → :class:`LLMResponse`; anything unusable in it is a
    :class:`LLMBadResponse` (unknown fields are ignored, as the SDK ignored them)."""
    choices = completion.get("choices")
    if not choices or not isinstance(choices, list):
        raise LLMBadResponse(profile, "the response has no choices")
    choice = choices[0]
    raw = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(raw, dict):
        raise LLMBadResponse(profile, "the first choice has no message")
    calls: list[ToolCallRequest] = []
    for call in raw.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not name or not isinstance(name, str) or function is None:
            kind = call.get("type", "?") if isinstance(call, dict) else "?"
            raise LLMBadResponse(profile, f"unsupported tool call {kind!r}")
        call_id = call.get("id")
        if not call_id or not isinstance(call_id, str):
            raise LLMBadResponse(profile, f"the tool call {name!r} has no id")
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(ToolCallRequest(id=call_id, name=name, arguments=arguments or "{}"))
    content = raw.get("content")
    if content is not None and not isinstance(content, str):
        raise LLMBadResponse(profile, "the message content is not text")
    message = ChatMessage(role="assistant", content=content or "", tool_calls=tuple(calls) or None)
    usage = completion.get("usage")
    prompt_tokens = completion_tokens = 0
    if isinstance(usage, dict):
        prompt_tokens = _count(usage.get("prompt_tokens"))
        completion_tokens = _count(usage.get("completion_tokens"))
    finish_reason = choice.get("finish_reason")
    return LLMResponse(
        message=message,
        usage=Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_micro_usd=cost_micro_usd(settings, prompt_tokens, completion_tokens),
            calls=1,
        ),
        model=str(completion.get("model") or settings.model),
        profile=profile,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
    )


def _count(value: Any) -> int:
    """A token count from the usage object (a missing or odd value counts zero)."""
    return value if isinstance(value, int) and value > 0 else 0
