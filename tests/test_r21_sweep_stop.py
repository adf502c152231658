"""A stopped sweep leaves nothing to land later: Ctrl-C on a real Dask cluster ends the running points, and a
resume started at once runs every missing point exactly once, with no failure.

Points are written into the sweep's own attempt folder and renamed into place by the sweep alone
(:mod:`waitlab.experiments.sweep_points`); a point that outlives its sweep can neither create nor publish a folder.
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
from process_watch import cleanup, start, wait_for
from scenario_files import scenario_toml
from test_dask_cluster import cluster, simulating_under  # noqa: F401  (cluster: the fixture)

from waitlab.errors import SimulationError
from waitlab.experiments import sweep_points
from waitlab.experiments.scenario import load_scenario
from waitlab.experiments.sweep_points import discard, new_attempt, publish, write_point

pytest.importorskip("distributed")

#: A stencil point of a few seconds: long enough to be caught running on both workers, short enough to resume.
MEDIUM = scenario_toml("medium", 8, 'kind = "stencil"\nsteps = 6000\ncompute_seconds = 0.01\nhalo_bytes = 65536\n'
                       "allreduce_bytes = 1048576", seed=3)
STEPS = [6000, 6001, 6002, 6003, 6004, 6005]


def _point(tmp_path: Path) -> tuple[dict, str]:  # type: ignore[type-arg]
    sc = load_scenario(write(tmp_path / "g.toml", GOOD))
    return sc.resolved(), sc.source


def test_a_point_of_a_stopped_sweep_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep stops while the point simulates: the point finds its attempt folder gone and writes nothing."""
    runs = tmp_path / "runs"
    runs.mkdir()
    attempt = new_attempt(runs)
    data, source = _point(tmp_path)
    real_run = sweep_points.run

    def run_then_stopped(*args: object) -> object:
        result = real_run(*args)  # type: ignore[arg-type]
        discard(attempt)  # the sweep stopped meanwhile
        return result

    monkeypatch.setattr(sweep_points, "run", run_then_stopped)
    with pytest.raises(SimulationError, match="the sweep was stopped"):
        write_point(data, source, str(attempt), "abc")
    assert list(runs.iterdir()) == []


@pytest.mark.simgrid
def test_only_the_sweep_publishes_and_a_finished_folder_is_never_replaced(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    attempt = new_attempt(runs)
    data, source = _point(tmp_path)
    draft, summary = write_point(data, source, str(attempt), "abc")
    assert summary["makespan"] > 0 and Path(draft).parent == attempt and not (runs / "abc").exists()
    publish(draft, attempt, runs / "abc")
    assert (runs / "abc" / "run.json").is_file() and not Path(draft).exists()
    inode = (runs / "abc").stat().st_ino
    again, _ = write_point(data, source, str(attempt), "abc")
    publish(again, attempt, runs / "abc")  # already finished: kept, the new draft dropped, no error
    assert (runs / "abc").stat().st_ino == inode and not Path(again).exists()


def finished(out: Path) -> list[str]:
    runs = out / "runs"
    return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []


@pytest.mark.simgrid
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")
def test_ctrl_c_on_a_dask_cluster_ends_the_running_points_and_a_resume_at_once_completes(
        tmp_path: Path, cluster: tuple[str, list], capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    address, workers = cluster
    write(tmp_path / "medium.toml", MEDIUM)
    write(tmp_path / "sw.toml", f'base = "medium.toml"\n[grid]\n"application.steps" = {STEPS}\n'
          '[sweep]\nname = "race"\nexecutor = "dask"\n')
    out = tmp_path / "out"
    proc, mark = start(tmp_path, "sweep", "sw.toml", "-o", "out", "--scheduler", address)
    try:
        assert wait_for(lambda: all(simulating_under(w.pid) for w in workers), 180), "never simulating on both"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        # the workers' points were ended before the sweep said so, and nothing of theirs is left or lands later
        assert not any(simulating_under(w.pid) for w in workers), "a point still simulates on a worker"
        assert "2 running points stopped and removed" in err, err
        assert f"rerun `waitlab sweep sw.toml -o out --scheduler {address}`" in err, err
        kept = finished(out)
        assert not [n for n in kept if n.startswith(".")], kept
    finally:
        cleanup(proc, mark)

    again, mark = start(tmp_path, "sweep", "sw.toml", "-o", "out", "--scheduler", address)  # at once
    try:
        text, err = again.communicate(timeout=600)
    finally:
        cleanup(again, mark)
    assert again.returncode == 0, err
    assert f"{len(STEPS)} of {len(STEPS)} points done ({len(STEPS) - len(kept)} this run" in text, text
    assert ", 0 failed" in text, text
    assert not (out / "failed.csv").exists()
    with open(out / "sweep.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(int(r["application.steps"]) for r in rows) == STEPS
    time.sleep(1)
    assert finished(out) == sorted(r["scenario_hash"] for r in rows)  # one folder each, nothing hidden left
