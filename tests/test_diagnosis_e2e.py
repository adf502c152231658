"""Diagnosis through real SMPI (issue 4 acceptance): the 3-hop chain, the LARED-S-like case, the CLI."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from ideal_replay import chain_ops

from waitlab.cli import main
from waitlab.experiments.diagnosis.groundtruth import wait_metrics
from waitlab.experiments.pipeline import simulate
from waitlab.experiments.reproduce import wu_lared_s as lared_s
from waitlab.models.analysis.cwpdm import cwpdm
from waitlab.models.analysis.hcwpdm import hcwpdm
from waitlab.models.analysis.scoring import by_region
from waitlab.models.ops import CODE, OpTable

pytestmark = pytest.mark.simgrid

US = 1e-6


@pytest.fixture(autouse=True)
def _need_smpi() -> None:
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed (run: make setup)")


def test_three_hop_chain_through_smpi(replay):
    x = 0.5
    events, waits = replay(chain_ops(x))
    assert waits["wait"].to_numpy() == pytest.approx([x, x, x], abs=10 * US)
    res = cwpdm(events, waits)
    work = res.costs[(res.costs["rank"] == 0) & (res.costs["region"] == "work")].iloc[0]
    assert work["short"] == pytest.approx(x, abs=10 * US)
    assert work["long"] == pytest.approx(2 * x, abs=10 * US)
    assert res.attributed == pytest.approx(res.total_wait, rel=1e-9)
    # everything else CWP-DM blames is message latency (microseconds)
    assert res.costs["cost"].sum() - work["cost"] < 20 * US
    h = hcwpdm(events, waits)
    got = h.costs.set_index(["rank", "region"])["cost"]
    assert got[(0, "work")] == pytest.approx(x, abs=20 * US)  # the direct wait of rank 1 only
    # the indirect waits of ranks 2 and 3 are not explained by rank 0's work: H-CWP-DM puts them on the
    # few microseconds by which the intermediate ranks' receives exceed (a documented disagreement)
    assert float(got.drop((0, "work")).sum()) + h.unexplained == pytest.approx(2 * x, abs=30 * US)
    assert set(h.costs.loc[h.costs["region"] != "work", "region"]) <= {"MPI_Recv", "MPI_Send"}


def independent_eos_balance(ops: OpTable) -> OpTable:
    """Cap every rank's EOS segment compute at the step's mean -- built from the operation values alone
    (not from the cause ledger), the way the application model defines balanced EOS_Match segments."""
    value = ops.value.copy()
    is_compute = ops.code == CODE["compute"]
    for name in lared_s.EOS_REGIONS:
        rows = np.flatnonzero(is_compute & (ops.name == ops.names.index(name)))
        steps = ops.step[rows]
        for s in np.unique(steps):
            r = rows[steps == s]
            # the model draws integer visit counts: the mean visit time is the mean of the values
            value[r] = np.minimum(value[r], value[r].mean())
    return ops.replace_columns(value=value)


def test_lared_s_like_case_models_and_truth(tmp_path):
    rep = lared_s.reproduce(ranks=16, steps=2, seed=1, cache_dir=tmp_path / "cache")
    diag = rep.diagnosis
    eos = set(lared_s.EOS_REGIONS)
    for key in ("cwpdm", "hcwpdm", "hcwpdm_each"):
        top2 = set(by_region(diag.model(key).blame()).index[:2])
        assert top2 == eos, key
    assert set(rep.figures["truth"]["top2"]) == eos
    # the paper compares the models' memory too: reproduce measures it (never a 0.0 MiB it did not measure)
    assert rep.figures["hcwpdm"]["peak_mib"] > 0 and rep.figures["cwpdm"]["peak_mib"] > 0
    # the report's ground truth vs an independent counterfactual run (no cache, no executor, no ledger)
    run = simulate(rep.scenario)
    indep = simulate(rep.scenario, ops=independent_eos_balance(run.ops))
    base = wait_metrics(run.events, run.waits)["total_wait"]
    independent = base - wait_metrics(indep.events, indep.waits)["total_wait"]
    reported = diag.truth.cost_of(lared_s.EOS_SET)
    assert independent > 0
    assert reported == pytest.approx(independent, rel=0.10)
    # the paper's gap: balancing EOS_Match realizes less than H-CWP-DM predicts
    assert rep.figures["truth"]["realized_largest"] < rep.figures["hcwpdm"]["eos_share"]
    files = lared_s.write(rep, tmp_path / "out", png=False)
    assert (tmp_path / "out" / "lared_s.md").read_text().count("| ") > 20
    assert {f.name for f in files} >= {"lared_s.md", "lared_s.json", "diagnosis.json", "diagnosis.md"}


def test_cli_run_then_diagnose_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path / "cache"))
    toml = tmp_path / "s.toml"
    toml.write_text('[scenario]\nname = "d8"\nranks = 8\nseed = 2\n[platform]\nname = "wu_cluster"\n'
                    '[application]\nkind = "lared_s"\nsteps = 2\n')
    assert main(["run", str(toml), "-o", str(tmp_path / "out"), "--no-png"]) == 0
    assert main(["diagnose", str(tmp_path / "out"), "--workers", "1", "--candidates", "2"]) == 0
    report = tmp_path / "out" / "diagnosis"
    assert {p.name for p in report.iterdir()} == {"diagnosis.json", "diagnosis.md", "blame_by_region.png",
                                                 "culprit_timeline.png", "timing.json", ".waitlab"}  # .waitlab: record
    data = json.loads((report / "diagnosis.json").read_text())
    assert set(data["models"]) == {"cwpdm", "hcwpdm", "hcwpdm_each"}
    assert data["truth"]["all_causes"] > 0
    assert data["notes"] == []  # operations regenerated and matched the folder's event table
    # a second diagnosis is served from the counterfactual cache
    capsys.readouterr()
    again = ["diagnose", str(tmp_path / "out"), "-o", str(tmp_path / "again"), "--no-png", "--candidates", "2"]
    assert main(again) == 0
    assert "counterfactual runs: 0 simulated," in capsys.readouterr().out
    assert Path(tmp_path / "again" / "diagnosis.md").exists()


def test_a_trace_without_operations_runs_and_diagnoses_without_a_warning(tmp_path: Path, capsys):
    # no rank does anything: no event, no wait; every step of run and diagnose must still work, silently
    (tmp_path / "trace.txt").write_text("0 init\n1 init\n")
    (tmp_path / "s.toml").write_text('[scenario]\nname = "idle"\nranks = 2\n[platform]\nname = "dawning_5000a"\n'
                                     '[application]\nkind = "trace"\ntrace = "trace.txt"\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["run", str(tmp_path / "s.toml"), "-o", str(tmp_path / "run"), "-q"]) == 0
        assert main(["diagnose", str(tmp_path / "run"), "-q"]) == 0
        assert main(["export", str(tmp_path / "run"), "--graphml", "--chrome"]) == 0
    assert [str(w.message) for w in caught] == []
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["events"] == 0
    md = (tmp_path / "run" / "diagnosis" / "diagnosis.md").read_text()
    assert "of wait (no operation: the run has no wait)" in md and "MPI_)" not in md
