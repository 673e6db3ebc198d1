"""``mel-gateway support agent add|list|remove`` as an operator runs them."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator

import pytest
import structlog

from gateway.cli import main
from tests.integration.test_cli_errors import assert_one_line


@pytest.fixture(autouse=True)
def _env(redis_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> Iterator[None]:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("MEL_REDIS_PREFIX", f"cli-{uuid.uuid4().hex[:8]}")
    monkeypatch.chdir(str(tmp_path))
    yield
    structlog.reset_defaults()


def _run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str,
    stdin: str = "",
) -> tuple[int, str, str]:  # fmt: skip
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_agents_are_added_listed_and_removed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = lambda *a, stdin="": _run(capsys, monkeypatch, *a, stdin=stdin)  # noqa: E731
    code, out, err = run(
        "support", "agent", "add", "Ana", "--password-stdin", stdin="s3nha-da-ana\n"
    )
    assert (code, err) == (0, "")
    assert "agent Ana added" in out
    code, out, _ = run("support", "agent", "list", "--json")
    assert code == 0
    agents = json.loads(out)["agents"]
    assert [a["name"] for a in agents] == ["Ana"]
    assert "password" not in agents[0]

    code, _, err = run("support", "agent", "add", "ana", "--password-stdin", stdin="outra-senha\n")
    assert code == 1
    assert_one_line(err, "exists", "--replace")
    code, _, err = run("support", "agent", "add", "bia", "--password-stdin", stdin="curta\n")
    assert code == 1
    assert_one_line(err, "8 to 1024")
    code, _, err = run(
        "support", "agent", "add", "b i a", "--password-stdin", stdin="longa-demais\n"
    )
    assert code == 1
    assert_one_line(err, "bad agent name")
    code, _, err = run("support", "agent", "add", "bia", stdin="sem-terminal\n")
    assert code == 1
    assert_one_line(err, "--password-stdin")

    code, out, _ = run("support", "agent", "remove", "ANA")
    assert (code, out.strip()) == (0, "agent ANA removed (logins ended)")
    code, _, err = run("support", "agent", "remove", "ana")
    assert code == 1
    assert_one_line(err, "no agent named 'ana'")
    code, out, _ = run("support", "agent", "list")
    assert "no agents" in out
