"""The LLM client without the network: usage and cost arithmetic, endpoint resolution."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agent.errors import ProfileError
from agent.llm import NO_API_KEY, Endpoint, OpenAICompatibleLLM, Usage, cost_micro_usd
from agent.profiles import LLMProfiles, load_profiles


def _profiles(**agent_changes: object) -> LLMProfiles:
    base = load_profiles()
    changed = {
        name: (base.get(name).model_copy(update=agent_changes) if name == "agent" else profile)
        for name, profile in base.profiles.items()
    }
    return LLMProfiles(changed, "test.yaml")


def test_cost_is_micro_usd_rounded_up_from_the_profile_prices() -> None:
    mini = load_profiles().get("agent")  # 0.40 / 1.60 USD per million tokens
    full = load_profiles().get("psychologist")  # 2.00 / 8.00

    assert cost_micro_usd(mini, 1000, 100) == 400 + 160
    assert cost_micro_usd(mini, 1, 0) == 1  # 0.4 micro-USD rounds up, never down to free
    assert cost_micro_usd(mini, 0, 0) == 0
    assert cost_micro_usd(full, 1_000_000, 1_000_000) == 10_000_000  # US$ 10
    assert cost_micro_usd(_profiles(price_input_per_mtok=Decimal(0)).get("agent"), 10**6, 0) == 0


def test_usage_adds_up() -> None:
    total = Usage(100, 10, 56, 1) + Usage(200, 20, 112, 1)

    assert total == Usage(300, 30, 168, 2)
    assert total.total_tokens == 330
    assert total.cost_usd == Decimal("0.000168")
    assert sum([Usage(1, 1, 1, 1)] * 3, Usage()) == Usage(3, 3, 3, 3)


def test_no_base_url_anywhere_means_not_configured() -> None:
    llm = OpenAICompatibleLLM(load_profiles(), environ={})

    assert llm.endpoint("agent") is None
    assert not llm.is_configured()
    assert llm.unconfigured_profiles() == list(load_profiles())


def test_the_default_endpoint_and_the_keyless_placeholder() -> None:
    llm = OpenAICompatibleLLM(load_profiles(), base_url="http://127.0.0.1:11434/v1", environ={})

    assert llm.endpoint("router") == Endpoint("http://127.0.0.1:11434/v1", NO_API_KEY)
    assert llm.is_configured()
    assert llm.is_configured("agent")


def test_a_profile_can_have_its_own_endpoint_and_key_variable() -> None:
    profiles = _profiles(base_url="https://oci.example/v1", api_key_env="OCI_KEY")

    with_key = OpenAICompatibleLLM(profiles, api_key="sk-default", environ={"OCI_KEY": "oci-1"})
    assert with_key.endpoint("agent") == Endpoint("https://oci.example/v1", "oci-1")
    assert with_key.endpoint("router") is None  # no default base_url
    assert with_key.is_configured("agent")
    assert not with_key.is_configured("router")
    assert with_key.unconfigured_profiles() == [
        "router",
        "route_continuity",
        "psychologist",
        "psychologist_light",
    ]

    key_unset = OpenAICompatibleLLM(profiles, api_key="sk-default", environ={"OCI_KEY": " "})
    assert key_unset.endpoint("agent") == Endpoint("https://oci.example/v1", "sk-default")


def test_from_env_reads_LLM_BASE_URL_and_LLM_API_KEY() -> None:
    llm = OpenAICompatibleLLM.from_env(
        load_profiles(), {"LLM_BASE_URL": "http://127.0.0.1:8000/v1", "LLM_API_KEY": "sk-1"}
    )
    assert llm.endpoint("agent") == Endpoint("http://127.0.0.1:8000/v1", "sk-1")
    assert not OpenAICompatibleLLM.from_env(load_profiles(), {"LLM_BASE_URL": ""}).is_configured()


def test_an_endpoint_never_shows_its_key() -> None:
    assert "sk-secret" not in repr(Endpoint("http://x/v1", "sk-secret"))


def test_an_unknown_profile_is_a_profile_error() -> None:
    llm = OpenAICompatibleLLM(load_profiles(), base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ProfileError, match=r"profiles\.nope: unknown profile"):
        llm.endpoint("nope")
