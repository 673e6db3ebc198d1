"""The business rules: a default for mel ships; another file replaces it; a bad path is
a clear error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import AgentError
from agent.psychologist import RULES_PATH_ENV, RulesError, load_rules, load_rules_from_env


def test_the_packaged_default_covers_mels_rules() -> None:
    rules = load_rules()

    assert rules.startswith("# ")
    for topic in ("empatia", "robô", "próximo passo", "ferramenta", "centavos", "guard"):
        assert topic in rules
    for term in ("handoff", "END_SESSION", "budget_agent", "savings_agent", "invoice_agent"):
        assert term in rules


def test_a_custom_file_replaces_the_default(tmp_path: Path) -> None:
    path = tmp_path / "rules.md"
    path.write_text("# Regras da casa\n\n- Seja breve.\n", "utf-8")

    assert load_rules(path) == "# Regras da casa\n\n- Seja breve."
    assert load_rules(str(path)) == "# Regras da casa\n\n- Seja breve."


def test_a_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "rules.md"

    with pytest.raises(RulesError) as caught:
        load_rules(path)

    assert caught.value.path == str(path)
    assert str(path) in str(caught.value)
    assert "cannot read" in str(caught.value)
    assert isinstance(caught.value, AgentError)


def test_an_empty_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "rules.md"
    path.write_text("  \n", "utf-8")

    with pytest.raises(RulesError, match="empty"):
        load_rules(path)


def test_the_environment_variable_points_at_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.md"
    path.write_text("- regra", "utf-8")

    assert load_rules_from_env({RULES_PATH_ENV: str(path)}) == "- regra"
    assert load_rules_from_env({RULES_PATH_ENV: " "}) == load_rules()
    assert load_rules_from_env({}) == load_rules()
    with pytest.raises(RulesError, match=r"missing\.md"):
        load_rules_from_env({RULES_PATH_ENV: str(tmp_path / "missing.md")})
