"""``waitlab check-c RUN`` books the OS-noise detours its run recorded as noise, as the run's own check did.

The run writes where noise landed (``noise_detours.parquet``: the event's rank and seq, the seconds), summed in the
folder's integrity record; without it a detour inside a tracer row would count as tracer overhead and the folder's
check would contradict ``perturbation.txt``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_r26_g_perturbation import S12

import waitlab
from waitlab.errors import InputError

pytestmark = pytest.mark.simgrid


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """S12 with one 0.2 s detour at 1.5 s: it lands in the step-0 record (1.0 .. 2.2 s) of ranks 0 and 1."""
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed (run: make setup)")
    folder = tmp_path_factory.mktemp("detours")
    (folder / "n.txt").write_text("1.5 0.2\n")
    (folder / "s.toml").write_text(S12)
    waitlab.run(folder / "s.toml", folder / "out")
    return folder / "out"


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def test_the_folder_check_is_the_run_s_own(run: Path) -> None:
    # every rank writes 2 records of 1 s: C holds with 8 x 1 s of tracer overhead, the 2 x 0.2 s detours are noise
    detours = pq.read_table(run / "noise_detours.parquet").to_pylist()
    assert [(d["rank"], d["seq"]) for d in detours] == [(0, 4), (1, 4)]
    assert [d["seconds"] for d in detours] == pytest.approx([0.2, 0.2], abs=1e-9)
    events = pq.read_table(run / "events.parquet", columns=["rank", "seq", "op"]).to_pylist()
    assert {(e["rank"], e["seq"]): e["op"] for e in events}[(0, 4)] == "overhead"
    rep = waitlab.check_c(run)
    own = json.loads((run / "perturbation.json").read_text())["condition_c"]  # the run's own check
    assert rep.holds and rep.total_overhead == pytest.approx(8.0, abs=1e-6)
    assert rep.noise_booked == pytest.approx(0.4, abs=1e-9)
    assert (own["holds"], own["total_overhead"], own["max_difference"]) == \
        (rep.holds, rep.total_overhead, rep.max_difference)
    out = subprocess.run([sys.executable, "-m", "waitlab", "check-c", str(run)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "holds" in out.stdout, out.stdout + out.stderr
    assert "booked as noise, not overhead: 0.4 s" in out.stdout, out.stdout
    assert not (run / "unperturbed" / "noise_detours.parquet").exists()  # no noise there
    assert waitlab.check_c(run / "unperturbed").holds


def test_without_the_detours_a_detour_counts_as_overhead(run: Path) -> None:
    # the event table alone: ranks 0 and 1's first records last 1.2 s, ranks 2 and 3's 1 s -> 0.2 s apart
    rep = waitlab.check_c(run / "events.parquet")
    assert not rep.holds and rep.max_difference == pytest.approx(0.2, abs=1e-6) and rep.noise_booked == 0.0


def test_the_detours_file_is_in_the_integrity_record(run: Path, tmp_path: Path) -> None:
    deleted = _copy(run, tmp_path / "deleted")
    (deleted / "noise_detours.parquet").unlink()
    with pytest.raises(InputError, match="was deleted after the run"):
        waitlab.check_c(deleted)
    edited = _copy(run, tmp_path / "edited")
    pq.write_table(pa.table({"rank": np.array([0], np.int32), "seq": np.array([4], np.int32),
                             "seconds": np.array([0.1])}), edited / "noise_detours.parquet")
    with pytest.raises(InputError, match="was changed after the run"):
        waitlab.check_c(edited)
    assert not waitlab.check_c(edited, trust_edited=True).holds  # read anyway: 0.1 s of the detour counts


def test_a_folder_written_without_the_detours_is_refused_with_a_way_out(run: Path, tmp_path: Path) -> None:
    # what a folder written before waitlab recorded where noise landed holds: no file, but noise delayed work
    old = _copy(run, tmp_path / "old")
    (old / "noise_detours.parquet").unlink()
    with pytest.raises(InputError) as err:
        waitlab.check_c(old, trust_edited=True)
    assert err.value.field == "(file)" and "noise delayed 0.4 s" in err.value.problem
    assert "check events.parquet itself" in err.value.fix


@pytest.mark.parametrize(("columns", "field"), [
    ({"rank": [0], "seq": [99], "seconds": [0.2]}, "columns rank, seq"),  # no such event
    ({"rank": [0, 0], "seq": [4, 4], "seconds": [0.1, 0.1]}, "columns rank, seq"),  # an event twice
    ({"rank": [0], "seq": [4], "seconds": [-0.2]}, "column seconds"),
    ({"rank": [0], "seq": [4], "seconds": [float("nan")]}, "column seconds"),
    ({"rank": [0], "seq": [4], "seconds": [1e300]}, "column seconds"),  # longer than the event
    ({"rank": [0], "seq": [4]}, "column seconds"),  # missing
    ({"rank": [0], "seq": [4], "seconds": ["0.2"]}, "column seconds"),  # text
    ({"rank": [0.0], "seq": [4], "seconds": [0.2]}, "column rank"),  # not an integer
    ({"rank": [None], "seq": [4], "seconds": [0.2]}, "column rank"),  # empty
])
def test_a_damaged_detours_file_is_named(run: Path, tmp_path: Path, columns: dict[str, list[Any]],
                                         field: str) -> None:
    copy = _copy(run, tmp_path / "copy")
    pq.write_table(pa.table({k: pa.array(v, pa.int32()) if k != "seconds" and v != [0.0] and v != [None]
                             else pa.array(v) for k, v in columns.items()}), copy / "noise_detours.parquet")
    with pytest.raises(InputError) as err:
        waitlab.check_c(copy, trust_edited=True)
    assert err.value.field == field and "noise_detours.parquet" in err.value.file, err.value
    assert "re-run `waitlab run`" in err.value.fix


def test_a_folder_in_place_of_the_file_is_named(run: Path, tmp_path: Path) -> None:
    copy = _copy(run, tmp_path / "copy")
    (copy / "noise_detours.parquet").unlink()
    (copy / "noise_detours.parquet").mkdir()
    with pytest.raises(InputError) as err:
        waitlab.check_c(copy, trust_edited=True)
    assert err.value.field == "(file)" and "is not a file" in err.value.problem
