"""Interruptions and limits: Ctrl-C once and twice, kill -9 of the parent, concurrent sweeps, a file-size limit.

Every process a test starts carries a marker in its environment; "no process left" means no process on the
machine still has it (SimGrid's simulator included: smpirun starts it in a session of its own).
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bad_inputs_corpus import GOOD, write
from process_watch import cleanup, marked, start, wait_for
from scenario_files import scenario_toml

import waitlab.experiments.results as results
from waitlab.cli import main

pytestmark = [pytest.mark.simgrid, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")]

#: Many seconds of SimGrid per point (128-rank basic_linear alltoall): the tests never wait for it to end.
SLOW = scenario_toml("slow", 128, 'kind = "fft"\nsteps = 8\nbytes_per_peer = 65536', seed=1, platform="deepcomp_7000",
                     more='[simulation]\nalltoall = "basic_linear"\ntimeout = 300.0')


def simulating(mark: str) -> bool:
    return any("smpimain" in cmd for _, cmd in marked(mark))


def slow_sweep(tmp_path: Path) -> Path:
    write(tmp_path / "slow.toml", SLOW)
    return write(tmp_path / "sw.toml", 'base = "slow.toml"\n[grid]\n"application.steps" = [8, 9]\n'
                 '[sweep]\nname = "slow-sweep"\nworkers = 2\n')


def test_first_ctrl_c_stops_cleanly(tmp_path: Path) -> None:
    write(tmp_path / "slow.toml", SLOW)
    proc, mark = start(tmp_path, "run", "slow.toml", "-o", "out", "--no-png")
    try:
        assert wait_for(lambda: simulating(mark), 60), "SimGrid never started"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 130 and "Traceback" not in err, err
        assert wait_for(lambda: not marked(mark), 10), marked(mark)
        assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.partial-*"))
        assert not list((tmp_path / "tmp").iterdir()), "scratch left in TMPDIR"
    finally:
        cleanup(proc, mark)


def test_second_ctrl_c_exits_at_once_and_leaves_no_process(tmp_path: Path) -> None:
    proc, mark = start(tmp_path, "sweep", str(slow_sweep(tmp_path)), "-o", "out")
    try:
        assert wait_for(lambda: simulating(mark), 90), "SimGrid never started"
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.2)
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        assert time.monotonic() - t0 < 5, "the second Ctrl-C did not exit at once"
        assert proc.returncode == 130, err
        assert wait_for(lambda: not marked(mark), 10), marked(mark)
        assert not list((tmp_path / "tmp").iterdir()), "scratch left in TMPDIR"
        assert not list((tmp_path / "out" / "runs").glob("*/run.json")), "a point looks finished"
    finally:
        cleanup(proc, mark)


def test_kill_9_of_the_parent_leaves_no_process_and_its_scratch_is_cleaned_next_time(tmp_path: Path) -> None:
    proc, mark = start(tmp_path, "sweep", str(slow_sweep(tmp_path)), "-o", "out")
    try:
        assert wait_for(lambda: simulating(mark), 90), "SimGrid never started"
        assert len(marked(mark)) >= 3  # waitlab, a worker, smpirun and the simulator
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert wait_for(lambda: not marked(mark), 10), f"left running: {marked(mark)}"
        again, _ = start(tmp_path, "run", "missing.toml")  # any command cleans scratch of dead processes
        again.communicate(timeout=60)
        assert again.returncode == 2
        assert not [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith("waitlab-scratch-")]
    finally:
        cleanup(proc, mark)


def test_a_second_sweep_into_a_busy_folder_is_refused_with_the_holders_pid(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]
                                                                          ) -> None:
    sw = slow_sweep(tmp_path)
    proc, mark = start(tmp_path, "sweep", str(sw), "-o", "out")
    try:
        assert wait_for(lambda: (tmp_path / "out" / ".sweep.lock").exists(), 60)
        assert main(["sweep", str(sw), "-o", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert f"is in use by another sweep (PID {proc.pid})" in err, err
    finally:
        cleanup(proc, mark)


def test_a_stale_lock_is_taken_over_and_a_failed_point_does_not_stop_the_others(tmp_path: Path,
                                                                                capsys: pytest.CaptureFixture[str]
                                                                                ) -> None:
    write(tmp_path / "base.toml", GOOD)
    sw = write(tmp_path / "sw.toml", 'base = "base.toml"\n[grid]\n"simulation.config" = [{}, '
               '{ "smpi/nonsense" = "1" }]\n[sweep]\nname = "half"\nworkers = 1\n')
    dead = subprocess.Popen(["true"])
    dead.wait()
    out = tmp_path / "out"
    out.mkdir()
    (out / ".sweep.lock").write_text(f"{dead.pid}\n")
    assert main(["sweep", str(sw), "-o", str(out)]) == 3
    text = capsys.readouterr().out
    assert "sweep half: 1 of 2 points done (1 this run, 0 skipped as already done), 1 failed" in text
    failed = (out / "failed.csv").read_text()
    assert "Bad config key: smpi/nonsense" in failed
    assert len((out / "sweep.csv").read_text().strip().splitlines()) == 2  # header + the good point
    assert not (out / ".sweep.lock").exists()
    assert main(["sweep", str(sw), "-o", str(out)]) == 3  # resumes: the good point is skipped, not redone
    assert "1 of 2 points done (0 this run, 1 skipped as already done), 1 failed" in capsys.readouterr().out


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))


def test_a_file_size_limit_gets_a_clear_error_and_leaves_nothing(tmp_path: Path) -> None:
    s = write(tmp_path / "s.toml", GOOD.replace("steps = 3", "steps = 50").replace("ranks = 4", "ranks = 16"))
    proc = subprocess.run([sys.executable, "-m", "waitlab.cli", "run", str(s), "-o", str(tmp_path / "out"),
                           "--no-png"], capture_output=True, text=True, timeout=300, preexec_fn=_limit_file_size,
                          env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert proc.returncode in (2, 3), proc.stderr
    assert "Traceback" not in proc.stderr
    assert "File too large" in proc.stderr or "file-size limit" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.partial-*"))
    assert not list(tmp_path.glob("waitlab-scratch-*"))


def test_a_full_disk_while_writing_results_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(results, "write_chrome_trace", disk_full)  # the disk fills up halfway through the folder
    s = write(tmp_path / "s.toml", GOOD)
    assert main(["run", str(s), "-o", str(tmp_path / "out"), "--no-png", "--chrome"]) == 2
    err = capsys.readouterr().err
    assert "writing failed: No space left on device" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.partial-*"))
