"""``waitlab check-c RUN`` books the OS-noise detours its run recorded as noise, as the run's own check did.

The run writes where noise landed (``noise_detours.parquet``: event row, seconds); without it a detour inside a
tracer row would count as tracer overhead and the folder's check would contradict ``perturbation.txt``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_r26_g_perturbation import S12

import waitlab
from waitlab.errors import InputError


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """S12 with one 0.2 s detour at 1.5 s: it lands in the step-0 record (1.0 .. 2.2 s) of ranks 0 and 1."""
    folder = tmp_path_factory.mktemp("detours")
    (folder / "n.txt").write_text("1.5 0.2\n")
    (folder / "s.toml").write_text(S12)
    waitlab.run(folder / "s.toml", folder / "out")
    return folder / "out"


@pytest.mark.simgrid
def test_the_folder_check_is_the_run_s_own(run: Path) -> None:
    # every rank writes 2 records of 1 s: C holds with 8 x 1 s of tracer overhead, the 2 x 0.2 s detours are noise
    detours = pq.read_table(run / "noise_detours.parquet")
    assert detours.column_names == ["event", "seconds"]
    assert detours.column("seconds").to_pylist() == pytest.approx([0.2, 0.2], abs=1e-9)
    events = pq.read_table(run / "events.parquet", columns=["rank", "op"]).to_pylist()
    assert [events[i] for i in detours.column("event").to_pylist()] == [{"rank": 0, "op": "overhead"},
                                                                          {"rank": 1, "op": "overhead"}]
    rep = waitlab.check_c(run)
    own = json.loads((run / "perturbation.json").read_text())["condition_c"]  # the run's own check
    assert rep.holds and rep.total_overhead == pytest.approx(8.0, abs=1e-6)
    assert (own["holds"], own["total_overhead"], own["max_difference"]) == \
        (rep.holds, rep.total_overhead, rep.max_difference)
    out = subprocess.run([sys.executable, "-m", "waitlab", "check-c", str(run)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "holds" in out.stdout, out.stdout + out.stderr
    assert not (run / "unperturbed" / "noise_detours.parquet").exists()  # no noise there
    assert waitlab.check_c(run / "unperturbed").holds


@pytest.mark.simgrid
def test_without_the_detours_a_detour_counts_as_overhead(run: Path, tmp_path: Path) -> None:
    # the event table alone: ranks 0 and 1's first records last 1.2 s, ranks 2 and 3's 1 s -> 0.2 s apart
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in run.iterdir():
        if f.is_file() and f.name != "noise_detours.parquet":
            (copy / f.name).write_bytes(f.read_bytes())
    rep = waitlab.check_c(copy, trust_edited=True)
    assert not rep.holds and rep.max_difference == pytest.approx(0.2, abs=1e-6)
    assert not waitlab.check_c(run / "events.parquet").holds  # the file alone, the same


@pytest.mark.simgrid
@pytest.mark.parametrize(("event", "seconds", "column"), [([99], [0.2], "column event"),
                                                           ([0], [-0.2], "column seconds"),
                                                           ([0], [float("nan")], "column seconds")])
def test_a_damaged_detours_file_is_named(run: Path, tmp_path: Path, event: list[int], seconds: list[float],
                                         column: str) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in run.iterdir():
        if f.is_file():
            (copy / f.name).write_bytes(f.read_bytes())
    pq.write_table(pa.table({"event": np.array(event, np.int64), "seconds": np.array(seconds)}),
                   copy / "noise_detours.parquet")
    with pytest.raises(InputError) as err:
        waitlab.check_c(copy, trust_edited=True)
    assert err.value.field == column and "noise_detours.parquet" in err.value.file, err.value
