"""Round 21, perturbation: end-to-end checks that run SMPI (noise hits, check-c on RUN/unperturbed, the docs' table)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "perturbation.md"

WAVEFRONT = """[scenario]
name = "r21"
ranks = 2
seed = 1

[platform]
name = "okita_myrinet"

[application]
kind = "wavefront"
steps = 1
grid = [2, 1]
blocks = 2
message_bytes = 1024
compute_seconds = 0.1
"""


def _waitlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "waitlab", *args], capture_output=True, text=True, timeout=900)


@pytest.mark.simgrid
def test_phase_of_whole_periods_gives_the_hits_of_phase_zero(tmp_path: Path) -> None:
    """10 Hz x 1 ms detours: phase 5.0 s is 50 periods, the same detours as phase 0.0, so the same hits (5 of 1 ms
    each, 0.005 s), not 9 with four 3e-16 s slivers."""
    hits = {}
    for phase in ("0.0", "5.0"):
        (tmp_path / f"p{phase}.toml").write_text(WAVEFRONT + "[noise]\nmodel = \"periodic\"\nfrequency = 10\n"
                                                 f"duration = 0.001\nphase = {phase}\n")
        res = _waitlab("run", str(tmp_path / f"p{phase}.toml"), "-o", str(tmp_path / f"o{phase}"))
        assert res.returncode == 0, res.stderr
        noise = json.loads((tmp_path / f"o{phase}" / "perturbation.json").read_text())["noise"]
        hits[phase] = (noise["hits"], round(noise["delayed_work_seconds"], 9))
    assert hits["5.0"] == hits["0.0"] == (5, 0.005)


@pytest.mark.simgrid
def test_check_c_on_the_unperturbed_run(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(WAVEFRONT + "[instrumentation]\nevents = \"mpi\"\nfixed_cost = 1e-3\n")
    run = tmp_path / "run"
    assert _waitlab("run", str(tmp_path / "s.toml"), "-o", str(run)).returncode == 0
    res = _waitlab("check-c", str(run / "unperturbed"))
    # no tracer rows in the unperturbed run: C holds; it was not refused for lacking scenario.toml
    assert res.returncode == 0, res.stderr
    assert "condition C holds" in res.stdout and "added after the run" not in res.stderr
    with open(run / "unperturbed" / "events.parquet", "ab") as f:
        f.write(b"x")
    res = _waitlab("check-c", str(run / "unperturbed"))
    assert res.returncode == 2 and "events.parquet: (file): was changed after the run" in res.stderr


def _doc_rows(ranks: str) -> list[str]:
    return [line for line in DOC.read_text().splitlines() if line.startswith(f"| {ranks} | ")]


@pytest.mark.simgrid
@pytest.mark.slow
@pytest.mark.skipif(not DOC.exists(), reason="docs/perturbation.md not present")
def test_docs_policy_table_is_the_commands(tmp_path: Path) -> None:
    """The 256-rank rows of the spilling-policy table in docs/perturbation.md are the rows `waitlab reproduce
    spill-policies --ranks 256 --no-png` prints, every decimal (about 50 s of SMPI)."""
    res = _waitlab("reproduce", "spill-policies", "--ranks", "256", "--no-png", "-o", str(tmp_path / "p"))
    assert res.returncode == 0, res.stderr
    made = [line for line in (tmp_path / "p" / "policies.md").read_text().splitlines() if line.startswith("| 256 | ")]
    assert len(made) == 6
    assert _doc_rows("256") == made
