"""Round 25 fixes (tester t5): replacing a results folder, waitlab's own stale partial files, errors that are not
about the output folder, and the evaluate cache's temporary folders.

- F1: ``run --force`` renames the previous folder aside, renames the new one in, then removes the previous one;
  signals are held over the renames, and a process killed between them leaves what the next command's
  ``clean_stale_partials`` finishes (the new folder in place) or undoes (the previous one back).  Tested on folder
  states made by hand, in the process with a signal raised between the renames, and with real signals sent to a
  ``waitlab run --force`` held between its renames.
- F3: ``.report.HEX.partial-PID.html`` / a ``diagnosis/`` holding only such files, of a process that no longer
  runs, no longer make ``--force`` refuse the folder; they are removed.
- F5: an operating-system error naming a path outside the output folder (the cache, TMPDIR) names that path.
- F8: a suite run that fails leaves no ``.tmp`` folder; those a killed evaluate left are swept (also the ground
  truth's ``.tmp`` cache files).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from ideal_replay import ideal_replay
from scenario_files import scenario_toml

import waitlab.experiments.run_folder as rf
from waitlab.cli import main
from waitlab.errors import InputError, Interrupted, WriteError
from waitlab.experiments.diagnosis import evaluate as ev
from waitlab.experiments.diagnosis.groundtruth import Counterfactuals, ledger_frame, standard_sets, wait_metrics
from waitlab.experiments.leftovers import clean_stale_partials, clean_stale_tmp, temporary_name
from waitlab.experiments.results import load_run
from waitlab.experiments.run_folder import (
    MARKER,
    check_replaceable,
    record_text,
    results_folder,
    verify_folder,
)
from waitlab.experiments.scenario import Scenario, from_mapping
from waitlab.models.analysis.waitstates import wait_states
from waitlab.models.ops import OpBuilder, OpTable

OLD = scenario_toml("swap", 4, 'kind = "stencil"\nsteps = 2', seed=1)
NEW = scenario_toml("swap", 4, 'kind = "stencil"\nsteps = 3', seed=1)


def dead_pid() -> int:
    """The id of a process that has ended."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def fake_run(folder: Path, text: str) -> Path:
    """A results folder of waitlab's by hand: a few files and its record."""
    folder.mkdir(parents=True)
    for name in ("run.json", "scenario.toml", "ops.parquet", "ledger.parquet", "events.parquet", "waits.parquet"):
        (folder / name).write_text(f"{name} {text}\n")
    (folder / "report.html").write_text(text)
    rf.seal(folder)
    return folder


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def old_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real results folder (4-rank stencil, 2 steps), written by ``waitlab run``."""
    base = tmp_path_factory.mktemp("swap")
    (base / "old.toml").write_text(OLD)
    (base / "new.toml").write_text(NEW)
    assert main(["run", str(base / "old.toml"), "-o", str(base / "old"), "--no-png"]) == 0
    return base / "old"


# -- F1: the swap, recovered from every state a kill -9 can leave -----------------------------------------------------

def test_killed_between_the_renames_the_previous_folder_goes_back(tmp_path: Path) -> None:
    pid = dead_pid()
    old = fake_run(tmp_path / f".good.old-{pid}", "old")
    fake_run(tmp_path / f".good.partial-{pid}", "new")  # complete, but never renamed in
    before = contents(old)
    clean_stale_partials(tmp_path)
    assert contents(tmp_path / "good") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good"]


def test_killed_once_the_new_folder_was_in_place_the_previous_one_goes(tmp_path: Path) -> None:
    pid = dead_pid()
    fake_run(tmp_path / "good", "new")
    fake_run(tmp_path / f".good.old-{pid}", "old")
    fake_run(tmp_path / "other", "other")
    fake_run(tmp_path / f".other.replaced-{pid}", "old")
    clean_stale_partials(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good", "other"]
    assert "new" in (tmp_path / "good" / "report.html").read_text()


def test_killed_while_writing_the_previous_folder_stays(tmp_path: Path) -> None:
    pid = dead_pid()
    fake_run(tmp_path / "good", "old")
    (tmp_path / f".good.partial-{pid}").mkdir()
    fake_run(tmp_path / "x.partial-3", "user")  # a folder so named, and its previous folder being replaced
    fake_run(tmp_path / f".x.partial-3.old-{os.getpid()}", "running")  # its process runs: left alone
    clean_stale_partials(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".x.partial-3.old-{os.getpid()}", "good", "x.partial-3"]
    assert (tmp_path / "good" / "report.html").read_text() == "old"


# -- F1: in the process ------------------------------------------------------------------------------------------------

def test_interrupted_while_writing_the_previous_folder_is_kept_and_said_so(tmp_path: Path) -> None:
    out = fake_run(tmp_path / "good", "old")
    before = contents(out)
    with pytest.raises(Interrupted) as caught, results_folder(out, force=True) as partial:
        (partial / "events.csv").write_text("x")
        raise Interrupted("", signal.SIGINT)
    assert contents(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["good"]
    assert str(caught.value) == (f"interrupted; {out} was not replaced: the previous folder is kept (the new results, "
                                 "being written, were removed)")


def test_a_signal_between_the_renames_waits_for_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = fake_run(tmp_path / "good", "old")
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        real(src, dst)
        if Path(src) == out:  # the previous folder is aside, the new one not yet in
            signal.raise_signal(signal.SIGINT)

    def on_signal(signum: int, frame: object) -> None:
        raise Interrupted("", signum)

    monkeypatch.setattr(os, "replace", replace)
    previous = signal.signal(signal.SIGINT, on_signal)
    try:
        with pytest.raises(Interrupted) as caught, results_folder(out, force=True) as partial:
            (partial / "report.html").write_text("new")
            for name in rf.REQUIRED_SUMS:
                (partial / name).write_text(f"{name} new\n")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert str(caught.value) == (f"interrupted; {out} was replaced: the new results are complete (the previous "
                                 "folder was removed)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good"]
    assert (out / "report.html").read_text() == "new" and verify_folder(out) == ""


def test_a_failed_rename_puts_the_previous_folder_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = fake_run(tmp_path / "good", "old")
    before = contents(out)
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst) == out and Path(src).name.startswith(".good.partial-"):
            raise OSError(errno.EIO, "Input/output error", str(src))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(WriteError, match=r"good: \(output folder\): writing failed: Input/output error"), \
            results_folder(out, force=True) as partial:
        for name in rf.REQUIRED_SUMS:
            (partial / name).write_text("new")
    assert contents(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["good"]


# -- F1: real signals to `waitlab run --force`, held between its two renames ------------------------------------------

DRIVER = """
import os, signal, sys, time
from pathlib import Path
signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as from a terminal, even when the tests run under nohup
import waitlab.experiments.results as results
flag, mode = Path(sys.argv[1]), sys.argv[2]
if mode == "swap":  # between the two renames: the previous folder is aside, the new one not yet in
    real = os.replace
    def replace(src, dst):
        real(src, dst)
        if Path(dst).name.startswith(".good.old-"):
            flag.write_text("x")
            time.sleep(1.5)
    os.replace = replace
