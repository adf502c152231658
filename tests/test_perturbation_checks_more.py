"""Perturbation checks found by robustness testing: detours SimGrid cannot resolve or count, [tracing] keys the
policy does not read, an empty [instrumentation] only (experiments/schema.py, experiments/perturbation.py,
models/perturb/stage.py).  Expected numbers are worked out by hand in the comments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.perturbation import parse_perturbation, perturbation_config
from waitlab.experiments.scenario import from_mapping, load_scenario
from waitlab.models.perturb import noise as nz
from waitlab.models.perturb.stage import MAX_DETOURS_PER_HOST, NoiseConfig, PlatformFacts, noise_setup

BASE: dict[str, Any] = {"scenario": {"name": "pb", "ranks": 4, "seed": 1},
                        "platform": {"name": "dawning_5000a", "ranks_per_node": 2},
                        "application": {"kind": "stencil", "steps": 3}}

BASE_TOML = """[scenario]
name = "pb"
ranks = 4
seed = 1
[platform]
name = "dawning_5000a"
ranks_per_node = 2
[application]
kind = "stencil"
steps = 3
"""


def refused(tables: dict[str, Any], field: str) -> InputError:
    with pytest.raises(InputError) as info:
        parse_perturbation(tables, "s.toml")
    assert info.value.file == "s.toml" and info.value.field == field, str(info.value)
    assert "\n" not in str(info.value)
    return info.value


# -- 7. detours shorter than the timing precision, and too many of them -------------------------------------------


def test_a_detour_shorter_than_the_timing_precision_is_refused() -> None:
    err = refused({"noise": {"model": "periodic", "frequency": 1e9, "duration": 1e-10}}, "noise.duration")
    assert "1e-10 s is shorter than the simulation's timing precision (1e-09 s" in err.problem
    assert "duration >= 1e-09 s" in err.fix and "timing_precision" in err.fix
    refused({"noise": {"model": "poisson", "rate": 1e3, "duration": 5e-10}}, "noise.duration")
    # at the precision itself: 1e-9 s detours every 1e-3 s are simulated
    cfg = parse_perturbation({"noise": {"model": "periodic", "frequency": 1e3, "duration": 1e-9}}, "s.toml")
    assert cfg.noise.model == nz.PeriodicNoise(1e3, 1e-9)


def test_the_gap_between_periodic_detours_must_be_resolvable_too() -> None:
    # 9e8 Hz: a period of 1.111e-9 s, minus a 1e-9 s detour leaves 1.1e-10 s < 1e-9 s
    err = refused({"noise": {"model": "periodic", "frequency": 9e8, "duration": 1e-9}}, "noise.frequency")
    assert "less than the simulation's timing precision" in err.problem
    # 5e8 Hz: 2e-9 - 1e-9 = 1e-9 s between detours: exactly the precision, accepted
    parse_perturbation({"noise": {"model": "periodic", "frequency": 5e8, "duration": 1e-9}}, "s.toml")


def test_the_scenarios_own_timing_precision_is_the_bound() -> None:
    noisy = {**BASE, "noise": {"model": "periodic", "frequency": 1e3, "duration": 1e-8}}
    assert perturbation_config(from_mapping(noisy)) is not None  # 1e-8 s >= the default 1e-9 s
    coarse = from_mapping({**noisy, "simulation": {"timing_precision": 1e-7}})
    with pytest.raises(InputError) as info:
        perturbation_config(coarse)
    assert info.value.field == "noise.duration" and "(1e-07 s, simulation.timing_precision)" in info.value.problem


def test_signature_detours_shorter_than_the_precision_are_refused(tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("0.0 0.001\n0.5 5e-10\n")
    with pytest.raises(InputError) as info:
        parse_perturbation({"noise": {"model": "signature", "file": "n.txt"}}, str(tmp_path / "s.toml"))
    assert info.value.file == str(tmp_path / "n.txt") and "1 detour(s) are shorter" in info.value.problem


def _facts(n: int = 4, rpn: int = 2) -> PlatformFacts:
    return PlatformFacts(n_ranks=n, ranks_per_node=rpn, core_speed=1e9,
                         host_of_rank=tuple(f"node-{r // rpn}" for r in range(n)), node_of_rank=np.arange(n) // rpn,
                         node_memory=1e9, disk_bandwidth=1e8, disk_latency=0.0)


def test_more_detours_per_host_than_the_bound_are_refused() -> None:
    # the tester's case with a fine enough precision: 1e9 Hz x 1e-10 s (10 % noise) over a 0.03 s run (horizon
    # 4 x 0.03 s), which the noise stretches to 0.03 / 0.9 s, gives 1e9 x 0.0333.. = 33,333,334 detours per host
    # (rounded up); at most 1e6 / (0.03 + 1e6 x 1e-10) = 33,222,591 Hz fits, said rounded down: 3.322e+07
    cfg = NoiseConfig(model=nz.PeriodicNoise(1e9, 1e-10))
    with pytest.raises(InputError) as info:
        noise_setup(cfg, _facts(), seed=1, horizon=4 * 0.03, file="s.toml")
    err = info.value
    assert err.field == "noise.frequency" and "give 33,333,334 detours per host" in err.problem
    assert "at most 1,000,000 per host" in err.problem and "frequency <= 3.322e+07" in err.fix
    assert MAX_DETOURS_PER_HOST == 1_000_000
    # 1 kHz x 10 us (1 % noise) over 989 s, stretched to 989 / 0.99 = 998.99 s: 998,990 detours, drawn; 991 s
    # (1,001.01 s stretched) is refused
    ok = NoiseConfig(model=nz.PeriodicNoise(1e3, 1e-5))
    assert noise_setup(ok, _facts(), seed=1, horizon=4 * 989.0).active
    with pytest.raises(InputError, match=r"noise\.frequency"):
        noise_setup(ok, _facts(), seed=1, horizon=4 * 991.0)


def test_poisson_and_signature_detours_are_counted_too() -> None:
    # 1e8 arrivals/s x 0.1 s = 1e7 per host (before any is drawn: no 4e7-element arrays per host)
    poisson = NoiseConfig(model=nz.PoissonNoise(1e8, 1e-9))
    with pytest.raises(InputError) as info:
        noise_setup(poisson, _facts(), seed=1, horizon=4 * 0.1)
    assert info.value.field == "noise.rate"
    # 1,000 detours of 0.1 us every 1 ms (10 % noise) over 2 s, stretched to 2 / 0.9 s: 2.2e6 per host; a
    # period P fits when 1,000 x 2 / (P - 1e-4) <= 1e6: P >= 0.002 + 0.0001 = 0.0021 s
    sig = NoiseConfig(model=nz.SignatureNoise(tuple(np.arange(1000) * 1e-6), (1e-7,) * 1000, 1e-3, 0.0))
    with pytest.raises(InputError) as info:
        noise_setup(sig, _facts(), seed=1, horizon=4 * 2.0)
    assert info.value.field == "noise.period" and "a period of at least 0.0021 s" in info.value.fix


@pytest.mark.simgrid
def test_run_refuses_the_tester_s_noise_without_a_results_folder(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    noise = '[noise]\nmodel = "periodic"\nfrequency = 1e9\nduration = 1e-10\n'
    (tmp_path / "a.toml").write_text(BASE_TOML + noise)
    assert main(["run", str(tmp_path / "a.toml"), "-o", str(tmp_path / "a"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "noise.duration" in err
    # with the precision refined below the detour, the count stops it (after the unperturbed run, in seconds)
    (tmp_path / "b.toml").write_text(BASE_TOML + noise + "[simulation]\ntiming_precision = 1e-11\n")
    assert main(["run", str(tmp_path / "b.toml"), "-o", str(tmp_path / "b"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "noise.frequency" in err and "detours per host" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.toml", "b.toml"]  # nothing partial left


# -- 8. [tracing] keys the policy does not read; [instrumentation] only = [] ----------------------------------------


@pytest.mark.parametrize(("tracing", "field", "users"), [
    ({"policy": "per_rank", "tau": 2.0}, "tracing.tau", "'swapout_f'"),
    ({"policy": "keep", "safety": 2.0}, "tracing.safety", "'predictive_sync'"),
    ({"policy": "predictive_sync", "fill_level": 0.5}, "tracing.fill_level", "'vampir_sync' or 'padded_sync'"),
    ({"policy": "vampir_sync", "every": "auto"}, "tracing.every", "'swapout_f'"),
    ({"policy": "padded_sync", "window": 3}, "tracing.window", "'predictive_sync'"),
    ({"policy": "keep", "tau": 1.0}, "tracing.tau", "'swapout_f'"),  # the default value, written by hand
])
def test_tracing_keys_of_other_policies_are_refused(tracing: dict[str, Any], field: str, users: str) -> None:
    err = refused({"tracing": tracing}, field)
    key = field.split(".")[1]
    assert err.problem == (f"{key} is not used by policy = {tracing['policy']!r} (only by {users}): remove it, or "
                           "choose the policy that uses it")


def test_tracing_keys_of_the_policy_are_taken() -> None:
    cfg = parse_perturbation({"tracing": {"policy": "swapout_f", "tau": 2.0, "every": 3, "sync": "steps"}})
    assert cfg.tracing is not None and (cfg.tracing.tau, cfg.tracing.every, cfg.tracing.sync) == (2.0, 3, "steps")
    cfg = parse_perturbation({"tracing": {"policy": "predictive_sync", "safety": 2.0, "window": 4}})
    assert cfg.tracing is not None and (cfg.tracing.safety, cfg.tracing.window) == (2.0, 4)


def test_tracing_files_of_the_tester_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "y.toml"
    path.write_text(BASE_TOML + '[instrumentation]\nrecord_bytes = 64\n[tracing]\npolicy = "per_rank"\n'
                    "buffer_bytes = 300000\ntau = 2.0\n")
    with pytest.raises(InputError) as info:
        load_scenario(path)
    assert info.value.file == str(path) and info.value.field == "tracing.tau"


def test_a_resolved_scenario_still_loads_and_keeps_its_hash() -> None:
    # scenario.toml of a results folder lists every key, the other policies' parameters at their defaults
    sc = from_mapping({**BASE, "instrumentation": {"events": "mpi"}, "tracing": {"policy": "per_rank"}})
    data = sc.resolved()
    assert data["tracing"]["tau"] == 1.0 and data["instrumentation"]["only"] == []
    again = from_mapping(data)
    assert again.hash() == sc.hash() and again.tracing == sc.tracing
    # a sweep point that switches the policy keeps the defaults; a changed parameter of another policy is refused
    assert sc.with_values({"tracing.policy": "keep"}).tracing.policy == "keep"  # type: ignore[union-attr]
    f = sc.with_values({"tracing.policy": "swapout_f", "tracing.tau": 3.0})
    with pytest.raises(InputError, match=r"tracing\.tau: tau is not used by policy = 'keep'"):
        f.with_values({"tracing.policy": "keep"})


def test_an_empty_only_is_refused() -> None:
    err = refused({"instrumentation": {"only": [], "fixed_cost": 1e-3}}, "instrumentation.only")
    assert "would record every event" in err.problem and 'events = "none"' in err.problem
    cfg = parse_perturbation({"instrumentation": {"only": ["recv"]}})
    assert cfg.instrumentation.only == ("recv",)


def test_the_disk_bandwidth_of_tracing_has_the_platforms_floor() -> None:
    err = refused({"tracing": {"disk_bandwidth": 0.5}}, "tracing.disk_bandwidth")
    assert err.problem == "must be >= 1.0, got 0.5"
    assert parse_perturbation({"tracing": {"disk_bandwidth": 1.0}}).tracing.disk_bandwidth == 1.0  # type: ignore[union-attr]
