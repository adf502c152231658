"""Tester t8 of session 26, findings 2-5 and 8 (the output-folder checks of b460294):

* ``export -o`` wrote into another run's results folder (its trace.json replaced) or a report folder, since every
  entry there is in a waitlab record: a folder whose record is of another kind than an export's is now refused;
* ``sweep -o`` wrote runs/ and sweep.csv into a run's, an export's or a report's folder: a record there is refused;
* a user's folder holding an empty ``runs/`` was taken for a sweep's and its sweep.csv replaced: a sweep's folder is
  now one holding what only a sweep makes (``run_folder.SWEEP_STARTED``);
* ``diagnose -o`` refused a bad report folder only after the whole diagnosis: ``api.diagnose(..., out=)`` checks it
  first;
* the refusals' messages: a running export's hidden partial file is not "a file waitlab did not write"; a symbolic
  link given to ``-o`` is said to be one.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from scenario_files import imbalance_toml, scenario_toml

from waitlab import api, api_studies
from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.run_folder import MARKER, check_output_folder, check_replaceable, seal, sweep_started
from waitlab.experiments.sweep import load_sweep, run_sweep
from waitlab.experiments.writer import replaced_files

#: 4 ranks, 2 steps; rank 1 computes 0.5 s more per step.
LATE = scenario_toml("late4", 4, 'kind = "stencil"\nsteps = 2', seed=3, more=imbalance_toml("1", 0.5))
FIX = "(fix: choose another -o: a new folder, or one this command wrote before)"


def _folder_of(parent: Path, kind: str, **files: str) -> Path:
    """A folder holding ``files`` and a waitlab record of ``kind`` listing them (as ``seal`` writes it)."""
    folder = parent / kind
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    seal(folder, kind, sums_of=())
    return folder


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# -- findings 2 and 3: a record of another kind -------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["run", "diagnosis", "leaderboard"])
def test_an_export_folder_is_not_a_folder_of_another_kind(tmp_path: Path, kind: str) -> None:
    other = _folder_of(tmp_path, kind, **{"trace.json": "theirs\n"})
    with pytest.raises(InputError) as info:
        check_output_folder(other, "export folder", kind="export")
    assert str(info.value) == (f"{other}: (export folder): is a waitlab {kind} folder (its .waitlab record says "
                               f"so), not an export folder {FIX}")
    check_output_folder(_folder_of(tmp_path, "export", **{"trace.json": "ours\n"}), "export folder", kind="export")


@pytest.mark.parametrize("kind", ["run", "export", "diagnosis"])
def test_a_sweep_refuses_a_folder_holding_a_waitlab_record(tmp_path: Path, kind: str) -> None:
    (tmp_path / "base.toml").write_text(scenario_toml("tiny", 4, 'kind = "stencil"\nsteps = 1', seed=3))
    (tmp_path / "sw.toml").write_text('base = "base.toml"\n[grid]\n"scenario.seed" = [1, 2]\n')
    other = _folder_of(tmp_path, kind, **{"summary.json": "{}\n"})
    before = sorted(p.name for p in other.iterdir())
    with pytest.raises(InputError) as info:
        run_sweep(load_sweep(tmp_path / "sw.toml"), other)
    assert str(info.value) == (f"{other}: (sweep folder): is a waitlab {kind} folder (its .waitlab record says so), "
                               f"not a sweep folder {FIX}")
    assert sorted(p.name for p in other.iterdir()) == before  # no runs/, no sweep.csv, no lock


# -- finding 4: what makes a folder a sweep's ---------------------------------------------------------------------

def test_a_users_runs_folder_does_not_make_a_sweeps_folder(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text(scenario_toml("tiny", 4, 'kind = "stencil"\nsteps = 1', seed=3))
    (tmp_path / "sw.toml").write_text('base = "base.toml"\n[grid]\n"scenario.seed" = [1, 2]\n')
    mine = tmp_path / "userdir"
    (mine / "runs").mkdir(parents=True)
    (mine / "sweep.csv").write_text("mine\n")
    with pytest.raises(InputError) as info:
        run_sweep(load_sweep(tmp_path / "sw.toml"), mine)
    assert str(info.value) == (f"{mine}: (sweep folder): holds 2 entries waitlab did not write (e.g. 'runs') "
                               "(fix: choose another -o, or move those files away)")
    assert (mine / "sweep.csv").read_text() == "mine\n" and sorted(p.name for p in mine.iterdir()) == \
        ["runs", "sweep.csv"]


def test_a_sweeps_folder_is_one_holding_what_only_a_sweep_makes(tmp_path: Path) -> None:
    def folder(name: str, **files: str) -> Path:
        f = tmp_path / name
        f.mkdir()
        for rel, text in files.items():
            (f / rel).parent.mkdir(parents=True, exist_ok=True)
            (f / rel).write_text(text)
        return f

    point = "0123456789abcdef"  # a scenario hash: 16 hex digits
    assert sweep_started(folder("lock", **{".sweep.lock": "123\n"}))
    assert sweep_started(folder("point", **{f"runs/{point}/{MARKER}": "{}\n", "notes.txt": "x\n"}))
    # a sweep whose points all failed: its header-only table beside an empty runs/
    failed = folder("failed", **{"sweep.csv": "scenario.seed,scenario_hash,makespan\n", "failed.csv": "x\n"})
    (failed / "runs").mkdir()
    assert sweep_started(failed)
    assert not sweep_started(folder("empty_runs", **{"runs/.keep": "", "sweep.csv": "mine\n"}))
    assert not sweep_started(folder("user_runs", **{f"runs/data/{MARKER}": "{}\n"}))  # not a hash's name
    assert not sweep_started(folder("no_record", **{f"runs/{point}/run.json": "{}\n"}))
    assert not sweep_started(folder("csv", **{"sweep.csv": "a,scenario_hash_of_mine\n1,2\n"}))
    assert not sweep_started(tmp_path / "missing")


# -- finding 5: diagnose's report folder is checked before the diagnosis --------------------------------------------

def test_diagnose_checks_its_report_folder_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def diagnosed(src: object, **kwargs: object) -> str:
        calls.append(src)
        return "diagnosed"

    monkeypatch.setattr(api_studies, "diagnose_path", diagnosed)
    (tmp_path / "s.toml").write_text(LATE)
    mine = tmp_path / "mydiag"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep\n")
    with pytest.raises(InputError) as info:
        api.diagnose(tmp_path / "s.toml", out=mine, executor=object())  # type: ignore[arg-type]
    assert str(info.value) == (f"{mine}: (report folder): holds 1 entry waitlab did not write (e.g. 'notes.txt') "
                               "(fix: choose another -o, or move those files away)")
    run = _folder_of(tmp_path, "run", **{"run.json": "{}\n"})
    with pytest.raises(InputError, match=r"\(report folder\): is a waitlab run folder"):
        api.diagnose(tmp_path / "s.toml", out=run, executor=object())  # type: ignore[arg-type]
    assert calls == []  # refused before anything was read or simulated
    assert api.diagnose(tmp_path / "s.toml", out=tmp_path / "new", executor=object()) == "diagnosed"  # type: ignore
    assert api.diagnose(tmp_path / "s.toml", executor=object()) == "diagnosed"  # type: ignore[arg-type]
    assert len(calls) == 2


# -- finding 6 (8 of the report): messages ---------------------------------------------------------------------------

def test_a_running_writers_partial_file_is_not_a_foreign_entry(tmp_path: Path) -> None:
    out = tmp_path / "conc1"
    out.mkdir()
    with replaced_files(out, "export file") as files:  # another export, still writing (this process: alive)
        files.path("propagation.graphml").write_text("<graphml/>\n")
        assert next(p.name for p in out.iterdir()).endswith(f".partial-{os.getpid()}.graphml")
        check_output_folder(out, "export folder")
        seal(out, "export", sums_of=())  # the other export's record: its names only, not this one's partial file
        assert json.loads((out / MARKER).read_text())["files"] == []
    (out / "notes.txt").write_text("mine\n")  # a user's file still is one (the graphml, not registered here, too)
    with pytest.raises(InputError, match=r"holds 2 entries waitlab did not write \(e.g. 'notes.txt'\)"):
        check_output_folder(out, "export folder")


def test_a_symbolic_link_given_to_o_is_said_to_be_one(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    link = tmp_path / "lnk"
    link.symlink_to("real")
    with pytest.raises(InputError) as info:
        check_output_folder(link, "export folder")
    assert str(info.value) == (f"{link}: (export folder): is a symbolic link (to real), not a folder (fix: give -o "
                               f"the folder itself ({tmp_path / 'real'}), or choose another -o)")
    with pytest.raises(InputError, match=r"\(output folder\): is a symbolic link \(to real\), not a folder"):
        check_replaceable(link, force=True)
    (tmp_path / "file").write_text("x\n")
    with pytest.raises(InputError, match=r"\(export folder\): exists and is not a folder \(fix: choose another -o\)"):
        check_output_folder(tmp_path / "file", "export folder")


# -- the commands themselves (simulated) -----------------------------------------------------------------------------

@pytest.mark.simgrid
def test_export_refuses_another_runs_folder_and_a_report_folder(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "late4.toml").write_text(LATE)
    late, wave = tmp_path / "late", tmp_path / "wave"
    api.run(tmp_path / "late4.toml", late)
    api.run(tmp_path / "late4.toml", wave)
    assert main(["export", str(wave), "--chrome", "--quiet"]) == 0  # into the run's own folder: as before
    assert main(["diagnose", str(late), "--no-truth", "--no-png", "--quiet"]) == 0
    capsys.readouterr()
    for folder, kind, argv in ((wave, "run", [str(late), "--chrome", "--graphml"]),
                               (late / "diagnosis", "diagnosis", [str(wave), "--otf2"])):
        before = _digests(folder)
        assert main(["export", *argv, "-o", str(folder), "--quiet"]) == 2
        assert capsys.readouterr().err == (f"waitlab: error: {folder}: (export folder): is a waitlab {kind} folder "
                                           f"(its .waitlab record says so), not an export folder {FIX}\n")
        assert _digests(folder) == before
    api.load_run(wave)
    link = tmp_path / "lnk"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    assert main(["export", str(late), "--otf2", "-o", str(link), "--quiet"]) == 2
    assert "(export folder): is a symbolic link (to " in capsys.readouterr().err
