"""The same run diagnosed twice gives the same bytes (t3 report, F3): ``diagnosis.md`` and ``diagnosis.json`` (and
the figures and the folder's record) hold nothing that changes from one diagnosis to the next.  Each model's
wall-clock seconds and peak memory and the counterfactual runs read from the cache go to ``timing.json`` beside
them, the one file of the report whose bytes may change (as ``timing.json`` in a run folder, ``cost.csv`` in a
leaderboard).  Before, ``diagnosis.md`` said "Diagnosis took 0.013 s" and "1 simulated, 0 from cache", and
``diagnosis.json`` held each model's ``seconds`` and the truth's ``simulated_reruns``."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ideal_replay import ideal_replay, ideal_rerun
from scenario_files import imbalance_toml, scenario_toml

from waitlab.cli import main
from waitlab.experiments.diagnosis.diagnose import diagnose
from waitlab.experiments.report.diagnosis_report import write_report
from waitlab.experiments.scenario import from_mapping
from waitlab.models.analysis.waitstates import wait_states
from waitlab.models.ops import OpBuilder

SAME = ("diagnosis.md", "diagnosis.json", "blame_by_region.png", "culprit_timeline.png", ".waitlab")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.simgrid
def test_two_diagnoses_of_one_run_write_the_same_bytes(tmp_path: Path) -> None:
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed (run: make setup)")
    (tmp_path / "s.toml").write_text(scenario_toml("r25", 4, 'kind = "stencil"\nsteps = 2', seed=1,
                                                   more=imbalance_toml("1", 0.05)))
    assert main(["run", str(tmp_path / "s.toml"), "-o", str(tmp_path / "run"), "-q"]) == 0
    folder = tmp_path / "run" / "diagnosis"
    # an empty counterfactual cache: the first diagnosis simulates its re-runs, the second reads them back
    again = ["diagnose", str(tmp_path / "run"), "--workers", "1", "--candidates", "2", "-q",
             "--cache", str(tmp_path / "cache")]
    assert main(again) == 0
    first = _files(folder)
    assert main(again) == 0
    second = _files(folder)
    assert set(first) == set(second) == {*SAME, "timing.json"}
    for name in SAME:
        assert first[name] == second[name], f"{name} differs between two diagnoses of the same run"
    # what changed is in timing.json: the re-runs were simulated, then read from the cache
    t1, t2 = json.loads(first["timing.json"]), json.loads(second["timing.json"])
    runs = t1["counterfactual_runs"]["total"]
    assert runs > 0
    assert t1["counterfactual_runs"] == {"total": runs, "simulated": runs, "from_cache": 0}
    assert t2["counterfactual_runs"] == {"total": runs, "simulated": 0, "from_cache": runs}
    assert set(t1["models"]) == {"cwpdm", "hcwpdm", "hcwpdm_each"}
    assert all(m["seconds"] > 0 for m in t1["models"].values())
    md, data = first["diagnosis.md"].decode(), json.loads(first["diagnosis.json"])
    assert "Diagnosis took" not in md and "from cache" not in md and "`timing.json`" in md
    assert f"of wait ({runs} counterfactual {'run' if runs == 1 else 'runs'})." in md
    assert "simulated_reruns" not in data["truth"]
    assert all("seconds" not in m and "peak_bytes" not in m for m in data["models"].values())
    assert json.loads(first[".waitlab"])["files"] == sorted([*SAME[:-1], "timing.json"])  # the record lists it


def test_measured_peak_memory_goes_to_timing_json_only(tmp_path: Path) -> None:
    """Peak memory (``memory=True``) varies from one diagnosis to the next too (``tracemalloc``: 73,170 to 73,744
    bytes for the tutorial's H-CWP-DM in three processes); no SimGrid needed (ideal replay)."""
    scenario = from_mapping({"scenario": {"name": "hand", "ranks": 4, "seed": 0}, "platform": {"name": "dawning_5000a"},
                             "application": {"kind": "stencil", "steps": 1}}, "hand")
    b = OpBuilder(4)
    b.add("enter", range(4), region="A")
    b.add("compute", range(4), value=[1.0, 1.0, 1.4, 1.0], excess=[0, 0, 0.4, 0], region="A")  # rank 2 is late
    b.add("leave", range(4), region="A")
    b.add("barrier", range(4))
    ops = b.build()
    ev = ideal_replay(ops)
    folders = []
    with ThreadPoolExecutor(2) as ex:
        for name in ("one", "two"):
            diag = diagnose(ev, wait_states(ev), scenario=scenario, ops=ops, executor=ex,
                            cache_dir=tmp_path / "cache", rerun=ideal_rerun, memory=True)
            write_report(diag, tmp_path / name, png=False)
            folders.append(tmp_path / name)
    one, two = (_files(f) for f in folders)
    assert one["diagnosis.md"] == two["diagnosis.md"] and one["diagnosis.json"] == two["diagnosis.json"]
    timing = json.loads(one["timing.json"])
    assert all(m["peak_bytes"] > 0 for m in timing["models"].values())
    md = one["diagnosis.md"].decode()
    assert "MiB" not in md and "peak memory not measured" not in md
    assert "Each model's wall-clock seconds and peak memory and how many counterfactual runs" in md
