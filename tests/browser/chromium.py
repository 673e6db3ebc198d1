"""Where the browser tests find a Chromium (Debian's, driven by Playwright from PyPI:
Playwright's own browser download is not used), and why they skip when there is none."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

__all__ = ["ARGS", "CHROMIUM", "SKIP_REASON"]

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _find() -> str | None:
    given = os.environ.get("MEL_CHROMIUM")
    if given:
        return given if Path(given).exists() else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


CHROMIUM = _find()

SKIP_REASON: str | None = None
if importlib.util.find_spec("playwright") is None:
    SKIP_REASON = "browser tests need Playwright: make test installs it (pip install -e '.[dev]')"
elif CHROMIUM is None:
    SKIP_REASON = (
        "browser tests need a Chromium: `apt-get install chromium` (or MEL_CHROMIUM=/path); "
        ".ci/run installs it"
    )
