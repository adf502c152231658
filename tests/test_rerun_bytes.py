"""Byte-identical reruns: two runs of an example differ only in ``timing.json`` (wall-clock seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from waitlab.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.simgrid
@pytest.mark.parametrize(("example", "png"), [("stencil_late_rank.toml", True), ("perturbed_stencil.toml", False)])
def test_two_runs_of_an_example_are_byte_identical_apart_from_timing(tmp_path: Path, example: str, png: bool):
    runs = []
    for n in (1, 2):
        out = tmp_path / f"run{n}"
        assert main(["run", str(EXAMPLES / example), "-o", str(out), *(["--png"] if png else [])]) == 0
        runs.append(files(out))
    first, second = runs
    assert sorted(first) == sorted(second)
    timing = {name for name in first if name.endswith("timing.json")}
    assert timing == {"timing.json"}  # wall-clock time lives there and nowhere else
    differ = [name for name in first if first[name] != second[name] and name not in timing]
    assert differ == [], f"files that differ between two runs: {differ}"
    assert len(first) - len(timing) >= (12 if png else 20)
