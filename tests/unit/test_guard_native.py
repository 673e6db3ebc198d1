"""The compiled guard (``guard.native``): used only when built from the sources as they are,
and the same verdicts as the pure guard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import guard
from guard import _signals, native
from guard.eval import load_corpus, predict
from tests.unit.test_guard_corpus import CORPUS, HELDOUT


@pytest.fixture(autouse=True)
def _not_forced_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests set ``MEL_GUARD_PURE`` themselves (make test's pure pass sets it)."""
    monkeypatch.delenv(native.PURE_ENV, raising=False)


def _manifest(directory: Path, **changes: object) -> Path:
    """A build directory whose manifest matches the sources, but for ``changes`` (its runtime
    is a module already loaded, so nothing is loaded from it)."""
    manifest: dict[str, object] = {
        "suffix": native.suffix(),
        "runtime": "json",
        "sources": {module: native.digest(module) for module in native.MODULES},
    }
    manifest.update(changes)
    directory.mkdir(exist_ok=True)
    (directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return directory


#: whether this process was asked for the pure guard (when ``guard`` was imported, as now)
_FORCED_PURE = bool(os.environ.get(native.PURE_ENV))


def test_the_compiled_guard_is_used_exactly_when_its_build_matches_the_sources() -> None:
    matches = not _FORCED_PURE and native.use_compiled([], native.DIRECTORY)
    assert matches == guard.COMPILED
    compiled_file = _signals.__file__ or ""
    assert compiled_file.endswith(native.suffix()) == guard.COMPILED
    if os.environ.get("CI"):  # make test builds it: CI runs the compiled guard
        assert guard.COMPILED


@pytest.mark.parametrize(
    "changes",
    [
        {"sources": dict.fromkeys(native.MODULES, "0" * 64)},  # an edited module
        {"sources": {"_guard": native.digest("_guard")}},  # a module it lacks
        {"suffix": ".cpython-399-other.so"},  # another Python
        {"runtime": "nothing__mypyc"},  # its shared runtime is not there
    ],
)
def test_a_build_that_does_not_match_is_not_used(
    tmp_path: Path, changes: dict[str, object]
) -> None:
    path = ["/the/sources"]
    assert native.use_compiled(path, _manifest(tmp_path / "build", **changes)) is False
    assert path == ["/the/sources"]


def test_a_build_that_matches_goes_ahead_of_the_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = _manifest(tmp_path / "build")
    path = ["/the/sources"]
    assert native.use_compiled(path, build) is True
    assert path == [str(build / "guard"), "/the/sources"]

    monkeypatch.setenv(native.PURE_ENV, "1")  # unless the pure guard is asked for
    assert native.use_compiled(path := ["/the/sources"], build) is False
    assert path == ["/the/sources"]


def test_no_build_or_a_broken_manifest_means_the_pure_guard(tmp_path: Path) -> None:
    path: list[str] = []
    assert native.use_compiled(path, tmp_path / "none") is False
    (tmp_path / "manifest.json").write_text("{not json", encoding="utf-8")
    assert native.use_compiled(path, tmp_path) is False
    (tmp_path / "manifest.json").write_text("[]", encoding="utf-8")
    assert native.use_compiled(path, tmp_path) is False
    assert path == []


@pytest.mark.skipif(not guard.COMPILED, reason="the guard runs as pure Python: nothing to compare")
def test_the_compiled_and_the_pure_guard_give_the_same_verdicts() -> None:
    cases = load_corpus(CORPUS) + load_corpus(HELDOUT)
    script = (
        "import json, sys, guard\n"
        "from guard.eval import load_corpus, predict\n"
        "assert not guard.COMPILED\n"
        "cases = load_corpus(sys.argv[1]) + load_corpus(sys.argv[2])\n"
        "print(json.dumps([predict(case) for case in cases]))\n"
    )
    pure = subprocess.run(
        [sys.executable, "-c", script, str(CORPUS), str(HELDOUT)],
        env={**os.environ, native.PURE_ENV: "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(pure.stdout) == [predict(case) for case in cases]
