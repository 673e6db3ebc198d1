"""The one place where real adapters are wired in: settings → Redis, LLM, agent, senders."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

import redis.asyncio as aioredis
import structlog

from agent import (
    ChatMessage,
    Ledger,
    LLMClient,
    LLMResponse,
    OpenAICompatibleLLM,
    load_profiles,
)
from agent.cassette import CassetteError, CassetteLLM
from agent.routing import SessionControl, SessionControlConfig, build_session_control
from channels import MetaSender, OutboxSender, Sender, TwilioSender
from gateway.conversation.turn import TurnRunner
from gateway.errors import ConfigError
from gateway.metrics import Metrics
from gateway.settings import Settings
from gateway.store.embedded import EmbeddedRedis
from gateway.store.threads import Store

__all__ = ["Components", "MeteredLLM", "dev_twilio_token", "open_store"]

log = structlog.get_logger("gateway.bootstrap")


def dev_twilio_token(data_dir: Path) -> str:
    """The locally generated secret the dev chat client signs Twilio deliveries with."""
    path = data_dir / "dev_twilio_auth_token"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(16))
        path.chmod(0o600)
    return path.read_text().strip()


@contextlib.asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[Store]:
    """Redis and the Store alone (the CLIs need no more): ``REDIS_URL``, else the embedded
    server under ``MEL_DATA_DIR`` — reused when a gateway already serves it, otherwise
    started here and stopped after."""
    url = settings.redis_url
    embedded: EmbeddedRedis | None = None
    if not url:
        embedded = EmbeddedRedis(settings.mel_data_dir)
        url = await asyncio.to_thread(embedded.start)
        log.info("redis.embedded", data_dir=str(settings.mel_data_dir))
    client: aioredis.Redis = aioredis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
    try:
        yield Store(
            client,
            settings.mel_redis_prefix,
            raw_maxlen=settings.mel_raw_retention_count,
            dedupe_ttl=settings.mel_dedupe_ttl_seconds,
            history_cap=2 * settings.mel_history_turns,
        )
    finally:
        await client.aclose()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


class MeteredLLM:
    """LLMClient decorator: counts calls, tokens and cost per profile into the metrics."""

    def __init__(self, inner: LLMClient, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    async def complete(
        self, profile: str, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> LLMResponse:
        self.metrics.llm_calls.labels(profile).inc()
        response = await self.inner.complete(profile, messages, **kwargs)
        usage = response.usage
        self.metrics.llm_tokens.labels(profile, "prompt").inc(usage.prompt_tokens)
        self.metrics.llm_tokens.labels(profile, "completion").inc(usage.completion_tokens)
        self.metrics.llm_cost.labels(profile).inc(usage.cost_micro_usd)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class Components:
    """Everything the service runs on, opened and closed together."""

    def __init__(self, settings: Settings, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.metrics = metrics or Metrics()
        self._stack = AsyncExitStack()
        self.redis: aioredis.Redis
        self.store: Store
        self.llm: LLMClient | None = None
        self.conversation: SessionControl
        self.ledger: Ledger
        self.senders: dict[str, Sender] = {}
        self.runner: TurnRunner
        self.twilio_token: str | None = None

    async def __aenter__(self) -> Components:
        s = self.settings
        try:
            await self._open(s)
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def _open(self, s: Settings) -> None:
        self.store = await self._stack.enter_async_context(open_store(s))
        self.redis = self.store.redis
        self.ledger = Ledger(self.redis, s.mel_redis_prefix)

        profiles = load_profiles(s.llm_profiles_path)
        llm = OpenAICompatibleLLM(profiles, base_url=s.llm_base_url, api_key=s.llm_api_key)
        configured = llm.is_configured("agent")
        if s.llm_cassette and s.llm_cassette_mode:
            inner = llm if configured or s.llm_cassette_mode == "record" else None
            try:
                cassette = CassetteLLM(inner, s.llm_cassette, s.llm_cassette_mode)
            except CassetteError as exc:
                await llm.aclose()
                raise ConfigError(str(exc)) from None
            log.warning("llm.cassette", mode=s.llm_cassette_mode, path=str(s.llm_cassette))
            self.llm = MeteredLLM(cassette, self.metrics)
            self._stack.push_async_callback(self.llm.aclose)
            if inner is None:
                await llm.aclose()
        elif configured:
            self.llm = MeteredLLM(llm, self.metrics)
            self._stack.push_async_callback(self.llm.aclose)
        else:
            await llm.aclose()
            log.warning(
                "llm.not_configured",
                hint="set LLM_BASE_URL (and LLM_API_KEY) to an OpenAI-compatible endpoint; "
                "until then unguarded turns get the 'assistant unavailable' reply",
            )
        self.conversation = build_session_control(
            self.llm,
            self.ledger,
            SessionControlConfig(
                enabled=s.enable_route_stickiness,
                profile=s.route_stickiness_llm_profile,
                threshold=s.route_stickiness_confidence_threshold,
                history_turns=s.route_stickiness_history_turns,
                max_tokens=s.route_stickiness_max_tokens,
                human_handoff_message=s.human_handoff_message,
                end_session_message=s.end_session_message,
            ),
        )

        if s.twilio_enabled:
            self.twilio_token = s.twilio_auth_token
        elif s.dev_mode:
            self.twilio_token = dev_twilio_token(s.mel_data_dir)
            log.warning("dev_mode", hint="no provider configured: replies go to the local outbox")
        self.senders = self._build_senders(s)
        for sender in self.senders.values():
            self._stack.push_async_callback(sender.close)
        self.runner = TurnRunner(
            self.conversation, self.metrics, support_available=s.support_available
        )

    def _build_senders(self, s: Settings) -> dict[str, Sender]:
        senders: dict[str, Sender] = {}
        if s.twilio_sending:
            senders["twilio"] = TwilioSender(
                s.twilio_account_sid or "",
                s.twilio_auth_token or "",
                s.twilio_whatsapp_from or "",
                api_base_url=s.twilio_api_base_url,
                # delivery statuses come back to us, signed over the public URL
                status_callback=(
                    f"{s.public_base_url}/webhooks/twilio/status" if s.public_base_url else None
                ),
            )
        elif self.twilio_token:
            senders["twilio"] = OutboxSender(self.redis, self.outbox_key)
        if s.meta_access_token and s.meta_phone_number_id:
            senders["meta"] = MetaSender(
                s.meta_access_token,
                s.meta_phone_number_id,
                graph_base_url=s.meta_graph_base_url,
                api_version=s.meta_api_version,
            )
        elif s.meta_enabled:
            senders["meta"] = OutboxSender(self.redis, self.outbox_key)
        return senders

    @property
    def outbox_key(self) -> str:
        return f"{self.settings.mel_redis_prefix}:outbox"

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()
