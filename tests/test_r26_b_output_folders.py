"""Tester t4 of session 26, finding 1: ``diagnose -o``, ``export -o`` and ``sweep -o`` wrote over a user's files
(``mydiag/diagnosis.md``, ``myexp/propagation.graphml``, ``mysweep/sweep.csv``) where ``waitlab run -o`` refuses a
folder holding entries waitlab did not write.  They now go through the same check
(:func:`waitlab.experiments.run_folder.check_output_folder`), while the folders waitlab wrote keep working: a second
diagnosis of a run rewrites its report folder, a second export into an export folder replaces its files, and a
sweep folder (its tables, runs/, lock and pictures) resumes."""

from __future__ import annotations

from pathlib import Path

import pytest
from scenario_files import imbalance_toml, scenario_toml

from waitlab import api
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.run_folder import MARKER
from waitlab.experiments.sweep import MODEL_FAILURES, load_sweep, run_sweep
from waitlab.experiments.sweep_lock import LOCK

pytestmark = pytest.mark.simgrid

#: 4 ranks, 2 steps; rank 1 computes 0.5 s more per step.
LATE = scenario_toml("late4", 4, 'kind = "stencil"\nsteps = 2', seed=3, more=imbalance_toml("1", 0.5))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("r26b")
    (base / "late4.toml").write_text(LATE)
    api.run(base / "late4.toml", base / "late")
    return base / "late"


def _user_folder(parent: Path, **files: str) -> Path:
    folder = parent / "mine"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], folder: Path, what: str, entry: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"waitlab: error: {folder}: ({what}): holds {len(list(folder.iterdir()))} "
                   f"entr{'y' if len(list(folder.iterdir())) == 1 else 'ies'} waitlab did not write (e.g. {entry!r}) "
                   "(fix: choose another -o, or move those files away)"), err


def test_diagnose_refuses_a_users_folder_and_rewrites_its_own(run_dir: Path, tmp_path: Path, capsys) -> None:
    mine = _user_folder(tmp_path, **{"notes.txt": "keep\n", "diagnosis.md": "mine\n"})
    _refused(capsys, ["diagnose", str(run_dir), "-o", str(mine), "--no-truth", "--no-png", "--quiet"], mine,
             "report folder", "diagnosis.md")
    assert (mine / "diagnosis.md").read_text() == "mine\n" and sorted(p.name for p in mine.iterdir()) == \
        ["diagnosis.md", "notes.txt"]
    # a report folder of waitlab's is rewritten by the next diagnosis (docs/outputs.md: same bytes)
    out = tmp_path / "report"
    for _ in range(2):
        assert main(["diagnose", str(run_dir), "-o", str(out), "--no-truth", "--no-png", "--quiet"]) == 0
    assert (out / "diagnosis.json").is_file() and (out / MARKER).is_file()
    first = (out / "diagnosis.md").read_bytes()
    assert main(["diagnose", str(run_dir), "--no-truth", "--no-png", "--quiet"]) == 0  # RUN/diagnosis, twice
    assert main(["diagnose", str(run_dir), "--no-truth", "--no-png", "--quiet"]) == 0
    assert (run_dir / "diagnosis" / "diagnosis.md").read_bytes() == first


def test_diagnose_refuses_another_runs_folder_whose_record_it_would_replace(run_dir: Path, tmp_path: Path,
                                                                           capsys) -> None:
    other = tmp_path / "other"
    api.run(run_dir / "scenario.toml", other)
    record = (other / MARKER).read_bytes()
    assert main(["diagnose", str(run_dir), "-o", str(other), "--no-truth", "--no-png", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"waitlab: error: {other}: (report folder): is a waitlab run folder") and "\n" not in err
    assert (other / MARKER).read_bytes() == record and not (other / "diagnosis.json").exists()
    api.load_run(other)  # still a valid results folder (was: "has no SHA-256 in .waitlab")
    diag = api.diagnose(run_dir, truth=False)
    with pytest.raises(InputError, match=r"\(report folder\): is a waitlab run folder"):
        api.write_report(diag, other, png=False)


def test_export_refuses_a_users_folder_and_replaces_its_own_exports(run_dir: Path, tmp_path: Path, capsys) -> None:
    mine = _user_folder(tmp_path, **{"propagation.graphml": "mine\n"})
    _refused(capsys, ["export", str(run_dir), "--graphml", "-o", str(mine), "--quiet"], mine, "export folder",
             "propagation.graphml")
    assert (mine / "propagation.graphml").read_text() == "mine\n"
    # a folder of its own: the second export replaces the first (its record lists what it wrote)
    out = tmp_path / "exports"
    assert main(["export", str(run_dir), "--graphml", "-o", str(out), "--quiet"]) == 0
    assert main(["export", str(run_dir), "--graphml", "--chrome", "-o", str(out), "--quiet"]) == 0
    assert {"propagation.graphml", "trace.json", MARKER} <= {p.name for p in out.iterdir()}
    # into the results folder itself: beside waitlab's files, a note of the user's there does not stop it
    (run_dir / "notes.txt").write_text("mine\n")
    try:
        assert main(["export", str(run_dir), "--graphml", "--quiet"]) == 0
        assert (run_dir / "propagation.graphml").is_file() and (run_dir / "notes.txt").read_text() == "mine\n"
    finally:
        (run_dir / "notes.txt").unlink()


def test_sweep_refuses_a_users_folder_and_resumes_its_own(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text(scenario_toml("tiny", 4, 'kind = "stencil"\nsteps = 1', seed=3))
    (tmp_path / "sw.toml").write_text('base = "base.toml"\n[grid]\n"scenario.seed" = [1, 2]\n')
    sw = load_sweep(tmp_path / "sw.toml")
    for files, entry in (({"notes.txt": "keep\n"}, "notes.txt"), ({"sweep.csv": "x\n"}, "sweep.csv")):
        mine = tmp_path / "mine"
        mine.mkdir()
        for name, text in files.items():
            (mine / name).write_text(text)
        with pytest.raises(InputError) as info:
            run_sweep(sw, mine)
        assert str(info.value) == (f"{mine}: (sweep folder): holds 1 entry waitlab did not write (e.g. {entry!r}) "
                                   "(fix: choose another -o, or move those files away)")
        assert sorted(p.name for p in mine.iterdir()) == sorted(files)  # nothing written, runs/ included
        assert (mine / entry).read_text() == files[entry]
        for p in mine.iterdir():
            p.unlink()
        mine.rmdir()
    out = tmp_path / "out"
    assert len(run_sweep(sw, out)) == 2
    # what a sweep and `waitlab plot` leave there (docs/sweeps.md draws into the sweep's folder), and a user's notes
    # beside its results, keep it resumable: a sweep writes only its own names
    for name in ("failed.csv", "incomplete.txt", MODEL_FAILURES, LOCK, ".sweep.csv.tmp", "sweep.png",
                 "switch_cost.png", "notes.md"):
        (out / name).write_text("")
    again = run_sweep(sw, out)
    assert again.attrs["counts"] == {"done": 2, "ran": 0, "failed": 0, "skipped": 2}
