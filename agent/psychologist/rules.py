"""The business rules the psychologist judges a session against (a Markdown file).

The default for mel ships in the package (``rules.md``); ``PSYCHOLOGIST_RULES_PATH``
points at another file. The text goes into the prompt as-is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Final

from agent.psychologist.errors import RulesError

__all__ = ["DEFAULT_RULES_NAME", "RULES_PATH_ENV", "load_rules", "load_rules_from_env"]

RULES_PATH_ENV: Final = "PSYCHOLOGIST_RULES_PATH"
DEFAULT_RULES_NAME: Final = "rules.md"


def load_rules(path: Path | str | None = None) -> str:
    """The rules text: the file at ``path``, or with ``None`` the packaged default.

    An unreadable, missing or empty file is a :class:`RulesError` naming the path.
    """
    if path is None:
        text = resources.files("agent.psychologist").joinpath(DEFAULT_RULES_NAME).read_text("utf-8")
        return text.strip()
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RulesError(path, f"cannot read the psychologist rules file: {reason}") from None
    if not text.strip():
        raise RulesError(path, "the psychologist rules file is empty")
    return text.strip()


def load_rules_from_env(environ: Mapping[str, str] = os.environ) -> str:
    """``load_rules($PSYCHOLOGIST_RULES_PATH)``, or the packaged default when unset/empty."""
    path = environ.get(RULES_PATH_ENV, "").strip()
    return load_rules(Path(path) if path else None)
