"""What an operator sees when a command cannot do its job: one line on stderr (after the
process's log lines, for the long-running ones), an exit status (2: configuration or
usage, 1: anything else) and never a traceback; and commands that log nothing unless -v.

Refusals that come before logging is set up run in-process (``gateway.cli.main``); the
rest run as processes (``python -m gateway``), as an operator runs them: a refusal that
does not come is then a bounded failure rather than a hung test, and a command's logging
set-up (structlog caches loggers on first use) cannot leak into other tests.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from gateway.cli import main

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "tests" / "data" / "e2e_llm_profiles.yaml"
UNREACHABLE = "redis://127.0.0.1:1"
GOOD_CSV = (
    "date,amount,category,description,paid_by\n"
    '2026-06-03,"45,90",mercado,feira,+5511999990000\n'
    "2026-06-04,120.00,luz,conta de luz,+5511988887777\n"
)
_ENV = (
    "REDIS_URL", "HOST", "PORT", "SUPPORT_HOURS", "SUPPORT_TOKEN", "LLM_PROFILES_PATH",
    "ROUTE_STICKINESS_LLM_PROFILE", "ENABLE_ROUTE_STICKINESS", "PSYCHOLOGIST_RULES_PATH",
    "PSYCHOLOGIST_ENABLED", "MEL_LOG_LEVEL", "MEL_LOG_FORMAT", "SOME_UNSET_VAR",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A clean environment in an empty directory (no stray .env); logging undone after."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEL_DATA_DIR", str(tmp_path / "mel"))
    monkeypatch.chdir(tmp_path)
    yield
    structlog.reset_defaults()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _process(
    tmp_path: Path, *argv: str, timeout: float = 30, **env: str
) -> tuple[int, str, str]:  # fmt: skip
    """``python -m gateway ARGV`` with this tree's packages, in ``tmp_path``: exit status,
    stdout and stderr (a refusal that never comes fails here, after ``timeout`` s)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), "MEL_LOG_FORMAT": "json", **env}
    done = subprocess.run(
        [sys.executable, "-m", "gateway", *argv],
        cwd=tmp_path,
        env=full,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout, done.stderr


def assert_one_line(err: str, *needles: str) -> None:
    """The error is one line (a configuration error: a heading and one line per bad
    value), says what is wrong, and is not a traceback."""
    if "Traceback" in err:
        pytest.fail("a traceback, ending: " + err.strip().splitlines()[-1])
    lines = err.strip().splitlines()
    assert lines, "nothing said"
    assert lines[0].startswith("mel-gateway:"), err
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("  ")), err
    for needle in needles:
        assert needle in err, err


def assert_logs_then_one_line(err: str, *needles: str) -> None:
    """A process: its JSON log lines, then the one error line; never a traceback."""
    if "Traceback" in err:
        pytest.fail("a traceback, ending: " + err.strip().splitlines()[-1])
    lines = err.strip().splitlines()
    for line in lines[:-1]:
        if not line.startswith("  "):  # a configuration error's own detail lines
            assert "event" in json.loads(line), line
    last = next(line for line in lines if line.startswith("mel-gateway:"))
    for needle in needles:
        assert needle in err[err.index(last) :], err


# ---------------------------------------------------------------- configuration


def test_a_redis_url_that_is_not_one_is_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REDIS_URL", "foo://x")
    code, _out, err = _run(capsys, "insights")
    assert code == 2
    assert_one_line(err, "REDIS_URL")


def test_support_hours_out_of_the_clock_are_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SUPPORT_HOURS", "25:00-18:00")
    code, _out, err = _run(capsys, "insights")
    assert code == 2
    assert_one_line(err, "SUPPORT_HOURS", "25:00")


