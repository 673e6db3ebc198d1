"""The composition root: the one place where settings become real adapters (Redis, the
OpenAI-compatible client, the Twilio/Meta senders) and the background jobs of a role.

Every entry point goes through :func:`bootstrap` — ``create_app`` (``serve``), ``worker``,
``psychologist`` and the CLI commands — so each runs on exactly what its role needs:

=================  ===========================================================
``serve``          HTTP, and the worker's jobs in-process
``web``            HTTP only (``serve --no-worker``): Redis, nothing else
``worker``         the turn worker, sweeper, retention, support webhook and
                   psychologist (unless ``PSYCHOLOGIST_ENABLED=false``)
``psychologist``   the psychologist consumer alone (needs an LLM)
``cli``            Redis and the ledger, for the operator's commands
=================  ===========================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import redis.asyncio as aioredis
import structlog
from dotenv import dotenv_values

from agent import (
    Ledger,
    LLMClient,
    LLMProfiles,
    OpenAICompatibleLLM,
    OpenAICompatibleTranscriber,
    load_profiles,
)
from agent.cassette import CassetteError, CassetteLLM
from agent.psychologist import Psychologist, RulesError, load_rules
from agent.routing import SessionControlConfig, build_session_control
from channels import (
    MediaFetcher,
    MetaMediaFetcher,
    MetaSender,
    MetaWebhook,
    OutboxSender,
    Sender,
    TwilioMediaFetcher,
    TwilioSender,
    TwilioWebhook,
    WebhookAdapter,
)
from gateway.conversation.turn import TurnRunner
from gateway.errors import ConfigError
from gateway.media import MediaReader
from gateway.metrics import (
    MeteredLLM,
    Metrics,
    admission_metrics,
    gauge,
    llm_pool_metrics,
    redis_pool_metrics,
)
from gateway.settings import Settings
from gateway.store import MeteredPool, Store
from gateway.store.embedded import EmbeddedRedis
from gateway.support_agents import SupportRoster
from gateway.workers.admission import Admission
from gateway.workers.consumer import StreamConsumer
from gateway.workers.parking import Unparker
from gateway.workers.periodic import PeriodicJob
from gateway.workers.psychologist import PSYCHOLOGIST_CONCURRENCY, PsychologistWorker
from gateway.workers.retention import RawRetention
from gateway.workers.supervisor import Supervisor
from gateway.workers.support_queue import SupportQueue
from gateway.workers.support_roster import RosterRefresh
from gateway.workers.support_webhook import SupportWebhook
from gateway.workers.sweeper import SessionSweeper
from gateway.workers.turns import TurnWorker

__all__ = ["Components", "Role", "bootstrap", "dev_twilio_token", "open_store"]

log = structlog.get_logger("gateway.bootstrap")

Role = Literal["serve", "web", "worker", "psychologist", "cli"]


@dataclass
class Components:
    """What a process runs on. ``supervisor`` holds its background jobs (none for ``web``
    and ``cli``); ``worker`` is the turn worker among them, when there is one."""

    settings: Settings
    metrics: Metrics
    store: Store
    ledger: Ledger
    roster: SupportRoster
    """Whether console agents exist (support is configured by them as by SUPPORT_TOKEN)."""
    twilio_token: str | None = None
    llm: LLMClient | None = None
    supervisor: Supervisor | None = None
    worker: TurnWorker | None = None
    admission: Admission | None = None
    senders: dict[str, Sender] = field(default_factory=dict)
    webhooks: dict[str, WebhookAdapter] = field(default_factory=dict)
    media: MediaReader | None = None


def dev_twilio_token(data_dir: Path) -> str:
    """The locally generated secret the dev chat client signs Twilio deliveries with."""
    path = data_dir / "dev_twilio_auth_token"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(16))
        path.chmod(0o600)
    return path.read_text().strip()


REDIS_POOL_WAIT_SECONDS = 10.0
"""How long a Redis call waits for a free pooled connection (then ``PoolExhausted``)."""


def redis_pool_size(settings: Settings) -> int:
    """Every turn in flight may hold two connections (its step and its lease renewal);
    the consumers' blocking reads, the periodic jobs and the web handlers need the rest."""
    return 2 * settings.mel_worker_concurrency + 32


