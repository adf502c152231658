"""Scenarios of real programs for the tests (issue 5 and after): the programs' folder, a program or trace scenario
written to a real file, and the line of a source text (for call-site region names)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from waitlab.experiments.scenario import Scenario, from_mapping

PROGRAMS = Path(__file__).resolve().parent / "programs"
NATIVE = Path(__file__).resolve().parents[1] / "simulator" / "native"
HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None
needs_smpi = pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI (smpirun, smpicc) is not installed")


def program_scenario(tmp: Path, source: str | list[str], ranks: int = 2, platform: str = "dawning_5000a",
                     **app: Any) -> Scenario:
    """A program scenario, written to ``tmp`` so relative paths and error messages name a real file."""
    sources = [source] if isinstance(source, str) else source
    data: dict[str, Any] = {
        "scenario": {"name": Path(sources[0]).stem, "ranks": ranks},
        "platform": {"name": platform},
        "application": {"kind": "program", "sources": [str(PROGRAMS / s) if not Path(s).is_absolute() else s
                                                        for s in sources], **app},
    }
    sim = app.pop("simulation", None)
    if sim:
        data["simulation"] = sim
        data["application"].pop("simulation", None)
    return from_mapping(data, str(tmp / "scenario.toml"))


def trace_scenario(index: Path, ranks: int, platform: str = "dawning_5000a") -> Scenario:
    return from_mapping({"scenario": {"name": "replay", "ranks": ranks}, "platform": {"name": platform},
                         "application": {"kind": "trace", "trace": str(index)}}, "<test>")


def source_line(path: Path, needle: str, nth: int = 0) -> int:
    lines = [i + 1 for i, ln in enumerate(path.read_text().splitlines()) if needle in ln]
    return lines[nth]
