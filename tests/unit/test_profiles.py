"""LLM profiles: the packaged default loads, and every bad file names the file and the key."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.errors import ProfileError
from agent.profiles import (
    PROFILE_NAMES,
    LLMProfiles,
    load_profiles,
    load_profiles_from_env,
    parse_profiles,
)


def _valid() -> dict[str, Any]:
    profile = {
        "provider": "openai_compatible",
        "model": "gpt-4.1-mini",
        "temperature": 0.2,
        "max_tokens": 800,
        "timeout_seconds": 20,
    }
    return {"profiles": {name: dict(profile) for name in PROFILE_NAMES}}


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "llm_profiles.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), "utf-8")
    return path


def test_the_packaged_default_has_every_role_with_prices() -> None:
    profiles = load_profiles()

    assert set(profiles) == set(PROFILE_NAMES)
    agent = profiles.get("agent")
    assert agent.model == "gpt-4.1-mini"
    assert (agent.price_input_per_mtok, agent.price_output_per_mtok) == (
        Decimal("0.40"),
        Decimal("1.60"),
    )
    psychologist = profiles.get("psychologist")
    assert psychologist.model == "gpt-4.1"
    assert psychologist.price_output_per_mtok == Decimal("8.00")
    assert profiles.get("route_continuity").max_tokens == 80
    assert all(profiles.get(name).base_url is None for name in PROFILE_NAMES)


def test_the_packaged_default_has_a_transcription_profile_and_a_vision_agent() -> None:
    profiles = load_profiles()

    transcription = profiles.transcription
    assert transcription is not None
    assert (transcription.model, transcription.language) == ("gpt-4o-mini-transcribe", "pt")
    assert transcription.base_url is None  # LLM_BASE_URL, as every role
    assert transcription.price_input_per_mtok > 0
    assert "transcription" not in profiles  # not a chat role
    assert profiles.get("agent").vision
    assert not profiles.get("router").vision


def test_a_file_without_transcription_leaves_it_unconfigured(tmp_path: Path) -> None:
    profiles = load_profiles(_write(tmp_path, _valid()))

    assert profiles.transcription is None
    assert not any(profiles.get(name).vision for name in PROFILE_NAMES)  # vision: opt-in


def test_a_transcription_profile_loads_with_its_own_fields(tmp_path: Path) -> None:
    data = _valid()
    data["profiles"]["transcription"] = {
        "provider": "openai_compatible",
        "model": "whisper-1",
        "timeout_seconds": 30,
        "language": "es",
        "base_url": "http://127.0.0.1:8000/v1",
        "api_key_env": "STT_KEY",
        "price_per_minute": "0.006",
    }

    transcription = load_profiles(_write(tmp_path, data)).transcription

    assert transcription is not None
    assert (transcription.model, transcription.language) == ("whisper-1", "es")
    assert (transcription.base_url, transcription.api_key_env) == (
        "http://127.0.0.1:8000/v1",
        "STT_KEY",
    )
    assert transcription.price_per_minute == Decimal("0.006")


_TRANSCRIPTION = {"provider": "openai_compatible", "model": "whisper-1", "timeout_seconds": 30}


@pytest.mark.parametrize(
    ("change", "key", "reason"),
    [
        ({"max_tokens": 100}, "profiles.transcription.max_tokens", "unknown field"),
        ({"language": "pt-BR"}, "profiles.transcription.language", "ISO-639-1"),
        ({"model": None}, "profiles.transcription.model", "string"),
        ({"timeout_seconds": 0}, "profiles.transcription.timeout_seconds", "greater"),
        ({"price_per_minute": -1}, "profiles.transcription.price_per_minute", "greater"),
        ({"base_url": "ws://x"}, "profiles.transcription.base_url", "http"),
    ],
)
def test_a_bad_transcription_value_names_the_key(
    tmp_path: Path, change: dict[str, Any], key: str, reason: str
) -> None:
    data = _valid()
    data["profiles"]["transcription"] = {**_TRANSCRIPTION, **change}

    with pytest.raises(ProfileError) as caught:
        load_profiles(_write(tmp_path, data))

    assert caught.value.key == key
    assert reason in caught.value.reason


def test_vision_must_be_a_boolean(tmp_path: Path) -> None:
    data = _valid()
    data["profiles"]["agent"]["vision"] = "yes"

    with pytest.raises(ProfileError) as caught:
        load_profiles(_write(tmp_path, data))

    assert caught.value.key == "profiles.agent.vision"
    assert "boolean" in caught.value.reason


def test_a_file_loads_with_optional_fields_and_the_oci_alias(tmp_path: Path) -> None:
    data = _valid()
    data["profiles"]["agent"].update(
        provider="oci_openai",
        base_url="https://inference.generativeai.sa-saopaulo-1.oci.oraclecloud.com/v1",
        api_key_env="OCI_GENAI_KEY",
        price_input_per_mtok="0.15",
        price_output_per_mtok=0.6,
    )
    profiles = load_profiles(_write(tmp_path, data))

    agent = profiles.get("agent")
    assert agent.provider == "oci_openai"
    assert agent.api_key_env == "OCI_GENAI_KEY"
    assert agent.price_input_per_mtok == Decimal("0.15")
    assert agent.price_output_per_mtok == Decimal("0.6")
    assert profiles.get("router").price_input_per_mtok == 0
    assert profiles.source.endswith("llm_profiles.yaml")


def test_the_path_comes_from_LLM_PROFILES_PATH(tmp_path: Path) -> None:
    data = _valid()
    data["profiles"]["agent"]["model"] = "llama3.1:8b"
    path = _write(tmp_path, data)

    assert load_profiles_from_env({"LLM_PROFILES_PATH": str(path)}).get("agent").model == (
        "llama3.1:8b"
    )
    assert load_profiles_from_env({}).get("agent").model == "gpt-4.1-mini"


def _set(path: str, value: Any) -> Any:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for part in parents:
            node = node[part]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value

    return mutate


_DELETE = object()

BAD_CASES = [
    # (mutation, key in the message, reason fragment)
    (_set("profiles.agnet", _valid()["profiles"]["agent"]), "profiles.agnet", "unknown profile"),
    (_set("profiles.router", _DELETE), "profiles.router", "missing profile"),
    (_set("profiles.router.model", _DELETE), "profiles.router.model", "missing required field"),
    (_set("profiles.router.temperature", 3), "profiles.router.temperature", "between 0 and 2"),
    (_set("profiles.router.temperature", -0.1), "profiles.router.temperature", "between 0"),
    (_set("profiles.agent.temperature", "hot"), "profiles.agent.temperature", "number"),
    (_set("profiles.agent.temperature", True), "profiles.agent.temperature", "number"),
    (_set("profiles.agent.max_tokens", 0), "profiles.agent.max_tokens", "greater than 0"),
    (_set("profiles.agent.max_tokens", 1.5), "profiles.agent.max_tokens", "integer"),
    (_set("profiles.agent.timeout_seconds", 0), "profiles.agent.timeout_seconds", "greater"),
    (_set("profiles.agent.temprature", 0.2), "profiles.agent.temprature", "unknown field"),
    (_set("profiles.agent.provider", "anthropic"), "profiles.agent.provider", "openai_compat"),
    (_set("profiles.agent.model", ""), "profiles.agent.model", "at least 1"),
    (_set("profiles.agent.base_url", "ftp://x"), "profiles.agent.base_url", "http"),
    (_set("profiles.agent.api_key_env", "my key"), "profiles.agent.api_key_env", "environment"),
    (
        _set("profiles.agent.price_input_per_mtok", -1),
        "profiles.agent.price_input_per_mtok",
        "greater than or equal to 0",
    ),
    (_set("profiles.agent", "gpt-4.1-mini"), "profiles.agent", "mapping"),
    (_set("profiles", ["agent"]), "profiles", "mapping"),
    (_set("profiles", _DELETE), "profiles", "missing"),
    (_set("defaults", {}), "defaults", "unknown top-level key"),
]


@pytest.mark.parametrize(("mutate", "key", "reason"), BAD_CASES)
def test_a_bad_value_names_the_file_and_the_key(
    tmp_path: Path, mutate: Any, key: str, reason: str
) -> None:
    data = _valid()
    mutate(data)
    path = _write(tmp_path, data)

    with pytest.raises(ProfileError) as caught:
        load_profiles(path)

    assert caught.value.key == key
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"{path}: {key}: ")


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("- just\n- a list\n", "(top level)", "must be a mapping"),
        ("profiles:\n  agent: {model: [unclosed\n", "line 3", "invalid YAML"),
        ("profiles:\n\tagent: {}\n", "line 2", "invalid YAML"),
        ("profiles:\n  agent: {}\n  agent: {}\n", "line 3", "duplicate key 'agent'"),
        ("", "(top level)", "must be a mapping"),
    ],
)
def test_unusable_yaml_names_the_file_and_where(
    tmp_path: Path, text: str, key: str, reason: str
) -> None:
    path = _write(tmp_path, text)

    with pytest.raises(ProfileError) as caught:
        load_profiles(path)

    assert caught.value.key == key
    assert reason in caught.value.reason
    assert str(path) in str(caught.value)


def test_a_missing_file_is_a_profile_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"

    with pytest.raises(ProfileError, match=r"nope\.yaml: cannot read the file"):
        load_profiles(missing)


def test_asking_for_an_unknown_profile_names_the_source_and_the_key() -> None:
    profiles = load_profiles()

    with pytest.raises(ProfileError) as caught:
        profiles.get("summarizer")

    assert str(caught.value) == (
        "llm_profiles.yaml: profiles.summarizer: unknown profile (known: agent, router, "
        "route_continuity, psychologist, psychologist_light)"
    )


def test_profiles_are_immutable() -> None:
    profiles: LLMProfiles = parse_profiles(yaml.safe_dump(_valid()), "inline.yaml")
    with pytest.raises(ValueError, match="frozen"):
        profiles.get("agent").model = "other"  # type: ignore[misc]
