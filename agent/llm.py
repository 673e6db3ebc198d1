"""The LLM port and its one adapter: any OpenAI-compatible chat-completions endpoint.

:class:`LLMClient` is the protocol the agent depends on; :class:`OpenAICompatibleLLM`
implements it with the openai SDK (``AsyncOpenAI``), so OpenAI, OCI Generative AI,
Azure, Ollama, vLLM and llama.cpp servers all work. Each call returns token usage and
its cost in micro-USD from the profile's prices; every failure is a typed
:class:`~agent.errors.LLMError`. The SDK never retries on its own: the caller decides.
Image parts of a message reach only a profile that declares ``vision: true``.

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

import openai
import structlog
from openai.types.chat import ChatCompletion

from agent.errors import LLMBadResponse, LLMError, LLMTimeout, LLMUnavailable
from agent.messages import ChatMessage, ToolCallRequest
from agent.profiles import LLMProfile, LLMProfiles, TranscriptionProfile

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "NO_API_KEY",
    "Endpoint",
    "LLMClient",
    "LLMResponse",
    "OpenAICompatibleLLM",
    "Usage",
    "connection_error",
    "cost_micro_usd",
    "new_sdk_client",
    "resolve_endpoint",
]

BASE_URL_ENV = "LLM_BASE_URL"
API_KEY_ENV = "LLM_API_KEY"
NO_API_KEY = "not-needed"

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


# The SDK's aiohttp transport (measured: ~1.6x the turns per second of its default httpx
# one) with a smaller pool than the SDK's 1000: a gateway talks to one or two endpoints
# with bounded concurrency.
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
    """:class:`LLMClient` over the openai SDK, one ``AsyncOpenAI`` per distinct endpoint.

    Per profile: ``base_url`` = the profile's, else the default ``base_url``; the key =
    ``environ[profile.api_key_env]`` when that variable is set, else the default
    ``api_key``, else ``"not-needed"`` (keyless endpoints such as Ollama). A profile with
    no endpoint at all raises :class:`LLMUnavailable` when called.
    """

    def __init__(
        self,
        profiles: LLMProfiles,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self.profiles = profiles
        self.default_base_url = base_url or None
        self._default_api_key = api_key or None
        self._environ = environ
        self._clients: dict[tuple[str, str], openai.AsyncOpenAI] = {}

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

    def _client(self, endpoint: Endpoint) -> openai.AsyncOpenAI:
        key = (endpoint.base_url, endpoint.api_key)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = new_sdk_client(endpoint)
        return client

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
        client = self._client(endpoint)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(settings.timeout_seconds):
                # The body is already wire-shaped JSON: ``post`` sends it as it is, where
                # ``chat.completions.create`` would walk every message and tool schema
                # through the SDK's type-driven transform (about 3 ms a call, measured).
                completion = await client.post(
                    "/chat/completions",
                    cast_to=ChatCompletion,
                    body=body,
                    options={"timeout": settings.timeout_seconds},
                )
        except (TimeoutError, openai.APITimeoutError) as exc:
            refused = connection_error(exc)
            if refused is not None:  # the aiohttp transport reports a refusal as a timeout
                raise LLMError(profile, f"connection failed: {refused}") from exc
            raise LLMTimeout(profile, f"no answer within {settings.timeout_seconds:g}s") from exc
        except openai.APIStatusError as exc:
            raise LLMError(profile, f"HTTP {exc.status_code}", status=exc.status_code) from exc
        except openai.APIConnectionError as exc:
            raise LLMError(profile, f"connection failed: {exc}") from exc
        except openai.APIResponseValidationError as exc:
            raise LLMBadResponse(profile, f"unexpected response: {exc}") from exc
        except openai.OpenAIError as exc:
            raise LLMError(profile, f"{type(exc).__name__}: {exc}") from exc
        elapsed_ms = round((time.perf_counter() - started) * 1000)
        response = _to_response(profile, settings, completion)
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
        """Close every SDK client (and its connection pool)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()


def _wire_messages(messages: Sequence[ChatMessage], *, vision: bool) -> list[dict[str, Any]]:
    """The messages as sent: with their image parts only for a vision profile."""
    if vision:
        return [message.to_openai() for message in messages]
    return [message.without_images().to_openai() for message in messages]


def _to_response(profile: str, settings: LLMProfile, completion: Any) -> LLMResponse:
    """SDK ``ChatCompletion`` → :class:`LLMResponse`; attribute access only, so it works
    across SDK versions (1.x tool-call classes and the later union types alike)."""
    choices = getattr(completion, "choices", None)
    if not choices:
        raise LLMBadResponse(profile, "the response has no choices")
    choice = choices[0]
    raw = getattr(choice, "message", None)
    if raw is None:
        raise LLMBadResponse(profile, "the first choice has no message")
    calls: list[ToolCallRequest] = []
    for call in getattr(raw, "tool_calls", None) or ():
        function = getattr(call, "function", None)
        if function is None or not getattr(function, "name", None):
            raise LLMBadResponse(profile, f"unsupported tool call {getattr(call, 'type', '?')!r}")
        arguments = function.arguments
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(ToolCallRequest(id=call.id, name=function.name, arguments=arguments or "{}"))
    message = ChatMessage(
        role="assistant",
        content=getattr(raw, "content", None) or "",
        tool_calls=tuple(calls) or None,
    )
    prompt_tokens = completion_tokens = 0
    usage = getattr(completion, "usage", None)
    if usage is not None:
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    return LLMResponse(
        message=message,
        usage=Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_micro_usd=cost_micro_usd(settings, prompt_tokens, completion_tokens),
            calls=1,
        ),
        model=str(getattr(completion, "model", None) or settings.model),
        profile=profile,
        finish_reason=getattr(choice, "finish_reason", None),
    )
