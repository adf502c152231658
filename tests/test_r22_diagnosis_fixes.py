"""Round 22: a Python function model keeps ``model_timeout`` (it runs in a forked child) and its failure is said on
stderr; plug-in messages name what is missing (a function, a file) and what a model prints at import is shown once;
the report says when peak memory was not measured, lists only candidates with a positive true cost, words the blame
floor for any trace and names point-to-point waits.  Hand-made runs: a barrier (rank 0 computes 3 s, ranks 1 and 2
1 s: they wait 2 s each, 4 s in all) and a late-sender chain (rank 0 sends at 3 s, rank 1 receives from 1 s and
forwards at 3 s to rank 2, which receives from 1 s: two MPI_Recv waits of 2 s)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scenario_files import TINY

import waitlab
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.diagnosis import registry
from waitlab.experiments.diagnosis.diagnose import Diagnosis, diagnose, run_models
from waitlab.experiments.diagnosis.groundtruth import CauseSet, GroundTruth
from waitlab.experiments.report.diagnosis_report import to_markdown
from waitlab.models.analysis.protocol import RunData
from waitlab.models.analysis.waitstates import make_events, wait_states


def _barrier() -> pd.DataFrame:
    return make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "barrier"] * 3,
                       enter=[0, 3, 0, 1, 0, 1], exit=[3, 3, 1, 3, 1, 3], match=[-1, 0] * 3)


def _chain() -> pd.DataFrame:
    return make_events(rank=[0, 0, 1, 1, 1, 2, 2], op=["compute", "send", "compute", "recv", "send", "compute", "recv"],
                       enter=[0, 3, 0, 1, 3, 0, 1], exit=[3, 3, 1, 3, 3, 1, 3], match=[-1, 0, -1, 0, 1, -1, 1],
                       done=[-1, 1, -1, 3, 4, -1, 6], peer=[-1, 1, -1, 0, 2, -1, 1])


def _loops(run: RunData, **options: object) -> pd.DataFrame:
    end = time.monotonic() + 30  # "forever", for this test: in waitlab's process it would return after 30 s
    while time.monotonic() < end:
        pass
    return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [0.0]})


def _broken(run: RunData, **options: object) -> pd.DataFrame:
    raise RuntimeError("not written yet")


def test_a_function_model_is_stopped_after_model_timeout_and_the_others_kept() -> None:
    ev = _barrier()
    t0 = time.monotonic()
    diag = diagnose(ev, wait_states(ev), models=[_loops, "profile"], model_timeout=1, truth=False)
    assert time.monotonic() - t0 < 20
    assert [m.key for m in diag.models] == ["profile"]
    (msg,) = diag.errors.values()
    assert "did not return within 1 s" in msg and "_loops" in msg


def test_a_function_model_that_raises_is_said_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    ev = _barrier()
    diag = diagnose(ev, wait_states(ev), models=[_broken, "profile"], truth=False)
    lines = capsys.readouterr().err.splitlines()
    said = [ln for ln in lines if "RuntimeError: not written yet" in ln]
    assert len(said) == 1 and said[0].startswith(f"waitlab: error: model '{__name__}:_broken' raised")
    assert diag.errors and "Diagnosis.errors" in said[0]


def test_function_models_peak_memory_is_measured_in_their_child() -> None:
    def allocates(run: RunData, **options: object) -> pd.DataFrame:
        block = np.ones(4 << 20)  # 32 MiB, alive while the model runs
        return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [run.total_wait * block[0]]})

    ev = _barrier()
    (r,) = run_models(ev, wait_states(ev), models=[allocates], memory=True)
    assert r.peak_bytes >= 32 << 20


MODELS = """\
import os
from os.path import join

import pandas as pd

print("r22 import noise")


def good(run, **options):
    return pd.DataFrame({"rank": [0], "region": ["(top level)"], "seconds": [run.total_wait]})


def other(run, **options):
    return good(run)


def _helper():
    return join("a", "b")


def broken(run, **options):
    raise RuntimeError("not written yet")
