"""Ground truth by counterfactual re-runs, the diagnosis report and its inputs -- without SimGrid.

Re-runs use the ideal-network replay (``tests/ideal_replay.py``) through a thread pool, so expected
values are hand-computable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from ideal_replay import chain_ops, ideal_replay, work

from waitlab.experiments.diagnosis.diagnose import diagnose
from waitlab.experiments.diagnosis.groundtruth import (
    Counterfactuals,
    ground_truth,
    ledger_frame,
    region_set,
    standard_sets,
    wait_metrics,
)
from waitlab.experiments.report.diagnosis_report import to_markdown, write_report
from waitlab.experiments.scenario import Scenario, from_mapping
from waitlab.models.analysis.waitstates import wait_states
from waitlab.models.ops import OpBuilder, OpTable

CALLS: list[int] = []


def ideal_rerun(scenario: Scenario, ops: OpTable, speed_profiles: Mapping[str, str] | None) -> dict[str, Any]:
    CALLS.append(1)
    ev = ideal_replay(ops)
    return wait_metrics(ev, wait_states(ev))


@pytest.fixture
def scenario() -> Scenario:
    return from_mapping({"scenario": {"name": "hand", "ranks": 4, "seed": 0}, "platform": {"name": "dawning_5000a"},
                         "application": {"kind": "stencil", "steps": 1}}, "hand")


def two_region_ops() -> OpTable:
    """3 ranks; rank 0 is 0.6 s late in A, rank 1 is 0.2 s late in B; then a barrier."""
    b = OpBuilder(3)
    b.add("enter", range(3), region="A")
    b.add("compute", range(3), value=[1.6, 1.0, 1.0], excess=[0.6, 0.0, 0.0], region="A")
    b.add("leave", range(3), region="A")
    b.add("enter", range(3), region="B")
    b.add("compute", range(3), value=[1.0, 1.2, 1.0], excess=[0.0, 0.2, 0.0], region="B", cause_kind="noise")
    b.add("leave", range(3), region="B")
    b.add("barrier", range(3))
    return b.build()


def test_chain_truth_is_all_waits(scenario, tmp_path):
    x = 0.5
    ops = chain_ops(x)
    ev = ideal_replay(ops)
    base = wait_metrics(ev, wait_states(ev))
    assert base["total_wait"] == pytest.approx(3 * x)
    with ThreadPoolExecutor(2) as ex:
        gt = ground_truth(scenario, ops, base, executor=ex, cache_dir=tmp_path, rerun=ideal_rerun)
    # the only cause is rank 0's x in "work": removing it removes every wait of the chain
    assert gt.all_causes == pytest.approx(3 * x)
    assert gt.cost("region").to_dict() == pytest.approx({"work": 3 * x})
    assert gt.cost("rank_region").to_dict() == pytest.approx({(0, "work"): 3 * x})
    assert gt.cost("kind").to_dict() == pytest.approx({"imbalance": 3 * x})


def test_region_and_kind_truth(scenario, tmp_path):
    ops = two_region_ops()
    ev = ideal_replay(ops)
    base = wait_metrics(ev, wait_states(ev))
    # barrier at 2.6 (rank 0), 2.2 (rank 1), 2.0 (rank 2): waits 0.4 + 0.6
    assert base["total_wait"] == pytest.approx(1.0)
    assert base["collective_max_wait"] == pytest.approx(0.6)
    with ThreadPoolExecutor(2) as ex:
        gt = ground_truth(scenario, ops, base, executor=ex, cache_dir=tmp_path, rerun=ideal_rerun)
    # without A's excess rank 1 is last (2.2): waits 0.2 + 0.2 -> cost 0.6; without B's: 2.6: waits 0.6+0.6 -> -0.2
    assert gt.cost("region")["A"] == pytest.approx(0.6)
    assert gt.cost("region")["B"] == pytest.approx(-0.2)
    assert gt.cost("kind").to_dict() == pytest.approx({"imbalance": 0.6, "noise": -0.2})
    assert gt.all_causes == pytest.approx(1.0)
    assert gt.cost("region", "considered_wait")["A"] == pytest.approx(0.4)
    assert gt.injected("region").to_dict() == pytest.approx({"A": 0.6, "B": 0.2})


def test_counterfactuals_are_cached_by_scenario_and_ops(scenario, tmp_path):
    ops = two_region_ops()
    led = ledger_frame(ops)
    sets = standard_sets(led)
    CALLS.clear()
    with ThreadPoolExecutor(1) as ex:
        cf = Counterfactuals(scenario, ops, executor=ex, cache_dir=tmp_path, rerun=ideal_rerun)
        first = cf.run(sets)
        # "all" / the two regions / the two kinds: kind:imbalance == region:A and kind:noise == region:B
        assert cf.simulated == 3 and len(CALLS) == 3
        again = Counterfactuals(scenario, ops, executor=ex, cache_dir=tmp_path, rerun=ideal_rerun)
        assert again.run(sets) == first
        assert again.simulated == 0 and len(CALLS) == 3
        other = Counterfactuals(scenario, ops, executor=ex, cache_dir=tmp_path / "x", rerun=ideal_rerun,
                                use_cache=False)
        other.run(sets[:1])
        assert other.simulated == 1 and not (tmp_path / "x").exists()
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 3 and all(f.name.startswith(scenario.hash()) for f in files)
    assert json.loads(files[0].read_text())["scenario_hash"] == scenario.hash()


def test_region_set_and_standard_sets_masks():
    led = ledger_frame(two_region_ops())
    assert region_set(led, ["A"], "balance").mask.tolist() == [True, False]
    labels = [s.label for s in standard_sets(led, candidates=[(0, "A"), (2, "A"), (0, "A")])]
    assert labels == ["all", "region:A", "region:B", "kind:imbalance", "kind:noise", "rank_region:0:A"]


def test_diagnose_scores_and_report(scenario, tmp_path):
    x, n = 0.4, 4
    b = OpBuilder(n)
    work(b, range(n), 0.5, "B")
    b.add("enter", range(n), region="A")
    b.add("compute", range(n), value=[1.0, 1.0, 1.0 + x, 1.0], excess=[0, 0, x, 0], region="A")
    b.add("leave", range(n), region="A")
    b.add("barrier", range(n))
    ops = b.build()
    ev = ideal_replay(ops)
    ws = wait_states(ev)
    with ThreadPoolExecutor(2) as ex:
        diag = diagnose(ev, ws, scenario=scenario, ops=ops, executor=ex, cache_dir=tmp_path / "cache",
                        rerun=ideal_rerun, memory=True)
    assert diag.culprits["cwpdm"] == ["A"] and diag.culprits["hcwpdm"] == ["A"]
    for key in ("cwpdm", "hcwpdm", "hcwpdm_each"):
        s = diag.scores[key]
        assert s["top_k_region"] == 1.0 and s["top_k_rank_region"] == 1.0
        assert s["relative_error_total"] == pytest.approx(0.0, abs=1e-12)
        assert s["false_blame_seconds"] == 0.0
        imp = diag.improvements[key]
        assert imp["predicted"] == pytest.approx(1.0) and imp["realized"] == pytest.approx(1.0)
    assert diag.model("cwpdm").result.attributed == pytest.approx((n - 1) * x)
    assert diag.model("hcwpdm").denominator == pytest.approx(x)
    files = write_report(diag, tmp_path / "report")
    assert sorted(f.name for f in files) == ["blame_by_region.png", "culprit_timeline.png", "diagnosis.json",
                                            "diagnosis.md"]
    data = json.loads((tmp_path / "report" / "diagnosis.json").read_text())
    assert data["models"]["cwpdm"]["by_region"] == pytest.approx({"A": (n - 1) * x})
    assert data["truth"]["by_region"] == pytest.approx({"A": (n - 1) * x})
    assert "## Predicted vs realized improvement" in to_markdown(diag)


def test_diagnose_without_truth_needs_no_scenario():
    ev = ideal_replay(chain_ops(0.3))
    diag = diagnose(ev, wait_states(ev), memory=False)
    assert diag.truth is None and diag.culprits["cwpdm"] == ["work"]
    assert diag.notes == ["no scenario or operations: ground truth skipped"]


@pytest.mark.parametrize("ranks", ["all", [1, 2], {"random": 2}, {"fraction": 0.5}, {"every": 2}])
def test_scenario_round_trips_through_run_json(ranks):
    sc = from_mapping({"scenario": {"name": "rt", "ranks": 8, "seed": 5},
                       "platform": {"name": "dawning_5000a", "ranks_per_node": 4},
                       "application": {"kind": "lared_s", "steps": 2,
                                       "imbalance": [{"region": "Hydro", "ranks": ranks, "magnitude": 0.5}]},
                       "simulation": {"config": {"smpi/async-small-thresh": 0}}}, "rt.toml")
    back = from_mapping(json.loads(json.dumps(sc.resolved())))
    assert back.hash() == sc.hash()
    assert np.array_equal(back.application.imbalance[0].selection.ranks, sc.application.imbalance[0].selection.ranks)


def test_diagnosis_json_gives_each_model_the_truth_in_its_own_measure(scenario, tmp_path):
    # 4 ranks; rank 2 is x = 0.4 s late in A before a barrier (ranks 0, 1, 3 wait 0.4 s each: 1.2 s, largest 0.4 s),
    # then rank 0 is y = 0.05 s late in B before it sends to rank 1 (a late-sender wait of 0.05 s).  The barrier
    # holds 1.2 / 1.25 = 96% of the wait, so H-CWP-DM (earliest) looks at the barrier only: its measure is the
    # largest barrier wait.  By hand, true cost per region:
    #   total wait:                   A 1.2, B 0.05
    #   largest barrier wait:         A 0.4, B 0     (B's excess changes no barrier wait)
    #   the generic "considered_wait" (largest collective wait + every point-to-point wait): A 0.4, B 0.05
    x, y, n = 0.4, 0.05, 4
    b = OpBuilder(n)
    b.add("enter", range(n), region="A")
    b.add("compute", range(n), value=[1.0, 1.0, 1.0 + x, 1.0], excess=[0, 0, x, 0], region="A")
    b.add("leave", range(n), region="A")
    b.add("barrier", range(n))
    b.add("enter", range(n), region="B")
    b.add("compute", range(n), value=[0.1 + y, 0.1, 0.1, 0.1], excess=[y, 0, 0, 0], region="B")
    b.add("leave", range(n), region="B")
    b.add("send", 0, peer=1, value=8)
    b.add("recv", 1, peer=0, value=8)
    ops = b.build()
    ev = ideal_replay(ops)
    with ThreadPoolExecutor(2) as ex:
        diag = diagnose(ev, wait_states(ev), scenario=scenario, ops=ops, executor=ex, cache_dir=tmp_path / "cache",
                        rerun=ideal_rerun, memory=False)
    write_report(diag, tmp_path / "report", png=False)
    data = json.loads((tmp_path / "report" / "diagnosis.json").read_text())
    measure = data["models"]["hcwpdm"]["compared_with"]
    assert measure == "considered_wait:barrier"
    assert data["models"]["cwpdm"]["compared_with"] == "total_wait"
    truth = data["truth"]
    assert truth["by_region"] == pytest.approx({"A": 3 * x, "B": y})
    assert truth["by_region_by_measure"][measure] == pytest.approx({"A": x, "B": 0.0}, abs=1e-12)
    assert truth["by_region_by_measure"]["total_wait"] == pytest.approx({"A": 3 * x, "B": y})
    assert truth["all_causes_by_measure"] == pytest.approx({measure: x, "total_wait": 3 * x + y})
    assert "by_region_considered" not in truth  # the generic measure (A 0.4, B 0.05) is no model's
    # the report's column and the scores use the same figures
    md = (tmp_path / "report" / "diagnosis.md").read_text()
    assert "| `B` | 0.05 | 0.05 | 0 |" in md
    assert diag.scores["hcwpdm"]["relative_error_total"] == pytest.approx(
        (diag.model("hcwpdm").attributed - x) / x, abs=1e-12)