@contextlib.asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[Store]:
    """Redis and the Store alone: ``REDIS_URL``, else the embedded server under
    ``MEL_DATA_DIR`` — reused when a gateway already serves it, otherwise started here
    and stopped after."""
    url = settings.redis_url
    embedded: EmbeddedRedis | None = None
    if not url:
        embedded = EmbeddedRedis(settings.mel_data_dir)
        url = await asyncio.to_thread(embedded.start)
        log.info("redis.embedded", data_dir=str(settings.mel_data_dir))
    pool = MeteredPool.from_url(
        url,
        max_connections=redis_pool_size(settings),
        timeout=REDIS_POOL_WAIT_SECONDS,
        socket_timeout=5,
        socket_connect_timeout=2,
        # no CLIENT SETINFO: one round trip less per new connection, and redis-py would
        # read its own version from the package metadata (files) for each one
        driver_info=None,
    )
    client = aioredis.Redis(connection_pool=pool)
    store = Store(
        client,
        settings.mel_redis_prefix,
        raw_maxlen=settings.mel_raw_retention_count,
        raw_refused_max=settings.mel_raw_refused_count,
        dedupe_ttl=settings.mel_dedupe_ttl_seconds,
        history_cap=2 * settings.mel_history_turns,
        events_maxlen=settings.mel_events_maxlen,
        reply_ttl=settings.mel_reply_ttl_seconds,
        thread_ttl=int(settings.mel_thread_ttl_days * 86400),
        session_ttl=int(settings.mel_session_events_ttl_days * 86400),
    )
    try:
        yield store
    finally:
        await store.close_own_pools()
        await client.aclose()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)


@contextlib.asynccontextmanager
async def bootstrap(
    settings: Settings, role: Role, *, metrics: Metrics | None = None
) -> AsyncIterator[Components]:
    """Open what ``role`` needs, yield it, close it all (in reverse order)."""
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(open_store(settings))
        c = Components(
            settings=settings,
            metrics=metrics or Metrics(),
            store=store,
            ledger=Ledger(store.redis, settings.mel_redis_prefix),
            roster=SupportRoster(settings),
        )
        if role in ("serve", "web"):
            c.twilio_token = _twilio_token(settings)
            c.webhooks = _webhooks(settings, c.twilio_token)
        if role in ("serve", "worker", "psychologist"):
            c.llm = await _open_llm(settings, c.metrics, stack)
        if role in ("serve", "worker"):
            c.senders = await _open_senders(settings, store, stack)
            c.media = await _open_media(settings, stack)
            lag_limit = settings.mel_max_loop_lag_ms / 1000 or math.inf  # 0: no lag limit
            c.admission = Admission(lag_limit)
            c.worker = _turn_worker(c)
            consumers: list[StreamConsumer] = [c.worker]
            webhook = _support_webhook(c)
            if webhook is not None:
                stack.push_async_callback(webhook.close)
                consumers.append(webhook)
            if settings.psychologist_enabled:
                psychologist = _psychologist(c)
                if psychologist is not None:
                    consumers.append(psychologist)
            else:
                log.info("psychologist.disabled", reason="PSYCHOLOGIST_ENABLED=false")
            c.supervisor = Supervisor(
                consumers, _periodic_jobs(c), grace=settings.mel_shutdown_grace_seconds
            )
        if role == "psychologist":
            psychologist = _psychologist(c)
            if psychologist is None:
                raise ConfigError(
                    "the psychologist needs an LLM: set LLM_BASE_URL (and LLM_API_KEY)"
                )
            c.supervisor = Supervisor([psychologist], grace=settings.mel_shutdown_grace_seconds)
        _sample(c)
        yield c


def _sample(c: Components) -> None:
    """What saturates, read at each scrape: the Redis pool, turns in flight, the loop."""
    pool = c.store.redis.connection_pool
    if isinstance(pool, MeteredPool):
        c.metrics.sample(lambda: redis_pool_metrics(pool))
    worker, lag = c.worker, c.admission
    if worker is not None:
        c.metrics.sample(lambda: [
            gauge("mel_turns_in_flight", "Turns running or waiting to start", worker.in_flight),
            gauge("mel_worker_concurrency", "Turns this process runs at once, at most",
                  worker.concurrency),
        ])  # fmt: skip
    if lag is not None:
        c.metrics.sample(lambda: admission_metrics(lag))


def _webhooks(s: Settings, twilio_token: str | None) -> dict[str, WebhookAdapter]:
    """The provider endpoints that are configured, by name (see ``http.webhooks``)."""
    adapters: dict[str, WebhookAdapter] = {}
    if twilio_token:
        adapters["twilio"] = TwilioWebhook(twilio_token, max_body=s.max_body_twilio)
        adapters["twilio_status"] = TwilioWebhook(
            twilio_token, status_callback=True, max_body=s.max_body_twilio
        )
    if s.meta_app_secret:
        adapters["meta"] = MetaWebhook(s.meta_app_secret, s.meta_verify_token or "")
    return adapters