"""


@pytest.fixture
def models_file(tmp_path: Path) -> Path:
    path = tmp_path / "r22mods.py"
    path.write_text(MODELS)
    return path


def test_a_name_the_file_does_not_define_lists_the_functions_it_does(models_file: Path) -> None:
    with pytest.raises(InputError) as exc:
        registry.resolve(f"{models_file}:nosuch")
    text = str(exc.value)
    assert "has no function 'nosuch'" in text
    assert "(fix: name one of the functions it defines: good, other, broken)" in text  # not join, not _helper
    assert "import MODULE" not in text


def test_a_module_that_is_nowhere_says_which_file_was_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as exc:
        registry.resolve("r22_nosuchfile:m")
    text = str(exc.value)
    assert f"no file {tmp_path / 'r22_nosuchfile.py'}" in text and "importlib" not in text
    assert "fix: fix the model's file" not in text


def test_a_missing_dependency_names_the_module_to_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "r22dep.py").write_text("import r22_not_installed_anywhere\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as exc:
        registry.resolve("r22dep:m")
    text = str(exc.value)
    assert "No module named 'r22_not_installed_anywhere'" in text and "r22dep.py, line 1" in text
    assert "python -c 'import r22dep' shows the same error" in text


def test_what_a_model_prints_at_import_is_shown_once(models_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = _barrier()
    diagnose(ev, wait_states(ev), models=[f"{models_file}:good"], truth=False)
    assert capsys.readouterr().err.count("r22 import noise") == 1


def test_the_command_line_says_a_failing_model_once(models_file: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.toml").write_text(TINY)
    waitlab.run(tmp_path / "s.toml", tmp_path / "run")
    capsys.readouterr()
    code = main(["diagnose", str(tmp_path / "run"), "--no-truth", "--no-png", "-q", "-o", str(tmp_path / "d"),
                 "--model", f"{models_file}:broken"])
    assert code == 1
    assert capsys.readouterr().err.count("RuntimeError: not written yet") == 1


def test_the_report_says_peak_memory_was_not_measured_and_how_to_measure_it() -> None:
    ev = _barrier()
    md = to_markdown(diagnose(ev, wait_states(ev), models=["profile"], truth=False))
    assert "peak memory not measured: waitlab.diagnose(RUN, memory=True) measures it" in md
    assert "0.0 MiB" not in md


def test_the_blame_floor_is_not_said_to_be_simgrids() -> None:
    ev = _barrier()
    md = to_markdown(diagnose(ev, wait_states(ev), truth=False))
    assert "(Blame below 1e-09 s is rounding and is not listed.)" in md and "SimGrid" not in md


def test_point_to_point_waits_are_named_in_the_header_and_in_h_cwp_dms_measure() -> None:
    ev = _chain()
    md = to_markdown(diagnose(ev, wait_states(ev), truth=False))
    assert "largest wait per collective instance summed: 0 s; point-to-point wait (every one): 4 s." in md
    h = md.split("### H-CWP-DM (earliest)", 1)[1]
    assert "Explains 4 s of wait (every wait in MPI_Recv)" in h and "largest wait of each instance" not in h


def test_only_candidates_with_a_positive_true_cost_are_called_costliest() -> None:
    metrics = {"makespan": 3.0, "collective_max_wait": 1.0, "considered_wait": 1.0, "wait_by_op": {"barrier": 2.0},
               "max_wait_by_op": {"barrier": 1.0}}
    baseline = {**metrics, "total_wait": 2.0}
    ledger = pd.DataFrame({"rank": [0, 1], "region": ["A", "B"], "step": [0, 0], "seconds": [1.0, 1.0],
                           "kind": ["compute", "compute"]})
    both, a, b = np.array([True, True]), np.array([True, False]), np.array([False, True])
    sets = (CauseSet("all", "all", None, both), CauseSet("rr:0:A", "rank_region", (0, "A"), a),
            CauseSet("rr:1:B", "rank_region", (1, "B"), b))
    # removing (0, A) leaves 1.5 s of wait (costs 0.5 s); removing (1, B) leaves 2.31 s (costs -0.31 s)
    reruns = {"all": {**metrics, "total_wait": 0.5}, "rr:0:A": {**metrics, "total_wait": 1.5},
              "rr:1:B": {**metrics, "total_wait": 2.31}}
    gt = GroundTruth(baseline, ledger, sets, reruns, simulated=3, distinct=3)
    diag = Diagnosis(scenario=None, metadata={"scenario": "x"}, baseline=baseline, models=[], truth=gt)
    md = to_markdown(diag)
    line = next(ln for ln in md.splitlines() if ln.startswith("Costliest candidate"))
    assert line == "Costliest candidate (rank, region): (0, `A`) 0.5 s"
    assert "1 of the 2 candidates have a negative true cost and are not listed" in md
