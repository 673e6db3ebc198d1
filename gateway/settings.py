"""Configuration from the environment (and ``.env``), validated at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gateway.errors import ConfigError

__all__ = ["Settings", "load_settings"]

Seconds = Annotated[float, Field(gt=0)]


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

    # Redis
    redis_url: str | None = None  # unset → embedded redis-server under MEL_DATA_DIR
    mel_data_dir: Path = Path(".mel")
    mel_redis_prefix: str = Field("mel", min_length=1)

    # Twilio
    twilio_account_sid: str | None = None
    twilio_auth_token: str | None = None
    twilio_whatsapp_from: str | None = None
    twilio_api_base_url: str = "https://api.twilio.com"

    # Meta Cloud API
    meta_app_secret: str | None = None
    meta_verify_token: str | None = None
    meta_access_token: str | None = None
    meta_phone_number_id: str | None = None
    meta_graph_base_url: str = "https://graph.facebook.com"
    meta_api_version: str = "v21.0"

    # LLM
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_profiles_path: Path | None = None

    # Worker and state
    mel_worker_concurrency: int = Field(64, ge=1, le=4096)
    mel_history_turns: int = Field(20, ge=1, le=500)
    mel_dedupe_ttl_seconds: int = Field(7 * 24 * 3600, gt=0)
    mel_claim_idle_seconds: Seconds = 15.0
    mel_shutdown_grace_seconds: Seconds = 10.0
    mel_raw_retention_count: int = Field(100_000, gt=0)
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


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment; one clear line per bad value, as a ConfigError."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]).upper()
            lines.append(f"  {name}: {err['msg']} (got {err.get('input')!r})")
        raise ConfigError("invalid configuration:\n" + "\n".join(lines)) from None
