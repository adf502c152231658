"""Sweeps: grid expansion, errors, resume without redoing finished runs, local and Dask executors."""

from __future__ import annotations

import socket
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from scenario_files import scenario_toml

from waitlab.errors import InputError, Interrupted
from waitlab.experiments import sweep as sweep_module
from waitlab.experiments.executors import open_executor
from waitlab.experiments.report.sweep_plots import plot_sweep_folder
from waitlab.experiments.scenario import load_scenario
from waitlab.experiments.sweep import load_sweep, run_sweep

BASE = scenario_toml("tiny", 4, 'kind = "stencil"\nsteps = 2', seed=3, platform="deepcomp_7000")


def make(tmp_path: Path, grid: str, sweep: str = "") -> Path:
    (tmp_path / "base.toml").write_text(BASE)
    p = tmp_path / "sweep.toml"
    p.write_text(f'base = "base.toml"\n[grid]\n{grid}\n{sweep}')
    return p


def test_grid_expands_to_validated_scenarios(tmp_path):
    sw = load_sweep(make(tmp_path, '"scenario.ranks" = [4, 8]\n"application.steps" = [1, 2, 3]'))
    assert len(sw.points) == 6
    assert sorted({(p.scenario.ranks, p.scenario.application.steps) for p in sw.points}) == \
        [(r, s) for r in (4, 8) for s in (1, 2, 3)]
    assert len({p.key for p in sw.points}) == 6


def test_bad_sweeps_are_reported(tmp_path):
    with pytest.raises(InputError, match=r"grid \(scenario.ranks=0\): makes an invalid scenario: .*scenario.ranks"):
        load_sweep(make(tmp_path, '"scenario.ranks" = [4, 0]'))
    with pytest.raises(InputError, match=r"grid\.scenario\.ranks: must be a non-empty list"):
        load_sweep(make(tmp_path, '"scenario.ranks" = 4'))
    with pytest.raises(InputError, match=r"sweep\.executr: unknown key"):
        load_sweep(make(tmp_path, '"scenario.ranks" = [4]', '[sweep]\nexecutr = "dask"\n'))


def test_a_sweep_interrupted_before_any_point_keeps_the_tables_header(tmp_path):
    sw = load_sweep(make(tmp_path, '"scenario.seed" = [1, 2]'))
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    stopped = sweep_module._interrupted(sw, out, out / "runs", [], KeyboardInterrupt(), 2)
    assert "0 of 2 points finished" in str(stopped)
    assert (out / "sweep.csv").read_text().splitlines() == ["scenario.seed,scenario_hash,makespan"]
    with pytest.raises(InputError, match=r"no point finished: the sweep was interrupted before the first"):
        plot_sweep_folder(out)


def test_a_ctrl_c_after_the_last_point_keeps_every_point_and_says_so(tmp_path, monkeypatch):
    """Tester t5 of session 26: a Ctrl-C after the last point had come back, while the table was being written, said
    "interrupted; nothing partial was kept" and left neither sweep.csv nor incomplete.txt; it is now the account of
    an interrupted sweep, as between points (all points kept, no point running), and the rerun completes the table."""
    sw = load_sweep(make(tmp_path, '"scenario.seed" = [1, 2]'))
    out = tmp_path / "out"
    write_tables = sweep_module._write_tables
    calls: list[int] = []

    def ctrl_c_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return write_tables(*args, **kwargs)

    monkeypatch.setattr(sweep_module, "_write_tables", ctrl_c_once)
    with pytest.raises(Interrupted) as info:
        run_sweep(sw, out)
    text = str(info.value)
    assert text.startswith("sweep sweep interrupted by SIGINT: 2 of 2 points finished and are kept"), text
    assert "running point" not in text and text.endswith("to run only the missing points"), text
    assert len((out / "sweep.csv").read_text().splitlines()) == 3 and (out / "incomplete.txt").is_file()
    monkeypatch.setattr(sweep_module, "_write_tables", write_tables)
    messages: list[str] = []
    run_sweep(sw, out, progress=messages.append)
    assert "2 of 2 points done (0 this run, 2 skipped as already done)" in messages[-1], messages
    assert not (out / "incomplete.txt").exists()


def test_a_scheduler_implies_the_dask_executor(tmp_path):
    sw = load_sweep(make(tmp_path, '"scenario.seed" = [1]', '[sweep]\nscheduler = "tcp://127.0.0.1:1"\n'))
    assert (sw.executor, sw.scheduler) == ("dask", "tcp://127.0.0.1:1")
    with pytest.raises(InputError, match=r"sweep\.scheduler: only used with the dask executor"):
        load_sweep(make(tmp_path, '"scenario.seed" = [1]', '[sweep]\nexecutor = "local"\nscheduler = "tcp://h:1"\n'))


