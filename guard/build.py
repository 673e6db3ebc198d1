"""``python -m guard.build``: compile the guard with mypyc into ``build/guard-native/``
(``guard.native`` says when that build is used). ``make`` runs it when a module changed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from guard.native import DIRECTORY, MANIFEST, MODULES, SOURCES, digest, suffix

__all__ = ["build"]


def build(directory: Path = DIRECTORY) -> None:
    """Compile ``MODULES`` with mypyc into ``directory`` (replacing what is there), from a
    copy of the sources. A compile that fails leaves the last build as it was, and the
    manifest is written last, so a build cut short is never used."""
    digests = {module: digest(module) for module in MODULES}
    with tempfile.TemporaryDirectory(prefix="guard-native-") as scratch:
        work = Path(scratch)
        shutil.copytree(SOURCES, work / "guard", ignore=shutil.ignore_patterns("__pycache__"))
        files = [f"guard/{module}.py" for module in MODULES]
        done = subprocess.run(  # noqa: S603
            [sys.executable, "-m", "mypyc", *files], cwd=work, capture_output=True, text=True
        )
        if done.returncode != 0:  # (its output only then: a page of gcc lines otherwise)
            sys.stderr.write(done.stdout + done.stderr)
            raise RuntimeError(f"mypyc failed with exit status {done.returncode}")
        runtimes = list(work.glob(f"*__mypyc{suffix()}"))
        if len(runtimes) != 1:
            raise RuntimeError(f"mypyc left {len(runtimes)} shared runtimes in {work}")
        shutil.rmtree(directory, ignore_errors=True)
        (directory / "guard").mkdir(parents=True)
        shutil.copy2(runtimes[0], directory)
        for module in MODULES:
            shutil.copy2(work / "guard" / f"{module}{suffix()}", directory / "guard")
    manifest = {
        "suffix": suffix(),
        "runtime": runtimes[0].name.removesuffix(suffix()),
        "sources": digests,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    build()
    print(f"guard build: compiled {len(MODULES)} modules into {DIRECTORY}")
