"""Noise edge cases found by the t6 tester: detours that leave a host no time to compute, and the time budget of
detour noise (models/perturb/detours.py, noise.py, stage.py, experiments/perturbation.py,
models/analysis/summary.py, experiments/pipeline.py).  Expected values are worked out by hand in the comments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from waitlab.cli import main
from waitlab.errors import InputError
from waitlab.experiments.perturbation import parse_perturbation
from waitlab.experiments.pipeline import run as run_pipeline
from waitlab.experiments.scenario import from_mapping
from waitlab.models.analysis.summary import detour_seconds, rank_budget, summarize
from waitlab.models.analysis.waitstates import make_events, wait_states
from waitlab.models.ops import CAUSE_KINDS
from waitlab.models.perturb import detours as dt
from waitlab.models.perturb import noise as nz
from waitlab.models.perturb.stage import NoiseConfig, PlatformFacts, noise_setup

SCENARIO = """[scenario]
ranks = 2
seed = 1
[platform]
name = "dawning_5000a"
ranks_per_node = 1
[application]
kind = "stencil"
dims = 1
steps = 3
compute_seconds = 0.1
halo_bytes = 8
"""


def refused(tmp_path: Path, lines: str, noise: dict[str, Any], field: str = "noise.period") -> InputError:
    (tmp_path / "n.txt").write_text(lines)
    with pytest.raises(InputError) as info:
        parse_perturbation({"noise": {"model": "signature", "file": "n.txt", **noise}}, str(tmp_path / "s.toml"))
    err = info.value
    assert err.file == str(tmp_path / "s.toml") and err.field == field, str(err)
    assert "\n" not in str(err) and "n.txt" in err.problem and "n.txt" in err.fix
    return err


# -- 1 and 2: a signature that covers its whole period ---------------------------------------------------------


def test_uncovered_time_by_hand() -> None:
    # the tester's adj.txt: [0, 0.25) and [0.25, 0.5) touch and fill the 0.5 s period: nothing free, exactly
    assert dt.uncovered_time([0.0, 0.25], [0.25, 0.25], 0.5) == 0.0
    assert dt.uncovered_time([0.0], [0.5], 0.5) == 0.0  # long.txt: one detour as long as the period
    # out of order and overlapping: [0.3, 0.5), [0, 0.2), [0.1, 0.35) cover [0, 0.5)
    assert dt.uncovered_time([0.3, 0.0, 0.1], [0.2, 0.2, 0.25], 0.5) == 0.0
    # [0.1, 0.2) and [0.3, 0.4) of 0.5 s leave 0.1 + 0.1 + 0.1 = 0.3 s
    assert dt.uncovered_time([0.1, 0.3], [0.1, 0.1], 0.5) == pytest.approx(0.3, abs=1e-15)
    # adj2.txt: a 1e-7 s gap between [0, 0.25) and [0.25, 0.4999999)... then 1e-7 s at the end
    assert dt.uncovered_time([0.0, 0.25], [0.25, 0.2499999], 0.5) == pytest.approx(1e-7, rel=1e-6)


def test_adjacent_detours_filling_the_period_are_refused(tmp_path: Path) -> None:
    err = refused(tmp_path, "0 0.25\n0.25 0.25\n", {"period": 0.5})
    assert "cover the whole period (0.5 s)" in err.problem and "never compute" in err.problem
    assert "period = 1" in err.fix  # twice the period: half of it free


def test_one_detour_as_long_as_the_period_is_refused_with_or_without_a_period(tmp_path: Path) -> None:
    err = refused(tmp_path, "0 0.5\n", {"period": 0.5})
    assert "cover the whole period (0.5 s)" in err.problem
    # no period: it defaults to the end of the last detour, 0.5 s, which the detour fills
    err = refused(tmp_path, "0 0.5\n", {})
    assert "noise.period absent, so the end of the last detour: 0.5 s" in err.problem


def test_a_free_time_below_the_timing_precision_is_refused(tmp_path: Path) -> None:
    # [0, 0.25) and [0.2500000005, 0.5): 5e-10 s free per period, below the default 1e-9 s precision
    err = refused(tmp_path, "0 0.25\n0.2500000005 0.2499999995\n", {"period": 0.5})
    assert "leave 5e-10 s of the period (0.5 s) free" in err.problem and "timing precision (1e-09 s" in err.problem


def test_a_small_free_time_still_runs(tmp_path: Path) -> None:
    # the tester's adj2.txt: 1e-7 s free per 0.5 s period (a valid, very slow run)
    (tmp_path / "n.txt").write_text("0 0.25\n0.25 0.2499999\n")
    cfg = parse_perturbation({"noise": {"model": "signature", "file": "n.txt", "period": 0.5}},
                             str(tmp_path / "s.toml"))
    assert cfg.noise.model.period == 0.5


def test_the_signature_model_refuses_a_covered_period_itself() -> None:
    with pytest.raises(ValueError, match=r"cover the whole 0\.5 s period"):
        nz.SignatureNoise((0.0, 0.25), (0.25, 0.25), 0.5)
    with pytest.raises(ValueError, match=r"cover the whole 0\.5 s period"):
        nz.SignatureNoise((0.0,), (0.5,), 0.5)


def test_free_time_of_a_pattern() -> None:
    # period 0.5 with [0, 0.499) free 0.001; period 1 with [0.5, 0.75) free 0.75; no detours: inf
    p = dt.normalize(3, [0.5, 1.0, np.inf], [0, 1], [0.0, 0.5], [0.499, 0.25])
    assert p.free_time().tolist() == pytest.approx([0.001, 0.75, np.inf])
    # merged back to back, the two halves leave exactly 0
    assert dt.normalize(1, 0.5, [0, 0], [0.25, 0.0], [0.25, 0.25]).free_time().tolist() == [0.0]


def _facts(n: int = 2) -> PlatformFacts:
    return PlatformFacts(n_ranks=n, ranks_per_node=1, core_speed=1e9, host_of_rank=tuple(f"node-{r}" for r in range(n)),
                         node_of_rank=np.arange(n), node_memory=1e9, disk_bandwidth=1e8, disk_latency=0.0)


def test_poisson_detours_that_queue_over_the_whole_horizon_are_refused() -> None:
    # rate x duration = 9.99 x 0.1 = 0.999 < 1 is accepted, but with seed 5 the 0.1 s detours drawn over a 1.2 s
    # horizon queue back to back over all of it on both nodes: SimGrid would replay the profile for ever
    cfg = NoiseConfig(model=nz.PoissonNoise(9.99, 0.1))
    with pytest.raises(InputError) as info:
        noise_setup(cfg, _facts(), seed=5, horizon=1.2, file="s.toml")
    err = info.value
    assert err.field == "noise.rate" and "rate x duration = 0.999" in err.problem
    assert "node 0 (and 1 more)" in err.problem and "\n" not in str(err)
    # seed 1 leaves both nodes time to compute: drawn
    assert noise_setup(cfg, _facts(), seed=1, horizon=1.2).active


# -- 3: the time budget of detour noise --------------------------------------------------------------------------


def test_detours_move_from_compute_and_reductions_to_perturbation() -> None:
    # rank 0: compute [0, 10) with 9.9 s of detours in it, allreduce [10, 12) with 0.25 s of detours in its flops
    # rank 1: compute [0, 11) with 1 s of detours, an injected overhead record [11, 11.5) holding 0.2 s of detours,
    #         allreduce [11.5, 12)
    ev = make_events(rank=[0, 0, 1, 1, 1], op=["compute", "allreduce", "compute", "overhead", "allreduce"],
                     enter=[0.0, 10.0, 0.0, 11.0, 11.5], exit=[10.0, 12.0, 11.0, 11.5, 12.0], match=[-1, 0, -1, -1, 0])
    ev["cause"] = np.array([-1, -1, -1, 0, -1], np.int64)
    waits = wait_states(ev)  # rank 0 waits 11.5 - 10 = 1.5 s in the allreduce
    cols = ["compute", "perturbation", "communication", "wait", "idle"]
    before = rank_budget(ev, waits, 2)
    np.testing.assert_allclose(before[cols].to_numpy(), [[10.0, 0.0, 0.5, 1.5, 0.0], [11.0, 0.5, 0.5, 0.0, 0.0]],
                               atol=1e-12)
    got = rank_budget(ev, waits, 2, detour=[9.9, 0.25, 1.0, 0.2, 0.0])
    # rank 0: compute 10 - 9.9 = 0.1; perturbation 9.9 + 0.25 = 10.15; communication 2 - 1.5 - 0.25 = 0.25
    # rank 1: compute 11 - 1 = 10; perturbation 0.5 (the record, its 0.2 s of detours included) + 1 = 1.5
    np.testing.assert_allclose(got[cols].to_numpy(), [[0.1, 10.15, 0.25, 1.5, 0.0], [10.0, 1.5, 0.5, 0.0, 0.0]],
                               atol=1e-12)
    assert got[cols].sum(axis=1).tolist() == pytest.approx([12.0, 12.0])  # the makespan, on every rank
    totals = summarize(ev, waits, got)["totals"]
    assert totals["compute"] == pytest.approx(10.1) and totals["perturbation"] == pytest.approx(11.65)


def test_detour_seconds_are_summed_per_event_row() -> None:
    # events 0, 1, 2 stand for operation rows 4, 7, 9; hits: 0.5 s on row 9, 0.25 s on row 4, 0.5 s on row 9
    assert detour_seconds(3, [4, 7, 9], [9, 4, 9], [0.5, 0.25, 0.5]).tolist() == [0.25, 0.0, 1.0]
    assert detour_seconds(2, [0, 1], [], []).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="no event"):
        detour_seconds(1, [0], [3], [1.0])


def _one_rank(noise: dict[str, Any]) -> dict[str, Any]:
    return {"scenario": {"name": "one", "ranks": 1, "seed": 1}, "platform": {"name": "dawning_5000a"},
            "application": {"kind": "stencil", "dims": 1, "steps": 3, "compute_seconds": 0.1, "halo_bytes": 8},
            "noise": noise}


def _noise_ledger(res: Any) -> float:
    led = res.ops.ledger
    return float(led.seconds[led.kind == CAUSE_KINDS.index("noise")].sum())


@pytest.mark.simgrid
@pytest.mark.parametrize("noise", [
    {"model": "periodic", "frequency": 10.0, "duration": 0.05, "phase": 0.0},
    {"model": "signature", "file": "sig.txt", "period": 0.1, "offset": 0.0},
])
def test_one_rank_budget_of_half_duty_noise_by_hand(noise: dict[str, Any], tmp_path: Path) -> None:
    # a 0.05 s detour every 0.1 s from t = 0 (duty cycle 0.5).  Each 0.1 s compute starts in a detour: detour
    # [0, 0.05), work [0.05, 0.1), detour [0.1, 0.15), work [0.15, 0.2): 0.1 s of work, 0.1 s of noise, 0.2 s.
    # Three steps: makespan 0.6 s = compute 0.3 + perturbation 0.3 (the 1-rank allreduces take no time)
    (tmp_path / "sig.txt").write_text("0 0.05\n")
    mapping = _one_rank({**noise, "file": str(tmp_path / "sig.txt")} if "file" in noise else noise)
    res = run_pipeline(from_mapping(mapping)).result
    b = res.budget.iloc[0]
    assert res.summary["makespan"] == pytest.approx(0.6, abs=1e-9)
    assert b["compute"] == pytest.approx(0.3, abs=1e-9)  # the application's own work
    assert b["perturbation"] == pytest.approx(0.3, abs=1e-9)  # six 0.05 s detours
    assert b["communication"] == pytest.approx(0.0, abs=1e-9) and b["wait"] == 0.0
    assert b[["compute", "perturbation", "communication", "wait", "idle"]].sum() == pytest.approx(0.6, abs=1e-12)
    assert res.summary["totals"]["perturbation"] == pytest.approx(_noise_ledger(res), abs=1e-12)


@pytest.mark.simgrid
def test_poisson_noise_is_perturbation_too() -> None:
    mapping = _one_rank({"model": "poisson", "rate": 20.0, "duration": 0.01})
    mapping["scenario"]["ranks"] = 2
    mapping["platform"]["ranks_per_node"] = 1
    res = run_pipeline(from_mapping(mapping)).result
    noise = _noise_ledger(res)
    assert noise > 0.01  # some 0.01 s detours hit the 0.3 s of compute of each rank
    assert res.budget["compute"].tolist() == pytest.approx([0.3, 0.3], abs=1e-9)  # 3 x 0.1 s per rank
    assert res.budget["perturbation"].sum() == pytest.approx(noise, abs=1e-12)
    cols = ["compute", "perturbation", "communication", "wait", "idle"]
    assert res.budget[cols].sum(axis=1).tolist() == pytest.approx([res.summary["makespan"]] * 2, abs=1e-12)


@pytest.mark.simgrid
def test_the_testers_nearly_always_noise_in_summary_and_ranks(tmp_path: Path) -> None:
    # sc/n_per_nearly.toml: 100 Hz x 9.9 ms on the 2 x 3 x 0.1 s stencil: the own compute is 2 x 0.3 = 0.6 s and
    # the ~59.4 s perturbation.txt gives as injected noise is perturbation, not compute
    (tmp_path / "a.toml").write_text(SCENARIO + '[noise]\nmodel = "periodic"\nfrequency = 100.0\nduration = 0.0099\n')
    assert main(["run", str(tmp_path / "a.toml"), "-o", str(tmp_path / "a"), "-q"]) == 0
    text = (tmp_path / "a" / "summary.txt").read_text()
    injected = float((tmp_path / "a" / "perturbation.txt").read_text().split("injected: noise ")[1].split(" s")[0])
    assert injected > 50
    assert f"compute 0.6000, perturbation {injected:.4f}," in text
    ranks = np.loadtxt(tmp_path / "a" / "ranks.csv", delimiter=",", skiprows=1)
    assert ranks[:, 1].tolist() == pytest.approx([0.3, 0.3], abs=1e-9)


@pytest.mark.simgrid
@pytest.mark.parametrize("json", [False, True])
def test_run_refuses_the_testers_covering_signatures_in_one_line(tmp_path: Path, json: bool,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "adj.txt").write_text("0 0.25\n0.25 0.25\n")
    (tmp_path / "long.txt").write_text("0 0.5\n")
    limit = "[simulation]\ntimeout = 5\n"  # before the fix, adj.toml ran until this limit (default: an hour)
    (tmp_path / "adj.toml").write_text(SCENARIO + limit + '[noise]\nmodel = "signature"\nfile = "adj.txt"\n'
                                       'period = 0.5\n')
    (tmp_path / "full.toml").write_text(SCENARIO + limit + '[noise]\nmodel = "signature"\nfile = "long.txt"\n')
    for name, file in (("adj", "adj.txt"), ("full", "long.txt")):
        args = ["run", *(["--json"] if json else []), str(tmp_path / f"{name}.toml"), "-o", str(tmp_path / name), "-q"]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert "noise.period" in err and file in err and "fix: set noise.period above 0.5 s" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adj.toml", "adj.txt", "full.toml", "long.txt"]
