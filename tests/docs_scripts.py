"""The scripts of ``docs/`` (``lab_numbers.py``, ``leaderboard_tables.py``), loaded as modules for their tests: they
are run as scripts by the docs' build and are not part of the ``waitlab`` package."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

DOCS = Path(__file__).resolve().parent.parent / "docs"


def docs_script(name: str) -> ModuleType:
    """``docs/NAME.py`` as a fresh module named ``name``."""
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