else:  # while the new folder is being written
    write_run = results.write_run
    def slow(*args, **kwargs):
        flag.write_text("x")
        time.sleep(30)
        return write_run(*args, **kwargs)
    results.write_run = slow
sys.argv = ["waitlab", *sys.argv[3:]]
from waitlab.entry import main
main()
"""


def start_force(tmp_path: Path, old_run: Path, mode: str) -> tuple[subprocess.Popen[str], Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "good"
    shutil.copytree(old_run, out)
    (tmp_path / "driver.py").write_text(DRIVER)
    flag = tmp_path / "flag"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "driver.py"), str(flag), mode, "run",
                             str(old_run.parent / "new.toml"), "-o", str(out), "--force", "--no-png"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=dict(os.environ, TMPDIR=str(tmp_path)))
    return proc, out, flag


def wait_flag(flag: Path, proc: subprocess.Popen[str]) -> None:
    t0 = time.monotonic()
    while not flag.exists():
        if proc.poll() is not None or time.monotonic() - t0 > 60:
            proc.kill()
            pytest.fail(f"never reached the point to signal: {proc.communicate()}")
        time.sleep(0.02)


def test_real_signals_leave_the_previous_or_the_new_folder_whole(tmp_path: Path, old_run: Path) -> None:
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)
    started = {s: start_force(tmp_path / s.name, old_run, "swap") for s in signals}
    try:
        for s, (proc, _, flag) in started.items():
            wait_flag(flag, proc)
            proc.send_signal(s)
        old_record = (old_run / MARKER).read_text()
        for s, (proc, out, _) in started.items():
            _, err = proc.communicate(timeout=60)
            if s == signal.SIGKILL:  # killed between the renames: the next command puts the previous folder back
                assert proc.returncode == -s and not out.exists()
                clean_stale_partials(out.parent)
                assert (out / MARKER).read_text() == old_record and verify_folder(out) == ""
                assert contents(out) == contents(old_run)
            else:  # the signal waits for the renames: the new folder is in place, whole, and the message says so
                assert proc.returncode in (128 + s, -s), (s, err)
                if proc.returncode == 128 + s:
                    assert err.strip() == (f"waitlab: interrupted; {out} was replaced: the new results are complete "
                                           "(the previous folder was removed)"), err
                clean_stale_partials(out.parent)
                assert (out / MARKER).read_text() != old_record and verify_folder(out) == ""
                assert "steps = 3" in (out / "scenario.toml").read_text()
            assert [p.name for p in out.parent.iterdir() if p.name.startswith(".good")] == [], s
    finally:
        for proc, _, _ in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def test_a_real_ctrl_c_while_writing_keeps_the_previous_folder(tmp_path: Path, old_run: Path) -> None:
    proc, out, flag = start_force(tmp_path, old_run, "write")
    try:
        wait_flag(flag, proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert err.strip() == (f"waitlab: interrupted; {out} was not replaced: the previous folder is kept (the new "
                           "results, being written, were removed)")
    assert contents(out) == contents(old_run)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".good")] == []


# -- F3: waitlab's own stale partial files -----------------------------------------------------------------------------

def test_stale_partial_files_of_a_report_or_diagnosis_do_not_block_force(tmp_path: Path, old_run: Path) -> None:
    pid = dead_pid()
    out = tmp_path / "run"
    shutil.copytree(old_run, out)
    stale = out / f".report.97092e08.partial-{pid}.html"
    stale.write_text("<html")
    (out / "diagnosis").mkdir()
    (out / "diagnosis" / f".diagnosis.8fb500f3.partial-{pid}.json").write_text("{")
    check_replaceable(out, force=True)  # was: holds 2 entries waitlab did not write
    assert not stale.exists() and not (out / "diagnosis").exists()

    (out / "diagnosis").mkdir()  # a first diagnose interrupted before it wrote a file: an empty folder
    check_replaceable(out, force=True)

    live = out / f".report.97092e08.partial-{os.getpid()}.html"  # a report being written now
    live.write_text("<html")
    with pytest.raises(InputError, match="holds 1 entry waitlab did not write"):
        check_replaceable(out, force=True)
    live.unlink()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match=r"holds 1 entry waitlab did not write \(e.g. 'notes.txt'\)"):
        check_replaceable(out, force=True)


def test_a_new_record_does_not_list_a_stale_partial_file(tmp_path: Path) -> None:
    folder = tmp_path / "diagnosis"
    folder.mkdir()
    (folder / "diagnosis.json").write_text("{}")
    stale = folder / f".diagnosis.8fb500f3.partial-{dead_pid()}.json"
    stale.write_text("{")
    record = json.loads(record_text(folder, "diagnosis", ("diagnosis.json",)))
    assert record["files"] == ["diagnosis.json"] and not stale.exists()


# -- F5: errors about other folders than the output ------------------------------------------------------------------

def test_an_error_about_the_cache_names_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("WAITLAB_CACHE", str(cache))
    out = tmp_path / "out"
    with pytest.raises(WriteError) as caught, results_folder(out):
        raise PermissionError(errno.EACCES, "Permission denied", str(cache / "sub"))
    assert str(caught.value) == (f"{cache / 'sub'}: (cache folder): writing failed: Permission denied: you may not "
                                 f"write there (fix: set WAITLAB_CACHE (now {str(cache)!r}) to a folder you can write)")
    with pytest.raises(WriteError) as caught, results_folder(out) as partial:
        raise OSError(errno.ENOSPC, "No space left on device", str(partial / "events.parquet"))
    assert str(caught.value).startswith(f"{out}: (output folder): writing failed: No space left on device")
    assert not out.exists() and not list(tmp_path.glob(".out.*"))


def test_a_cache_that_is_a_file_is_named_by_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cachefile").write_text("")
    (tmp_path / "s.toml").write_text(OLD)
    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path / "cachefile"))
    assert main(["run", str(tmp_path / "s.toml"), "-o", str(tmp_path / "out"), "--no-png"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"waitlab: error: {tmp_path / 'cachefile'}: (cache folder): writing failed: File exists"), err
    assert "(output folder)" not in err and "WAITLAB_CACHE" in err
    assert not (tmp_path / "out").exists()


# -- F8: the evaluate cache's temporary folders and files -------------------------------------------------------------

def test_a_failed_suite_run_leaves_no_temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(scenario: Scenario) -> Any:
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(ev, "run_pipeline", failing)
    dest = tmp_path / "suite-runs" / "abc-def"
    with pytest.raises(OSError, match="File too large"):
        ev.materialize(from_mapping({"scenario": {"name": "x", "ranks": 2, "seed": 0},
                                     "platform": {"name": "dawning_5000a"},
                                     "application": {"kind": "stencil", "steps": 1}}, "x"), str(dest))
    assert list((tmp_path / "suite-runs").iterdir()) == []


def test_stale_suite_runs_are_swept_when_the_cache_is_used(tmp_path: Path) -> None:
    runs = tmp_path / "suite-runs"
    pid = dead_pid()
    stale = [runs / f"abc-def.tmp{pid}", runs / f"abc-def.tmp{pid}-{temporary_name('x').rsplit('-', 1)[1]}"]
    kept = [runs / "abc-def", runs / temporary_name("abc-fed"), runs / f"abc-def.tmp{pid}-another-host"]
    for p in stale + kept:
        p.mkdir(parents=True)
    assert ev.materialize_all([], tmp_path, None, False) == 0
    assert sorted(runs.iterdir()) == sorted(kept)


def ideal_rerun(scenario: Scenario, ops: OpTable, speed_profiles: Mapping[str, str] | None) -> dict[str, Any]:
    events = ideal_replay(ops)
    return wait_metrics(events, wait_states(events))


def test_ground_truth_cache_files_are_written_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = from_mapping({"scenario": {"name": "hand", "ranks": 2, "seed": 0},
                             "platform": {"name": "dawning_5000a"}, "application": {"kind": "stencil", "steps": 1}},
                            "hand")
    b = OpBuilder(2)
    b.add("compute", range(2), value=[1.5, 1.0], excess=[0.5, 0.0])
    b.add("barrier", range(2))
    ops = b.build()
    sets = standard_sets(ledger_frame(ops))
    stale = tmp_path / f"x-y.tmp{dead_pid()}"
    stale.write_text("{")
    real = os.replace

    def failing(src: Any, dst: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", failing)
    with ThreadPoolExecutor(1) as pool, pytest.raises(OSError, match="No space"):
        Counterfactuals(scenario, ops, executor=pool, cache_dir=tmp_path, rerun=ideal_rerun).run(sets[:1])
    assert list(tmp_path.iterdir()) == []  # neither the stale entry nor the one that failed
    monkeypatch.setattr(os, "replace", real)
    assert clean_stale_tmp(tmp_path) == []


def test_a_users_own_hidden_names_alike_are_left_alone(tmp_path: Path) -> None:
    """Only what belongs to the results folder being written is cleaned in its parent (tester t6 of session 25: a
    run into a user's folder removed `.bashrc.replaced-77`, `.essay.partial-4242`, `.photos.old-31337/` and renamed
    `.notes.old-2023` to `notes`: names alike, process ids no longer running)."""
    home = tmp_path / "home"
    home.mkdir()
    for f in (".bashrc.replaced-77", ".essay.partial-4242"):
        (home / f).write_text("mine\n")
    (home / ".photos.old-31337").mkdir()
    (home / ".photos.old-31337" / "a.jpg").write_text("x")
    (home / ".notes.old-2023").write_text("notes\n")
    before = sorted(p.relative_to(home).as_posix() for p in home.rglob("*"))
    assert clean_stale_partials(home, "late") == []
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == before
    stale = home / ".late.partial-999999"  # the output's own partial folder of a process that no longer runs
    stale.mkdir()
    assert clean_stale_partials(home, "late") == [stale] and not stale.exists()


def test_a_reader_finishes_a_swap_cut_short(tmp_path: Path) -> None:
    """`run --force` killed between its two renames leaves the previous folder aside: the next command that reads
    the folder (report, diagnose, export) puts it back instead of saying it is no results folder."""
    aside = tmp_path / ".good.old-999999"
    aside.mkdir()
    (aside / "run.json").write_text("{}")
    with pytest.raises(InputError, match="schema_version"):  # read: the previous folder is back (its run.json)
        load_run(tmp_path / "good")
    assert (tmp_path / "good" / "run.json").is_file() and not aside.exists()
