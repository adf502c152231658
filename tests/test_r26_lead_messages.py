"""Messages of session 26's testers that the lead mended: a missing diagnose path says it does not exist (it said
"is neither a results folder nor a .toml scenario"); a misspelt ``[sweep]`` key gets the key it looks like, as the
scenario and platform files' keys do (``waitlab.errors.unknown_name``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scenario_files import TINY

from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.run_folder import read_record
from waitlab.experiments.sweep import load_sweep


def test_diagnose_of_a_missing_path_says_it_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "results" / "nonexist"
    assert main(["diagnose", str(missing), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == (f"waitlab: error: {missing}: (path): does not exist (fix: check the path: a results folder written "
                   "by `waitlab run`, or a scenario file)\n")
    assert not (tmp_path / "results").exists()


def test_a_misspelt_sweep_key_gets_the_key_it_looks_like(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text(TINY)
    sw = tmp_path / "sw.toml"
    sw.write_text('base = "base.toml"\n[grid]\n"scenario.seed" = [1, 2]\n[sweep]\nworker = 2\n')
    with pytest.raises(InputError) as info:
        load_sweep(sw)
    assert str(info.value) == (f"{sw}: sweep.worker: unknown key 'worker' (did you mean 'workers'?) "
                               "(fix: rename worker to workers)")
    sw.write_text('base = "base.toml"\n[grid]\n"scenario.seed" = [1, 2]\n[sweep]\ncolour = 2\n')
    with pytest.raises(InputError, match=r"sweep.colour: unknown key \(fix: allowed: name, executor, workers, "):
        load_sweep(sw)


@pytest.mark.simgrid
def test_diagnose_no_png_over_an_earlier_report_removes_its_figures(tmp_path: Path) -> None:
    """Tester t3 of session 26: ``diagnose --no-png`` over an earlier report kept its PNGs (of other models) beside the
    new tables, and the folder's record listed them; they are removed once the new report is in place."""
    (tmp_path / "s.toml").write_text(TINY)
    run = tmp_path / "run"
    assert main(["run", str(tmp_path / "s.toml"), "-o", str(run), "-q", "--no-png"]) == 0
    report = tmp_path / "report"
    assert main(["diagnose", str(run), "-o", str(report), "--no-truth", "-q"]) == 0
    figures = {"blame_by_region.png", "culprit_timeline.png"}
    assert figures <= {p.name for p in report.iterdir()}
    assert main(["diagnose", str(run), "-o", str(report), "--no-truth", "--no-png", "-q"]) == 0
    assert not figures & {p.name for p in report.iterdir()}
    assert not figures & set(read_record(report)["files"])
    assert main(["report", str(run), "--diagnosis", str(report / "diagnosis.json"), "-q"]) == 0  # still its report


@pytest.mark.simgrid
def test_diagnose_refuses_a_users_report_folder_before_any_rerun(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Tester t8 of session 26: ``diagnose RUN -o FOLDER`` refused a folder holding a user's file only after the whole
    diagnosis (its counterfactual re-runs); the command now checks it first: no re-run is simulated or cached."""
    (tmp_path / "s.toml").write_text(TINY)
    run = tmp_path / "run"
    assert main(["run", str(tmp_path / "s.toml"), "-o", str(run), "-q", "--no-png"]) == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep\n")
    cache = tmp_path / "cache"
    capsys.readouterr()
    assert main(["diagnose", str(run), "-o", str(mine), "--cache", str(cache), "-q"]) == 2
    assert "mine: (report folder): holds 1 entry waitlab did not write (e.g. 'notes.txt')" in capsys.readouterr().err
    assert not cache.exists() or not any(cache.rglob("*")), "re-runs were simulated before the refusal"
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


@pytest.mark.simgrid
def test_evaluate_refuses_a_run_folder_as_its_leaderboard_folder(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """As export and sweep (tester t8 of session 26): a leaderboard written into a run's folder replaced its record,
    after which the run could no longer be read; it is refused before any case runs."""
    (tmp_path / "s.toml").write_text(TINY)
    run = tmp_path / "run"
    assert main(["run", str(tmp_path / "s.toml"), "-o", str(run), "-q", "--no-png"]) == 0
    before = sorted(p.name for p in run.iterdir())
    capsys.readouterr()
    assert main(["evaluate", "-o", str(run), "-q"]) == 2
    assert "(leaderboard folder): is a waitlab run folder" in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == before
    assert main(["report", str(run), "-q"]) == 0  # still a run folder waitlab reads