def _twilio_token(s: Settings) -> str | None:
    """The secret Twilio deliveries are verified with (a local one in dev mode)."""
    if s.twilio_enabled:
        return s.twilio_auth_token
    if s.dev_mode:
        log.warning("dev_mode", hint="no provider configured: replies go to the local outbox")
        return dev_twilio_token(s.mel_data_dir)
    return None


def _environment() -> dict[str, str]:
    """The variables profiles read their keys from (``api_key_env``): the process
    environment over the ``.env`` file, as for the settings themselves."""
    return {**{k: v for k, v in dotenv_values(".env").items() if v is not None}, **os.environ}


def stickiness_enabled(s: Settings, llm: LLMClient | None) -> bool:
    """``ENABLE_ROUTE_STICKINESS``, or when unset: on whenever an LLM is configured (the
    spec's example configuration), so END_SESSION and handoffs need no extra setting."""
    return s.enable_route_stickiness if s.enable_route_stickiness is not None else llm is not None


def _check_profiles(s: Settings, profiles: LLMProfiles, environ: Mapping[str, str]) -> None:
    """Refuse to start on what would only fail later, turn after turn."""
    used = ["agent", "router", "psychologist", "psychologist_light"]
    if s.enable_route_stickiness is not False:
        if s.route_stickiness_llm_profile not in profiles:
            known = ", ".join(profiles.names)
            raise ConfigError(
                f"ROUTE_STICKINESS_LLM_PROFILE: no profile {s.route_stickiness_llm_profile!r} "
                f"in {profiles.source} (profiles: {known})"
            )
        used.append(s.route_stickiness_llm_profile)
    for name in used:
        if name not in profiles:
            continue
        variable = profiles.get(name).api_key_env
        if variable and not environ.get(variable, "").strip():
            raise ConfigError(
                f"profile {name!r} ({profiles.source}) takes its API key from {variable}, "
                "which is not set (in the environment or .env)"
            )
    unpriced = [
        name
        for name in ("psychologist", "psychologist_light")
        if name in profiles
        and not (
            profiles.get(name).price_input_per_mtok or profiles.get(name).price_output_per_mtok
        )
    ]
    if s.psychologist_enabled and unpriced:
        log.warning(
            "psychologist.budget_unenforced",
            profiles=unpriced,
            hint="no prices: the per-analysis budget cannot be measured; "
            "set price_input_per_mtok / price_output_per_mtok",
        )


async def _open_llm(s: Settings, metrics: Metrics, stack: AsyncExitStack) -> LLMClient | None:
    profiles = load_profiles(s.llm_profiles_path)
    environ = _environment()
    llm = OpenAICompatibleLLM(
        profiles,
        base_url=s.llm_base_url,
        api_key=s.llm_api_key,
        environ=environ,
        # a turn makes its calls one after another; the psychologist runs a few at once
        max_connections=s.mel_worker_concurrency + PSYCHOLOGIST_CONCURRENCY,
        pool_timeout=s.llm_pool_timeout_seconds,
    )
    stack.push_async_callback(llm.aclose)
    metrics.sample(lambda: llm_pool_metrics(llm.stats()))
    configured = llm.is_configured("agent")
    if configured or s.llm_cassette:
        _check_profiles(s, profiles, environ)
    if s.llm_cassette and s.llm_cassette_mode:
        inner = llm if configured or s.llm_cassette_mode == "record" else None
        try:
            cassette = CassetteLLM(inner, s.llm_cassette, s.llm_cassette_mode)
        except CassetteError as exc:
            raise ConfigError(str(exc)) from None
        log.warning("llm.cassette", mode=s.llm_cassette_mode, path=str(s.llm_cassette))
        return MeteredLLM(cassette, metrics)
    if configured:
        return MeteredLLM(llm, metrics)
    if s.enable_route_stickiness:
        log.warning(
            "stickiness.without_llm",
            hint="ENABLE_ROUTE_STICKINESS=true needs an LLM (LLM_BASE_URL); it stays off",
        )
    log.warning(
        "llm.not_configured",
        hint="set LLM_BASE_URL (and LLM_API_KEY) to an OpenAI-compatible endpoint; "
        "until then unguarded turns get the 'assistant unavailable' reply",
    )
    return None


async def _open_senders(s: Settings, store: Store, stack: AsyncExitStack) -> dict[str, Sender]:
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
            max_connections=s.mel_worker_concurrency,  # a turn sends one reply at a time
        )
    elif s.twilio_enabled or s.dev_mode:
        senders["twilio"] = OutboxSender(store.redis, store.keys.outbox)
    if s.meta_access_token and s.meta_phone_number_id:
        senders["meta"] = MetaSender(
            s.meta_access_token,
            s.meta_phone_number_id,
            graph_base_url=s.meta_graph_base_url,
            api_version=s.meta_api_version,
            max_connections=s.mel_worker_concurrency,
        )
    elif s.meta_enabled:
        senders["meta"] = OutboxSender(store.redis, store.keys.outbox)
    for sender in senders.values():
        stack.push_async_callback(sender.close)
    return senders