def test_a_scenario_given_as_sweep_and_a_sweep_given_as_scenario_say_so(tmp_path):
    sweep = make(tmp_path, '"scenario.seed" = [1, 2]')
    with pytest.raises(InputError, match=r"base\.toml: \(file\): is a scenario, not a sweep file .*waitlab run"):
        load_sweep(tmp_path / "base.toml")
    with pytest.raises(InputError, match=r"sweep\.toml: \(file\): is a sweep file .*waitlab sweep"):
        load_scenario(sweep)
    (tmp_path / "again.toml").write_text('base = "sweep.toml"\n[grid]\n"scenario.seed" = [1]\n')
    with pytest.raises(InputError, match=r"is a sweep file"):  # a sweep whose base is a sweep
        load_sweep(tmp_path / "again.toml")


@pytest.mark.simgrid
def test_sweep_resumes_without_redoing_finished_runs(tmp_path):
    sw = load_sweep(make(tmp_path, '"scenario.seed" = [1, 2, 3]', "[sweep]\nworkers = 2\n"))
    out = tmp_path / "out"
    # an earlier run was interrupted: one point finished, another left a partial folder behind
    first = run_sweep(load_sweep(make(tmp_path, '"scenario.seed" = [1]')), out)
    assert len(first) == 1
    done = out / "runs" / sw.points[0].key
    stamp = (done / "events.parquet").stat().st_mtime_ns
    partial = out / "runs" / f".{sw.points[1].key}.partial-99999"
    partial.mkdir()
    (partial / "events.parquet").write_text("half-written")
    messages: list[str] = []
    table = run_sweep(sw, out, progress=messages.append)
    assert messages[0].endswith("3 points, 1 already done, 2 to run")
    assert (done / "events.parquet").stat().st_mtime_ns == stamp  # not redone
    assert sorted(table["scenario.seed"]) == [1, 2, 3]
    assert (out / "sweep.csv").read_text().count("\n") == 4
    assert all((out / "runs" / p.key / "run.json").exists() for p in sw.points)
    again: list[str] = []
    run_sweep(sw, out, progress=again.append)
    assert again[0].endswith("3 already done, 0 to run")


@pytest.mark.simgrid
def test_sweep_on_dask_local_cluster_matches_local(tmp_path):
    grid = '"application.steps" = [1, 2]'
    local = run_sweep(load_sweep(make(tmp_path, grid, "[sweep]\nworkers = 1\n")), tmp_path / "a")
    dask = run_sweep(load_sweep(make(tmp_path, grid, '[sweep]\nexecutor = "dask"\nworkers = 1\n')), tmp_path / "b")
    assert local.equals(dask)
    for key in local["scenario_hash"]:
        a = (tmp_path / "a" / "runs" / key / "events.parquet").read_bytes()
        assert a == (tmp_path / "b" / "runs" / key / "events.parquet").read_bytes()


@pytest.mark.simgrid
def test_workers_are_told_the_attempt_folder_by_its_absolute_path(tmp_path, monkeypatch):
    # a Dask worker runs in a folder of its own: with -o given relative, a relative attempt folder was looked for
    # there, and every point was said "stopped"
    told: list[str] = []

    class Recording(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
            told.append(args[2])
            return super().submit(fn, *args, **kwargs)

    sw = load_sweep(make(tmp_path, '"scenario.seed" = [1]'))
    monkeypatch.chdir(tmp_path)
    with Recording(max_workers=1) as ex:
        run_sweep(sw, Path("out"), executor=ex)
    assert len(told) == 1 and Path(told[0]).is_absolute() and Path(told[0]).parent == tmp_path / "out" / "runs"
    assert (tmp_path / "out" / "sweep.csv").is_file()


@pytest.mark.simgrid
def test_a_dask_sweep_beside_another_cluster_prints_no_port_warning(tmp_path, capfd):
    # another cluster (or notebook dashboard) holds 8787: distributed moves its HTTP port and warns; not ours to say
    held = socket.socket()
    try:
        held.bind(("", 8787))
        held.listen()
    except OSError:
        pass  # already held by something else: the same situation
    try:
        with warnings.catch_warnings(record=True) as seen:  # what a terminal would print
            warnings.simplefilter("always")
            with open_executor("dask", 1) as ex:
                assert ex.submit(sum, [1, 2]).result() == 3
    finally:
        held.close()
    assert not [w for w in seen if "already in use" in str(w.message)]
    assert "already in use" not in capfd.readouterr().err
