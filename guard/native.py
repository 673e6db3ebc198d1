"""The guard compiled with mypyc, used when it was built from the sources as they are.

The guard's modules are plain Python. ``python -m guard.build`` (``make`` runs it) compiles
them with mypyc into ``build/guard-native/``, about half a minute; the compiled guard gives the
same verdicts in about half the time. ``guard/__init__.py`` asks ``use_compiled`` first: it puts
the compiled modules ahead of the sources only when every one was built from the source file
that is there now (a SHA-256 each, in ``manifest.json``) by this Python. Otherwise, and when
``MEL_GUARD_PURE`` is set, the guard runs as the Python it is written in: an edited module is
never shadowed by an old build, and a machine without a C compiler loses only speed.

Nothing here is imported by the compiled code, and nothing the guard needs at run time comes
from outside the standard library: mypyc is needed to build only (a dev dependency).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import sys
from collections.abc import MutableSequence
from pathlib import Path
from typing import Final

__all__ = [
    "DIRECTORY",
    "MANIFEST",
    "MODULES",
    "PURE_ENV",
    "SOURCES",
    "digest",
    "suffix",
    "use_compiled",
]

SOURCES: Final = Path(__file__).resolve().parent
#: Where ``guard.build`` puts the compiled guard (``build/`` of the checkout; git ignores it).
DIRECTORY: Final = SOURCES.parent / "build" / "guard-native"
#: Set (to anything) to run the guard as pure Python even when a build is there.
PURE_ENV: Final = "MEL_GUARD_PURE"
#: The modules compiled: the guard's private ones (``guard/_*.py``), not the package, this
#: module or the tools (build, eval, train).
MODULES: Final = tuple(
    sorted(path.stem for path in SOURCES.glob("_*.py") if path.stem != "__init__")
)
MANIFEST: Final = "manifest.json"


def digest(module: str) -> str:
    """The SHA-256 of a module's source file."""
    return hashlib.sha256((SOURCES / f"{module}.py").read_bytes()).hexdigest()


def suffix() -> str:
    """The file ending of this Python's extension modules (which CPython, which platform)."""
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def use_compiled(path: MutableSequence[str], directory: Path = DIRECTORY) -> bool:
    """Put the compiled guard ahead of the sources on the package's ``path`` (its
    ``__path__``) when ``directory`` holds a build of every module as it is now, for this
    Python; whether it did. Never raises: anything unexpected means the pure guard."""
    if os.environ.get(PURE_ENV):
        return False
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        sources = manifest["sources"]
        if manifest["suffix"] != suffix() or sorted(sources) != list(MODULES):
            return False
        if any(sources[module] != digest(module) for module in MODULES):
            return False
        # the runtime the compiled modules share is a top-level module: loaded by its file,
        # so that nothing but the guard's own path is touched
        runtime = str(manifest["runtime"])
        if runtime not in sys.modules:
            location = str(directory / f"{runtime}{suffix()}")
            loader = importlib.machinery.ExtensionFileLoader(runtime, location)
            spec = importlib.machinery.ModuleSpec(runtime, loader, origin=location)
            module = loader.create_module(spec)
            loader.exec_module(module)
            sys.modules[runtime] = module
    except (OSError, ValueError, KeyError, TypeError, ImportError):
        return False
    path.insert(0, str(directory / "guard"))
    return True
