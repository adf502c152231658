"""Tester t4's finding 5: the README's account of ``waitlab analyze`` in API calls is exact.

The calls the README names are run as written (its code spans) and give the same files, byte for byte, as the
command (the wall-clock ``timing.json`` files apart); the README said ``run`` then ``diagnose(DIR, truth=False)``,
which wrote no ``diagnosis/``, ran only the default models and left report.html without the diagnosis.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import waitlab
from waitlab.cli import main

ROOT = Path(__file__).resolve().parent.parent
CASITA = ROOT / "tests" / "data" / "casita_ls_barr" / "traces.otf2"
pytestmark = pytest.mark.skipif(shutil.which("otf2-print") is None, reason="otf2-tools not installed")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*"))
            if f.is_file() and f.name != "timing.json"}


def test_the_readme_calls_are_what_analyze_does(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("`waitlab analyze TRACE -o DIR` is")
    calls = re.findall(r"`([^`]+)`", text[start:text.index("with `DIR` a `pathlib.Path`", start)])[1:]
    assert len(calls) == 4, calls
    scope = {"waitlab": waitlab, "TRACE": str(CASITA), "DIR": tmp_path / "api"}
    for call in calls:
        exec(call, scope)
    assert main(["analyze", str(CASITA), "-o", str(tmp_path / "cli"), "--quiet"]) == 0
    api, cli = _files(tmp_path / "api"), _files(tmp_path / "cli")
    assert "diagnosis/diagnosis.md" in cli and "timeline.png" in cli
    assert sorted(api) == sorted(cli)
    assert [name for name in cli if api[name] != cli[name]] == []