async def _open_media(s: Settings, stack: AsyncExitStack) -> MediaReader:
    """What reads a couple's voice notes and images: the providers' media downloads (only
    their hosts), the ``transcription`` profile, the agent profile's ``vision``."""
    fetchers: dict[str, MediaFetcher] = {}
    if s.twilio_account_sid and s.twilio_auth_token:
        fetchers["twilio"] = TwilioMediaFetcher(
            s.twilio_account_sid, s.twilio_auth_token, api_base_url=s.twilio_api_base_url
        )
    if s.meta_access_token:
        fetchers["meta"] = MetaMediaFetcher(
            s.meta_access_token,
            graph_base_url=s.meta_graph_base_url,
            api_version=s.meta_api_version,
        )
    for fetcher in fetchers.values():
        stack.push_async_callback(fetcher.close)
    profiles = load_profiles(s.llm_profiles_path)
    transcriber = OpenAICompatibleTranscriber(
        profiles, base_url=s.llm_base_url, api_key=s.llm_api_key, environ=_environment()
    )
    stack.push_async_callback(transcriber.aclose)
    if not transcriber.is_configured():
        log.info("transcription.not_configured", reason=transcriber.unavailable_reason)
    vision = "agent" in profiles and profiles.get("agent").vision
    return MediaReader(
        fetchers,
        transcriber if transcriber.is_configured() else None,
        max_bytes=s.mel_max_media_bytes,
        vision=vision,
    )


def _turn_worker(c: Components) -> TurnWorker:
    s = c.settings
    conversation = build_session_control(
        c.llm,
        c.ledger,
        SessionControlConfig(
            enabled=stickiness_enabled(s, c.llm),
            profile=s.route_stickiness_llm_profile,
            threshold=s.route_stickiness_confidence_threshold,
            history_turns=s.route_stickiness_history_turns,
            max_tokens=s.route_stickiness_max_tokens,
            human_handoff_message=s.human_handoff_message,
            end_session_message=s.end_session_message,
        ),
    )
    return TurnWorker(
        c.store,
        TurnRunner(
            conversation,
            support_status=c.roster.support_status,
            outage_window=s.llm_outage_retry_seconds,
            holding_message=s.llm_outage_message,
            media=c.media,
            served=lambda msg: s.served(msg.channel, msg.written_to),
            welcome_message=s.welcome_message,
        ),
        c.senders,
        metrics=c.metrics,
        concurrency=s.mel_worker_concurrency,
        claim_idle=s.mel_claim_idle_seconds,
        admission=c.admission,
    )


def _support_webhook(c: Components) -> SupportWebhook | None:
    s = c.settings
    if not (s.support_webhook_url and s.support_webhook_secret):
        return None
    return SupportWebhook(
        c.store,
        s.support_webhook_url,
        s.support_webhook_secret,
        backoff=s.support_webhook_backoff_seconds,
        claim_idle=s.mel_claim_idle_seconds,
    )


def _psychologist(c: Components) -> PsychologistWorker | None:
    """The consumer as configured; None without an LLM; a bad rules file is a ConfigError."""
    s = c.settings
    if c.llm is None:
        log.warning("psychologist.disabled", reason="no LLM configured (set LLM_BASE_URL)")
        return None
    try:
        rules = load_rules(s.psychologist_rules_path)
    except RulesError as exc:
        raise ConfigError(f"PSYCHOLOGIST_RULES_PATH: {exc}") from None
    return PsychologistWorker(
        c.store,
        Psychologist(c.llm),
        rules=rules,
        metrics=c.metrics,
        max_attempts=s.psychologist_max_attempts,
        backoff=s.psychologist_retry_backoff_seconds,
        claim_idle=s.mel_claim_idle_seconds,
        analysis_ttl_days=s.mel_analysis_ttl_days,
    )


def _periodic_jobs(c: Components) -> list[PeriodicJob]:
    s = c.settings
    return [
        *([c.admission] if c.admission else []),
        SessionSweeper(
            c.store,
            idle_timeout=s.session_idle_timeout,
            handoff_timeout=s.handoff_timeout,
            handoff_expired_message=s.handoff_expired_message,
        ),
        RawRetention(
            c.store,
            max_count=s.mel_raw_retention_count,
            max_age_days=s.mel_raw_retention_days,
        ),
        Unparker(c.store),
        SupportQueue(c.store, c.roster.support_status),
        RosterRefresh(c.store, c.roster),
    ]
