"""Sweeps that survive: a bad point fails alone, Ctrl-C / SIGTERM stop at once and the sweep resumes.

Every process a test starts carries a marker in its environment (see ``test_interruptions``); "no process left"
means no process on the machine still has it.
"""

from __future__ import annotations

import csv
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from bad_inputs_corpus import GOOD, write
from process_watch import cleanup, marked, start, wait_for
from scenario_files import scenario_toml
from test_interruptions import SLOW  # the slow 128-rank point, declared once

from waitlab.cli import main
from waitlab.experiments.run_folder import MARKER

pytestmark = [pytest.mark.simgrid, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")]

FFT64 = scenario_toml("fft64", 64, 'kind = "fft"\nsteps = 1\nbytes_per_peer = 1024', seed=1, platform="deepcomp_7000")


def test_a_bad_point_fails_alone_with_its_own_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's two-platform sweep: okita_myrinet has 16 nodes, 64 ranks at 1 per node need 64."""
    write(tmp_path / "fft.toml", FFT64)
    sw = write(tmp_path / "sw.toml", 'base = "fft.toml"\n[grid]\n"platform.name" = ["deepcomp_7000", '
               '"okita_myrinet"]\n[sweep]\nname = "two"\nworkers = 2\n')
    out = tmp_path / "out"
    assert main(["sweep", str(sw), "-o", str(out)]) == 3
    text = capsys.readouterr()
    assert "1 of 2 points done (1 this run, 0 skipped as already done), 1 failed" in text.out
    assert "BrokenProcessPool" not in text.out + text.err
    with open(out / "sweep.csv") as fh:
        done = list(csv.DictReader(fh))
    assert [r["platform.name"] for r in done] == ["deepcomp_7000"]
    assert float(done[0]["makespan"]) > 0
    with open(out / "failed.csv") as fh:
        failed = list(csv.DictReader(fh))
    assert [r["platform.name"] for r in failed] == ["okita_myrinet"]
    assert "fft.toml: scenario.ranks: 64 ranks at 1 per node need 64 nodes, but okita_myrinet has only 16" in \
        failed[0]["error"]
    assert "\n" not in failed[0]["error"]
    folders = [p.name for p in (out / "runs").iterdir()]
    assert folders == [done[0]["scenario_hash"]], folders  # the failed point left nothing


TWELVE = ('base = "g.toml"\n[grid]\n"application.steps" = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]\n'
          '[sweep]\nname = "twelve"\nworkers = 2\n')


def finished(out: Path) -> int:
    """Points the product calls finished: sealed folders (renamed into place, marker inside), never a hidden
    ``.KEY.partial-PID`` folder still being written (pathlib's ``*`` matches hidden names too)."""
    runs = out / "runs"
    if not runs.is_dir():
        return 0
    return sum(1 for p in runs.iterdir() if not p.name.startswith(".") and (p / MARKER).is_file())


def test_ctrl_c_stops_at_once_keeps_the_finished_points_and_the_rerun_completes_them(tmp_path: Path) -> None:
    write(tmp_path / "g.toml", GOOD)
    write(tmp_path / "sw.toml", TWELVE)
    ref = tmp_path / "ref"
    assert main(["sweep", str(tmp_path / "sw.toml"), "-o", str(ref), "-q"]) == 0  # uninterrupted

    proc, mark = start(tmp_path, "sweep", "sw.toml", "-o", "out")
    out = tmp_path / "out"
    try:
        assert wait_for(lambda: finished(out) >= 1, 120), "no point finished"
        os.killpg(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 10, "the first Ctrl-C did not stop the sweep within 10 s"
        assert proc.returncode == 130, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert wait_for(lambda: not marked(mark), 10), marked(mark)
        kept = finished(out)
        assert 1 <= kept < 12, kept
        assert f"{kept} of 12 points finished and are kept" in err, err
        assert "rerun `waitlab sweep sw.toml -o out` to run only the missing points" in err, err
        assert (out / "incomplete.txt").is_file()
        with open(out / "sweep.csv") as fh:
            assert len(list(csv.DictReader(fh))) == kept
        assert not list((out / "runs").glob(".*partial*")), "a partial folder was left"
        assert len(list((out / "runs").iterdir())) == kept
        sealed = {p.name: (p.stat().st_ino, (p / MARKER).stat().st_mtime_ns) for p in (out / "runs").iterdir()}
    finally:
        cleanup(proc, mark)

    again, mark = start(tmp_path, "sweep", "sw.toml", "-o", "out")
    text, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert f"12 points, {kept} already done, {12 - kept} to run" in text
    assert f"({12 - kept} this run, {kept} skipped as already done)" in text
    assert not (out / "incomplete.txt").exists()
    assert (out / "sweep.csv").read_bytes() == (ref / "sweep.csv").read_bytes()
    for name, (inode, mtime) in sealed.items():  # finished points are skipped: never redone or overwritten
        folder = out / "runs" / name
        assert (folder.stat().st_ino, (folder / MARKER).stat().st_mtime_ns) == (inode, mtime), name


def test_sigterm_stops_with_status_143_and_leaves_no_process(tmp_path: Path) -> None:
    write(tmp_path / "slow.toml", SLOW)
    write(tmp_path / "sw.toml", 'base = "slow.toml"\n[grid]\n"application.steps" = [8, 9, 10]\n'
          '[sweep]\nname = "slow-sweep"\nworkers = 2\n')
    proc, mark = start(tmp_path, "sweep", "sw.toml", "-o", "out")
    try:
        assert wait_for(lambda: sum("smpimain" in c for _, c in marked(mark)) >= 2, 120), "SimGrid never started"
        os.kill(proc.pid, signal.SIGTERM)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 10
        assert proc.returncode == 143, err
        assert "interrupted by SIGTERM: 0 of 3 points finished and are kept" in err, err
        assert "2 running points stopped and removed" in err, err
        assert wait_for(lambda: not marked(mark), 10), marked(mark)
        assert list((tmp_path / "out" / "runs").iterdir()) == []
        assert not list((tmp_path / "tmp").iterdir()), "scratch left in TMPDIR"
    finally:
        cleanup(proc, mark)


def test_ctrl_c_stops_diagnose_counterfactual_reruns(tmp_path: Path) -> None:
    """Counterfactual re-runs run in waitlab's worker processes: the first Ctrl-C ends them and says what stays."""
    write(tmp_path / "slow.toml", FFT64.replace("steps = 1", "steps = 4") + '[[application.imbalance]]\n'
          'region = "FFT_x"\nranks = [1, 2, 3]\nmagnitude = 0.01\n')
    proc, mark = start(tmp_path, "diagnose", "slow.toml", "-o", "report", "--no-cache", "--workers", "2")

    def rerunning() -> bool:
        procs = marked(mark)
        assert proc.poll() is None, proc.communicate()
        return any("waitlab.experiments.isolated" in c for _, c in procs) and \
            sum("smpimain" in c for _, c in procs) >= 1
    try:
        assert wait_for(rerunning, 240), "the counterfactual re-runs never started"
        os.killpg(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 10, "the first Ctrl-C did not stop diagnose within 10 s"
        assert proc.returncode == 130, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert "diagnose interrupted by SIGINT: running re-runs were stopped, no report was written" in err, err
        assert wait_for(lambda: not marked(mark), 10), marked(mark)
        assert not (tmp_path / "report").exists()
    finally:
        cleanup(proc, mark)
