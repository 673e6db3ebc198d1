"""Configuration from the environment (and ``.env``), validated at start-up."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent.routing import SupportStatus
from gateway.errors import ConfigError

__all__ = ["Settings", "load_settings"]

Seconds = Annotated[float, Field(gt=0)]
SAO_PAULO = ZoneInfo("America/Sao_Paulo")


class Settings(BaseSettings):
    """Every knob of the service. Names are the public interface: keep them."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    # HTTP
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    public_base_url: str | None = None  # the URL providers call (Twilio signs over it)
    max_body_twilio: int = Field(1024 * 1024, alias="MEL_MAX_BODY_TWILIO", gt=0)
    max_body_meta: int = Field(3 * 1024 * 1024, alias="MEL_MAX_BODY_META", gt=0)
    # a connection must send a whole request (headers) within this, and is closed after
    # this long idle (slow clients hold a connection no longer)
    mel_http_idle_timeout_seconds: float = Field(15.0, gt=0)
    mel_http_body_timeout_seconds: float = Field(10.0, gt=0)  # to receive a webhook's body

    # Redis
    redis_url: str | None = None  # unset → embedded redis-server under MEL_DATA_DIR
    mel_data_dir: Path = Path(".mel")
    mel_redis_prefix: str = Field("mel", min_length=1)

    # Twilio
    twilio_account_sid: str | None = None
    twilio_auth_token: str | None = None
    twilio_whatsapp_from: str | None = None
    twilio_api_base_url: str = "https://api.twilio.com"
    # the business addresses we serve (comma-separated numbers / MG… Messaging Services);
    # unset: TWILIO_WHATSAPP_FROM (or every number, when that is unset too)
    twilio_numbers: str | None = None

    # Meta Cloud API
    meta_app_secret: str | None = None
    meta_verify_token: str | None = None
    meta_access_token: str | None = None
    meta_phone_number_id: str | None = None
    meta_graph_base_url: str = "https://graph.facebook.com"
    meta_api_version: str = "v21.0"
    meta_phone_number_ids: str | None = None  # comma-separated; unset: META_PHONE_NUMBER_ID

    # LLM
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_profiles_path: Path | None = None

    # Session control (names from the route-stickiness spec)
    enable_route_stickiness: bool | None = None  # unset: on when an LLM is configured
    route_stickiness_llm_profile: str = "route_continuity"
    route_stickiness_confidence_threshold: float = Field(0.90, ge=0, le=1)
    route_stickiness_history_turns: int = Field(2, ge=0, le=50)
    route_stickiness_max_tokens: int = Field(80, ge=1, le=4096)
    human_handoff_message: str = Field(
        "Vou encaminhar seu atendimento para uma pessoa.", min_length=1
    )
    end_session_message: str = Field("Atendimento encerrado. Obrigado pelo contato.", min_length=1)
    handoff_timeout: Seconds = 15 * 60.0
    handoff_expired_message: str = Field(
        "Ninguém do time conseguiu assumir a conversa agora — desculpa a demora. "
        "Sigo eu (mel) por aqui: posso te ajudar com orçamento, metas ou fatura?",
        min_length=1,
    )
    session_idle_timeout: Seconds = 30 * 60.0
    # what support does, the couple sees (empty: say nothing)
    support_release_message: str = (
        "Voltei eu, a mel, por aqui. Se precisar de alguma coisa do orçamento, das metas "
        "ou da fatura, é só me chamar."
    )
    support_close_message: str = (
        "Encerramos este atendimento por aqui. Obrigada pelo contato! Quando quiser, é só "
        "mandar uma mensagem."
    )
    welcome_message: str = Field(
        "Oi! Eu sou a mel, a assistente de finanças de vocês dois. Posso anotar gastos, "
        "mostrar quanto vocês gastaram no mês, acompanhar metas e a fatura do cartão. "
        "Por onde a gente começa?",
        min_length=1,
    )
    mel_max_media_bytes: int = Field(16 * 1024 * 1024, gt=0)  # a voice note or image fetched
    # the model unreachable: hold the message, answer it when it is back
    llm_outage_retry_seconds: Seconds = 900.0
    llm_outage_message: str = Field(
        "Estou com uma instabilidade para pensar agora. Guardei sua mensagem e te respondo "
        "assim que eu voltar, não precisa mandar de novo.",
        min_length=1,
    )

    # Support
    support_token: str | None = None
    support_hours: str | None = Field(None, pattern=r"^\d{2}:\d{2}-\d{2}:\d{2}$")
    mel_feed_max_streams: int = Field(2000, gt=0)  # open /support/events streams, per process
    support_webhook_url: str | None = None
    support_webhook_secret: str | None = None
    support_webhook_backoff_seconds: Seconds = 1.0
    # the support console (/console/, docs/console.md): people log in as agents
    console_session_seconds: int = Field(12 * 3600, ge=60)  # a login lasts this long
    console_login_max_per_name: int = Field(5, ge=1)  # attempts per window, per agent name
    console_login_max_per_address: int = Field(30, ge=1)  # … and per client address
    console_login_window_seconds: int = Field(900, ge=1)
    console_behind_proxy: bool = False  # the client address is X-Forwarded-For's last entry

    # Psychologist (ADR 0015): post-session analysis
    psychologist_enabled: bool = True  # serve / worker run the consumer in-process
    psychologist_rules_path: Path | None = None  # business rules (Markdown); default: mel's
    psychologist_max_attempts: int = Field(5, ge=1, le=50)
    psychologist_retry_backoff_seconds: Seconds = 5.0  # doubled after each failed run

    # Worker and state
    # turns in flight per worker process; every pool (Redis, LLM, senders) is sized from it
    mel_worker_concurrency: int = Field(1024, ge=1, le=4096)
    # `worker` / `psychologist` processes serve /metrics and /healthz here (unset: none)
    mel_metrics_port: int | None = Field(None, ge=1, le=65535)
    # no new turn starts while the event loop runs this late (0: never pause)
    mel_max_loop_lag_ms: int = Field(100, ge=0)
    mel_history_turns: int = Field(20, ge=1, le=500)
    mel_dedupe_ttl_seconds: int = Field(7 * 24 * 3600, gt=0)
    mel_claim_idle_seconds: Seconds = 15.0
    mel_shutdown_grace_seconds: Seconds = 10.0
    mel_raw_retention_count: int = Field(100_000, gt=0)
    mel_raw_retention_days: float = Field(30, ge=0)  # 0 = no age limit
    mel_raw_refused_count: int = Field(10_000, gt=0)  # refused deliveries kept (bodies cut)
    # how long what grows is kept (every key has a bound or an expiry: docs/operations.md)
    mel_events_maxlen: int = Field(500_000, gt=0)  # the event stream, ~entries
    mel_thread_ttl_days: float = Field(180, gt=0)  # a thread's state and history, idle
    mel_session_events_ttl_days: float = Field(90, gt=0)  # a session's event-id list
    mel_reply_ttl_seconds: int = Field(3 * 24 * 3600, gt=0)  # a delivered reply's record
    mel_analysis_ttl_days: float = Field(365, gt=0)  # the psychologist's analyses

    # seconds an LLM call waits for a free connection (its timeout starts once it has one)
    llm_pool_timeout_seconds: Seconds = 30.0

    # LLM cassettes (replay diffs): record every LLM exchange, or answer from the file
    llm_cassette: Path | None = None
    llm_cassette_mode: Literal["record", "replay"] | None = None
    mel_log_format: str = Field("auto", pattern="^(auto|json|console)$")
    mel_log_level: str = Field("info", pattern="^(?i)(debug|info|warning|error)$")

    @field_validator(
        "public_base_url", "twilio_api_base_url", "meta_graph_base_url", "llm_base_url"
    )
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None if value == "" else value
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @field_validator("support_hours")
    @classmethod
    def _hours(cls, value: str | None) -> str | None:
        if value is None:
            return None
        for clock in value.split("-"):
            hours, minutes = (int(part) for part in clock.split(":"))
            if not (hours < 24 and minutes < 60) and clock != "24:00":
                raise ValueError(f"{clock} is not a time of day (HH:MM, 00:00 to 24:00)")
        if value[:5] == value[6:]:
            raise ValueError("the start and the end are the same time")
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value or None

    @field_validator("psychologist_rules_path", mode="before")
    @classmethod
    def _empty_path_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _pairs(self) -> Settings:
        if self.support_webhook_url and not self.support_webhook_secret:
            raise ValueError("SUPPORT_WEBHOOK_URL is set: SUPPORT_WEBHOOK_SECRET must be set too")
        if bool(self.llm_cassette) != bool(self.llm_cassette_mode):
            raise ValueError("LLM_CASSETTE and LLM_CASSETTE_MODE (record|replay) go together")
        return self

    def support_status(self, now: datetime | None = None, *, agents: bool = False) -> SupportStatus:
        """Whether a person can pick up a handoff: ``none`` (no support configured),
        ``out_of_hours`` (configured, outside SUPPORT_HOURS, São Paulo time), ``available``.
        Support is configured by ``SUPPORT_TOKEN`` or by console agents existing
        (``agents``: what ``gateway.support_agents.SupportRoster`` last saw in Redis)."""
        if not (self.support_token or agents):
            return "none"
        if not self.support_hours:
            return "available"
        start, end = self.support_hours.split("-")
        local = (now or datetime.now(UTC)).astimezone(SAO_PAULO).strftime("%H:%M")
        inside = start <= local < end if start <= end else (local >= start or local < end)
        return "available" if inside else "out_of_hours"

    def support_available(self, now: datetime | None = None, *, agents: bool = False) -> bool:
        return self.support_status(now, agents=agents) == "available"

    def served(self, channel: str, addresses: Iterable[str]) -> bool:
        """Whether we answer messages written to these business addresses of ``channel``
        (one listed is enough: a number and the Messaging Service it belongs to)."""
        listed = self.twilio_numbers if channel == "twilio" else self.meta_phone_number_ids
        default = self.twilio_whatsapp_from if channel == "twilio" else self.meta_phone_number_id
        wanted = {_address(a) for a in (listed or default or "").split(",") if a.strip()}
        return not wanted or any(_address(a) in wanted for a in addresses)

    def max_body_for(self, provider: str) -> int:
        """The largest webhook body taken from ``provider`` (``twilio`` or ``meta``)."""
        return self.max_body_meta if provider == "meta" else self.max_body_twilio

    @property
    def twilio_enabled(self) -> bool:
        return bool(self.twilio_auth_token)

    @property
    def twilio_sending(self) -> bool:
        return bool(
            self.twilio_account_sid and self.twilio_auth_token and self.twilio_whatsapp_from
        )

    @property
    def meta_enabled(self) -> bool:
        return bool(self.meta_app_secret)

    @property
    def dev_mode(self) -> bool:
        """No provider configured: the Twilio webhook takes a locally generated dev secret
        and replies go to the local outbox channel."""
        return not self.twilio_enabled and not self.meta_enabled


def _address(value: str) -> str:
    """A business address compared plainly: no ``whatsapp:`` prefix, no spaces."""
    return value.strip().removeprefix("whatsapp:").replace(" ", "")


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment; one clear line per bad value, as a ConfigError."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]).upper()
            msg = err["msg"].removeprefix("Value error, ")
            secret = any(w in name for w in ("TOKEN", "SECRET", "KEY"))
            shown = "" if secret or not name else f" (got {err.get('input')!r})"
            lines.append(f"  {name + ': ' if name else ''}{msg}{shown}")
        raise ConfigError("invalid configuration:\n" + "\n".join(lines)) from None
