"""The one pipeline: sweeps vary every section, folders reload, diagnosis reads folders, --force is safe."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from scenario_files import imbalance_toml, scenario_toml

import waitlab
from waitlab.errors import InputError
from waitlab.experiments.scenario import load_scenario
from waitlab.simulator import program_run as sim_programs
from waitlab.simulator import replay as sim_replay
from waitlab.simulator.trace import write_trace

BASE = scenario_toml("pipe", 4, 'kind = "stencil"\nsteps = 2\ndims = 1\ncompute_seconds = 0.01\nhalo_bytes = 1024',
                     seed=2, more=imbalance_toml("1", 0.0))


def sweep_table(tmp_path: Path, base_extra: str, grid: str, name: str) -> pd.DataFrame:
    (tmp_path / f"{name}.toml").write_text(BASE + base_extra)
    (tmp_path / f"{name}-sweep.toml").write_text(f'base = "{name}.toml"\n[grid]\n{grid}\n[sweep]\nname = "{name}"\n'
                                                 "workers = 1\n")
    table = waitlab.sweep(tmp_path / f"{name}-sweep.toml", tmp_path / f"{name}-out", executor="local", workers=1)
    return table.sort_values(table.columns[0]).reset_index(drop=True)


@pytest.mark.simgrid
def test_imbalance_magnitude_sweep_adds_steps_times_magnitude(tmp_path: Path) -> None:
    t = sweep_table(tmp_path, "", '"application.imbalance[0].magnitude" = [0.0, 0.2]', "imb")
    # rank 1 computes 0.2 s longer in each of 2 steps; every step ends in an allreduce: +0.4 s (to within the
    # microseconds of halo messages that the late rank's neighbours no longer wait for)
    assert t["makespan"][1] - t["makespan"][0] == pytest.approx(0.4, abs=1e-5)
    assert t["total_wait"][1] - t["total_wait"][0] == pytest.approx(3 * 0.4, abs=1e-5)


@pytest.mark.simgrid
def test_instrumentation_cost_sweep_lengthens_the_run_by_the_records(tmp_path: Path) -> None:
    t = sweep_table(tmp_path, '\n[instrumentation]\nevents = "mpi"\nrecord_bytes = 64\n',
                    '"instrumentation.fixed_cost" = [1e-6, 1e-3]', "inst")
    # by hand: every rank records at least the allreduce that ends each of its 2 steps, and each record's cost
    # sits on that rank's own timeline, so the run is at least 2 x (1e-3 - 1e-6) s longer
    assert t["makespan"][1] - t["makespan"][0] >= 2 * (1e-3 - 1e-6)


@pytest.mark.simgrid
def test_noise_duration_sweep_lengthens_the_run(tmp_path: Path) -> None:
    t = sweep_table(tmp_path, '\n[noise]\nmodel = "periodic"\nfrequency = 100.0\nduration = 1e-5\nphase = 0.0\n',
                    '"noise.duration" = [1e-5, 1e-3]', "noise")
    # 20 ms of compute at 100 Hz meets 2 detours; 1 ms detours instead of 10 us: at least +2 x 0.99 ms
    assert t["makespan"][1] - t["makespan"][0] >= 2 * (1e-3 - 1e-5) * 0.99


@pytest.mark.simgrid
def test_tracing_tau_sweep_lengthens_the_run_by_the_swap_out_calls(tmp_path: Path) -> None:
    extra = ('\n[instrumentation]\nevents = "mpi"\nrecord_bytes = 64\n[tracing]\npolicy = "swapout_f"\n'
             'sync = "collectives"\nevery = 1\ntau = 0.01\n')
    t = sweep_table(tmp_path, extra, '"tracing.tau" = [0.01, 0.05]', "tau")
    # f (fixed duration tau) runs after each of the 2 allreduces on every rank: +2 x 0.04 s
    assert t["makespan"][1] - t["makespan"][0] == pytest.approx(2 * 0.04, rel=1e-3)


def test_a_key_the_scenario_cannot_take_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "b.toml").write_text(BASE)
    (tmp_path / "s.toml").write_text('base = "b.toml"\n[grid]\n"noise.duration" = [1e-5, 1e-4]\n')
    with pytest.raises(InputError, match="duration is not used by model = 'none'"):
        waitlab.load_sweep(tmp_path / "s.toml")
    (tmp_path / "s.toml").write_text('base = "b.toml"\n[grid]\n"application.imbalance[3].magnitude" = [1.0]\n')
    with pytest.raises(InputError, match=r"imbalance\[3\] does not exist"):
        waitlab.load_sweep(tmp_path / "s.toml")


class SmpiCounter:
    """Counts SMPI runs started anywhere in this process (replays and programs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        for mod in (sim_replay, sim_programs):
            orig = mod.run_smpirun

            def counted(*a: Any, _orig: Any = orig, **k: Any) -> Any:
                self.calls += 1
                return _orig(*a, **k)

            monkeypatch.setattr(mod, "run_smpirun", counted)


def _diagnose_counts(folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, Any]:
    counter = SmpiCounter(monkeypatch)
    with ThreadPoolExecutor(max_workers=1) as ex:
        diag = waitlab.diagnose(folder, executor=ex, use_cache=False)
    return counter.calls, diag


@pytest.mark.simgrid
@pytest.mark.parametrize("extra", ["", '\n[instrumentation]\nevents = "mpi"\nfixed_cost = 1e-4\n'])
def test_diagnose_reads_the_folder_and_simulates_only_counterfactuals(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str) -> None:
    p = tmp_path / "s.toml"
    p.write_text(BASE.replace("magnitude = 0.0", "magnitude = 0.1") + extra)
    waitlab.run(p, tmp_path / "out", png=False)
    calls, diag = _diagnose_counts(tmp_path / "out", monkeypatch)
    assert diag.truth is not None and diag.truth.simulated >= 1
    assert calls == diag.truth.simulated  # no base run re-simulated


@pytest.mark.simgrid
def test_diagnose_a_trace_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "s.toml"
    p.write_text(BASE.replace("magnitude = 0.0", "magnitude = 0.1"))
    src = waitlab.run(p).result
    index = write_trace(src.ops, 7.6e9, tmp_path / "trace")
    (tmp_path / "t.toml").write_text(f'[scenario]\nname = "tr"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                                     f'[application]\nkind = "trace"\ntrace = "{index}"\n')
    waitlab.run(tmp_path / "t.toml", tmp_path / "out", png=False)
    calls, diag = _diagnose_counts(tmp_path / "out", monkeypatch)
    assert calls == 0 and diag.truth is None  # a trace carries no injected causes: nothing to simulate
    assert any("nothing was injected" in n for n in diag.notes)


@pytest.mark.simgrid
def test_diagnose_a_program_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = Path(__file__).parent / "programs" / "late_sender.c"
    (tmp_path / "p.toml").write_text(f'[scenario]\nname = "prog"\nranks = 2\n[platform]\nname = "dawning_5000a"\n'
                                     f'[application]\nkind = "program"\nsources = ["{src}"]\n')
    waitlab.run(tmp_path / "p.toml", tmp_path / "out", png=False)
    loaded = waitlab.load_run(tmp_path / "out")
    assert loaded.scenario.application_kind == "program" and len(loaded.ops) > 0
    calls, diag = _diagnose_counts(tmp_path / "out", monkeypatch)
    assert calls == 0 and any("nothing was injected" in n for n in diag.notes)


@pytest.mark.simgrid
@pytest.mark.parametrize("extra", ["", '\n[noise]\nmodel = "periodic"\nfrequency = 200.0\nduration = 1e-4\n'])
def test_rerun_of_the_resolved_scenario_is_byte_identical(tmp_path: Path, extra: str) -> None:
    p = tmp_path / "s.toml"
    p.write_text(BASE + extra)
    waitlab.run(p, tmp_path / "a", png=False)
    waitlab.run(tmp_path / "a" / "scenario.toml", tmp_path / "b", png=False)
    for name in ("events.parquet", "waits.parquet", "ops.parquet", "ledger.parquet", "summary.json", "run.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert load_scenario(tmp_path / "b" / "scenario.toml").hash() == load_scenario(p).hash()


def test_force_never_replaces_a_folder_waitlab_did_not_write(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    (victim / "keep").mkdir(parents=True)
    (victim / "keep" / "file.txt").write_text("mine")
    p = tmp_path / "s.toml"
    p.write_text(BASE)
    with pytest.raises(InputError, match="did not write"):
        waitlab.run(p, victim, force=True)
    assert (victim / "keep" / "file.txt").read_text() == "mine"


@pytest.mark.parametrize("name", ["../../victim", "/abs", "", ".", "..", "a/b"])
def test_scenario_names_cannot_leave_the_results_folder(tmp_path: Path, name: str) -> None:
    p = tmp_path / "s.toml"
    p.write_text(BASE.replace('name = "pipe"', f"name = {json.dumps(name)}"))
    with pytest.raises(InputError) as err:
        load_scenario(p)
    assert err.value.field == "scenario.name"


def test_a_results_folder_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"schema_version": 999}))
    with pytest.raises(InputError, match="schema_version"):
        waitlab.load_run(tmp_path)


@pytest.mark.simgrid
def test_a_returned_run_has_left_no_scratch_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SMPI stage's scratch folder is removed on a thread while the run is finished; the run returns only once
    it is gone (here its removal is made slow, so a run that did not wait for it would return first)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    real = shutil.rmtree

    def slow(path: Any, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.5)
        real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", slow)
    (tmp_path / "s.toml").write_text(BASE)
    waitlab.run(tmp_path / "s.toml")
    assert not list(scratch.iterdir())