def test_replay_send_to_an_address_without_scheme_is_refused_up_front(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["replay", "send", "--to", "host:8080", "--yes"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "--to" in err
    assert "http://host:8080" in err  # says how to write it


def test_insights_rejects_an_unknown_status(redis_url: str, tmp_path: Path) -> None:
    code, out, err = _process(tmp_path, "insights", "--status", "bogus", REDIS_URL=redis_url)
    assert code == 2
    assert_one_line(err, "bogus")
    assert "No hypotheses" not in out


# ---------------------------------------------------------------- ledger import files


@pytest.mark.parametrize(
    ("content", "needle"),
    [(None, "missing.csv"), ("", "header"), ("a,b,c\n1,2,3\n", "date")],
    ids=["missing", "empty", "wrong-header"],
)
def test_ledger_import_of_a_file_it_cannot_use_is_one_line_and_exit_1(
    redis_url: str, tmp_path: Path, content: str | None, needle: str
) -> None:
    path = tmp_path / "missing.csv"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    code, out, err = _process(
        tmp_path, "ledger", "import", str(path), "--household", "casa", REDIS_URL=redis_url
    )
    assert code == 1
    assert_one_line(err, needle)
    assert "imported" not in out


# ---------------------------------------------------------------- Redis unreachable


def test_insights_with_redis_unreachable_is_one_line_and_exit_1(tmp_path: Path) -> None:
    code, _out, err = _process(tmp_path, "insights", REDIS_URL=UNREACHABLE)
    assert code == 1
    assert_one_line(err, "Redis")


def test_ledger_import_with_redis_unreachable_is_one_line_and_exit_1(tmp_path: Path) -> None:
    csv = tmp_path / "gastos.csv"
    csv.write_text(GOOD_CSV, encoding="utf-8")
    code, _out, err = _process(
        tmp_path, "ledger", "import", str(csv), "--household", "casa", REDIS_URL=UNREACHABLE
    )
    assert code == 1
    assert_one_line(err, "Redis")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_chat_with_redis_unreachable_is_one_line_and_exit_1(tmp_path: Path) -> None:
    code, _out, err = _process(
        tmp_path, "chat", REDIS_URL=UNREACHABLE, PORT=str(_free_port()),
        PSYCHOLOGIST_ENABLED="false",
    )  # fmt: skip
    assert code == 1
    assert_logs_then_one_line(err, "Redis")


# ---------------------------------------------------------------- start-up refusals


def test_serve_on_a_port_in_use_is_one_line_and_exit_1(redis_url: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _out, err = _process(
            tmp_path, "serve", REDIS_URL=redis_url, HOST="127.0.0.1", PORT=str(port),
            PSYCHOLOGIST_ENABLED="false", MEL_SHUTDOWN_GRACE_SECONDS="1",
        )  # fmt: skip
    assert code == 1
    assert_logs_then_one_line(err, "in use")


def test_an_unknown_stickiness_profile_refuses_to_start_with_exit_2(
    redis_url: str, tmp_path: Path
) -> None:
    code, _out, err = _process(
        tmp_path, "worker", REDIS_URL=redis_url, LLM_BASE_URL="http://127.0.0.1:9",
        LLM_API_KEY="sk-test", LLM_PROFILES_PATH=str(PROFILES),
        ROUTE_STICKINESS_LLM_PROFILE="nope",
        PSYCHOLOGIST_RULES_PATH=str(tmp_path / "no-rules.md"),  # a tripwire: never runs
    )  # fmt: skip
    assert code == 2
    assert_logs_then_one_line(err, "ROUTE_STICKINESS_LLM_PROFILE", "nope")


def _profiles_with_key_env(tmp_path: Path) -> Path:
    text = PROFILES.read_text(encoding="utf-8").replace(
        "    model: psychologist-model\n",
        "    model: psychologist-model\n    api_key_env: SOME_UNSET_VAR\n",
    )
    assert "SOME_UNSET_VAR" in text
    path = tmp_path / "profiles.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["psychologist", "worker"])
def test_a_profile_whose_key_variable_is_unset_refuses_to_start_and_dotenv_counts(
    redis_url: str, tmp_path: Path, command: str
) -> None:
    env = {
        "REDIS_URL": redis_url,
        "LLM_BASE_URL": "http://127.0.0.1:9",
        "LLM_API_KEY": "sk-test",
        "LLM_PROFILES_PATH": str(_profiles_with_key_env(tmp_path)),
        # a tripwire just after the check: the process never gets to run
        "PSYCHOLOGIST_RULES_PATH": str(tmp_path / "no-rules.md"),
    }
    code, _out, err = _process(tmp_path, command, **env)
    assert code == 2
    assert_logs_then_one_line(err, "SOME_UNSET_VAR")

    (tmp_path / ".env").write_text("SOME_UNSET_VAR=sk-from-dotenv\n", encoding="utf-8")
    code, _out, err = _process(tmp_path, command, **env)
    assert code == 2  # the tripwire, past the key check
    assert_logs_then_one_line(err, "PSYCHOLOGIST_RULES_PATH")
    assert "SOME_UNSET_VAR" not in err


# ---------------------------------------------------------------- quiet unless -v


def test_commands_print_no_log_lines_unless_verbose(tmp_path: Path) -> None:
    csv = tmp_path / "gastos.csv"
    csv.write_text(GOOD_CSV, encoding="utf-8")
    # no REDIS_URL: the embedded Redis is started (and says so in the log)
    code, out, err = _process(tmp_path, "ledger", "import", str(csv), "--household", "casa")
    assert code == 0
    assert "2 imported" in out
    assert err == ""
    code, out, err = _process(tmp_path, "-v", "ledger", "import", str(csv), "--household", "casa")
    assert code == 0
    assert "2 already there" in out
    assert "redis.embedded" in err  # the log lines, when asked for
