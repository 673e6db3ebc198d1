"""LLM profiles: which model, endpoint, limits and prices each role uses.

The file (seed format) maps each role to its settings::

    profiles:
      agent: {provider: openai_compatible, model: gpt-4.1-mini, temperature: 0.2,
              max_tokens: 800, timeout_seconds: 20}
      ...

One more entry is optional: ``transcription`` (voice notes, an OpenAI-compatible
``/audio/transcriptions`` endpoint), a :class:`TranscriptionProfile`. Without it,
transcription is not configured.

A default file ships in the package; ``LLM_PROFILES_PATH`` points at another one. Every
problem (unreadable file, bad YAML, missing role or field, unknown key, bad value) is a
:class:`~agent.errors.ProfileError` naming the file and the key path, raised at start-up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
)

from agent.errors import ProfileError

__all__ = [
    "DEFAULT_PROFILES_NAME",
    "PROFILES_PATH_ENV",
    "PROFILE_NAMES",
    "TRANSCRIPTION_PROFILE",
    "LLMProfile",
    "LLMProfiles",
    "TranscriptionProfile",
    "load_profiles",
    "load_profiles_from_env",
    "parse_profiles",
]

PROFILE_NAMES = ("agent", "router", "route_continuity", "psychologist", "psychologist_light")
"""Every role that must have a profile; any other name but the optional ones is a typo."""

TRANSCRIPTION_PROFILE = "transcription"
"""The optional profile of the voice-note transcription endpoint."""

PROFILES_PATH_ENV = "LLM_PROFILES_PATH"
DEFAULT_PROFILES_NAME = "llm_profiles.yaml"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LANGUAGE = re.compile(r"^[a-z]{2}$")

Provider = Literal["openai_compatible", "oci_openai"]
Price = Annotated[Decimal, Field(ge=0, allow_inf_nan=False)]


class _EndpointProfile(BaseModel):
    """What every profile has: the model, its endpoint, its time limit and its prices.
    Unknown keys are rejected (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Provider
    model: Annotated[str, Field(min_length=1)]
    timeout_seconds: Annotated[float, Field(strict=True, gt=0, le=600)]
    base_url: str | None = None
    api_key_env: str | None = None
    price_input_per_mtok: Price = Decimal(0)
    price_output_per_mtok: Price = Decimal(0)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError("must be the name of an environment variable, e.g. OPENAI_API_KEY")
        return value


_P = TypeVar("_P", bound=_EndpointProfile)


class LLMProfile(_EndpointProfile):
    """One chat role's settings. ``vision``: the model reads images (image parts are
    sent to it; other profiles get the text of the message only)."""

    temperature: Annotated[float, Field(strict=True)]
    max_tokens: Annotated[StrictInt, Field(gt=0)]
    vision: StrictBool = False

    @field_validator("temperature")
    @classmethod
    def _temperature_range(cls, value: float) -> float:
        if not 0 <= value <= 2:
            raise ValueError("must be between 0 and 2")
        return value


class TranscriptionProfile(_EndpointProfile):
    """The voice-note transcription endpoint (``POST {base_url}/audio/transcriptions``).

    ``language`` (ISO-639-1) is sent with every audio. Prices: token-billed models report
    tokens (``price_input_per_mtok`` for the audio, ``price_output_per_mtok`` for the
    text); duration-billed ones (``whisper-1``) report seconds (``price_per_minute``)."""

    language: str = "pt"
    price_per_minute: Price = Decimal(0)

    @field_validator("language")
    @classmethod
    def _iso_639_1(cls, value: str) -> str:
        if not _LANGUAGE.match(value):
            raise ValueError("must be an ISO-639-1 language code, e.g. 'pt'")
        return value


@dataclass(frozen=True)
class LLMProfiles:
    """The loaded chat profiles, by role name (iterating gives the roles); ``source`` is
    the file they came from; ``transcription`` is kept apart, as it is not a chat role."""

    profiles: Mapping[str, LLMProfile]
    source: str = DEFAULT_PROFILES_NAME
    transcription: TranscriptionProfile | None = None
    """The optional ``transcription`` profile (``None``: transcription not configured)."""
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(self.profiles))

    def get(self, name: str) -> LLMProfile:
        """The profile for ``name``; an unknown name is a :class:`ProfileError`."""
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(self.names)
            raise ProfileError(
                self.source, f"profiles.{name}", f"unknown profile (known: {known})"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self.profiles

    def __iter__(self) -> Iterator[str]:
        return iter(self.profiles)


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (YAML would keep the last)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def _key_path(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _reason(error: Mapping[str, Any]) -> str:
    kind = error.get("type")
    if kind == "missing":
        return "missing required field"
    if kind == "extra_forbidden":
        return "unknown field"
    message = str(error.get("msg", "invalid value"))
    return message.removeprefix("Value error, ")


def parse_profiles(text: str, source: str) -> LLMProfiles:
    """Parse and validate the YAML text of a profiles file (``source`` names it in errors)."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark is not None else ""
        raise ProfileError(source, where, f"invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ProfileError(source, "", f"invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ProfileError(source, "(top level)", "must be a mapping with a 'profiles' key")
    extra = sorted(str(key) for key in data if key != "profiles")
    if extra:
        raise ProfileError(source, extra[0], "unknown top-level key (only 'profiles' is allowed)")
    if "profiles" not in data:
        raise ProfileError(source, "profiles", "missing")
    raw = data["profiles"]
    if not isinstance(raw, dict):
        raise ProfileError(source, "profiles", "must be a mapping of role name to settings")
    known = (*PROFILE_NAMES, TRANSCRIPTION_PROFILE)
    for name in raw:
        if name not in known:
            raise ProfileError(
                source, f"profiles.{name}", f"unknown profile (known: {', '.join(known)})"
            )
    profiles: dict[str, LLMProfile] = {}
    for name in PROFILE_NAMES:
        if name not in raw:
            raise ProfileError(source, f"profiles.{name}", "missing profile")
        profiles[name] = _validated(LLMProfile, raw[name], source, name)
    transcription = None
    if TRANSCRIPTION_PROFILE in raw:
        settings = raw[TRANSCRIPTION_PROFILE]
        transcription = _validated(TranscriptionProfile, settings, source, TRANSCRIPTION_PROFILE)
    return LLMProfiles(profiles, source, transcription)


def _validated(kind: type[_P], settings: Any, source: str, name: str) -> _P:
    """``settings`` validated as ``kind``; the first problem is a :class:`ProfileError`."""
    if not isinstance(settings, dict):
        raise ProfileError(source, f"profiles.{name}", "must be a mapping of settings")
    try:
        return kind.model_validate(settings)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = _key_path(("profiles", name, *first["loc"]))
        raise ProfileError(source, key, _reason(first)) from None


def load_profiles(path: Path | str | None = None) -> LLMProfiles:
    """Load a profiles file; ``None`` loads the default one shipped in the package."""
    if path is None:
        text = resources.files("agent").joinpath(DEFAULT_PROFILES_NAME).read_text("utf-8")
        return parse_profiles(text, DEFAULT_PROFILES_NAME)
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ProfileError(path, "", f"cannot read the file: {reason}") from None
    return parse_profiles(text, str(path))


def load_profiles_from_env(environ: Mapping[str, str] = os.environ) -> LLMProfiles:
    """``load_profiles($LLM_PROFILES_PATH)``, or the packaged default when it is unset/empty."""
    path = environ.get(PROFILES_PATH_ENV, "").strip()
    return load_profiles(Path(path) if path else None)
