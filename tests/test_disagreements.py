"""Documented cases where a diagnosis model disagrees with the counterfactual ground truth.

Each case is small enough to compute by hand (ideal network: free eager messages, collectives end when
the last rank arrives) and is described in docs/diagnosis.md, section "When the models are wrong".
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from ideal_replay import chain_ops, ideal_replay, ideal_rerun

from waitlab.experiments.diagnosis.groundtruth import ground_truth, wait_metrics
from waitlab.experiments.scenario import Scenario, from_mapping
from waitlab.models.analysis.cwpdm import cwpdm
from waitlab.models.analysis.hcwpdm import hcwpdm
from waitlab.models.analysis.scoring import by_rank_region, by_region
from waitlab.models.analysis.waitstates import wait_states
from waitlab.models.ops import OpBuilder, OpTable


@pytest.fixture
def scenario() -> Scenario:
    return from_mapping({"scenario": {"name": "hand", "ranks": 3, "seed": 0}, "platform": {"name": "dawning_5000a"},
                         "application": {"kind": "stencil", "steps": 1}}, "hand")


def truth(scenario: Scenario, ops: OpTable, tmp_path):
    ev = ideal_replay(ops)
    ws = wait_states(ev)
    with ThreadPoolExecutor(1) as ex:
        gt = ground_truth(scenario, ops, wait_metrics(ev, ws), candidates=[(0, "A"), (1, "A")], executor=ex,
                          cache_dir=tmp_path, rerun=ideal_rerun)
    return ev, ws, gt


def region(b: OpBuilder, rank: int, seconds: float, name: str) -> None:
    b.add("enter", rank, region=name)
    b.add("compute", rank, value=seconds, excess=seconds, region=name)
    b.add("leave", rank, region=name)


def test_case1_a_message_without_a_wait_does_not_cut_the_interval(scenario, tmp_path):
    """Rank 1 sends m1 to rank 0 at t=0 and waits for m2.  Rank 0 works 2 s in "early", receives m1, works
    1 s in "late", sends m2 at t=3: rank 1 waits 3 s.  Truth: without "early" rank 1 waits 1 s (cost 2 s);
    without "late" 2 s (cost 1 s).  m1 arrived without a wait: it is no synchronization point (Wu et al.'s
    definition, as Scalasca), so rank 0's interval reaches back to its start and both models see both regions:
    CWP-DM and H-CWP-DM give early 2 s and late 1 s, the truth.  (When every message was a synchronization
    point, the interval started at m1's receive: CWP-DM blamed late 1 s and left 2 s unexplained, H-CWP-DM
    gave late the whole 3 s.)"""
    b = OpBuilder(2)
    b.add("send", 1, peer=0, tag=1, value=8)
    region(b, 0, 2.0, "early")
    b.add("recv", 0, peer=1, tag=1, value=8)
    region(b, 0, 1.0, "late")
    b.add("send", 0, peer=1, tag=2, value=8)
    b.add("recv", 1, peer=0, tag=2, value=8)
    ev, ws, gt = truth(scenario, b.build(), tmp_path)
    assert gt.cost("region").to_dict() == pytest.approx({"early": 2.0, "late": 1.0})
    c = cwpdm(ev, ws)
    assert by_region(c.blame()).to_dict() == pytest.approx({"early": 2.0, "late": 1.0})
    assert c.unexplained == pytest.approx(0.0)
    assert by_region(hcwpdm(ev, ws).blame()).to_dict() == pytest.approx({"early": 2.0, "late": 1.0})


def test_case2_indirect_waits_hcwpdm_cannot_follow_the_chain(scenario, tmp_path):
    """The 3-hop chain: rank 0 works x longer; ranks 1, 2, 3 each wait x.  Removing rank 0's excess removes
    all 3x.  CWP-DM: 3x (short x + long 2x).  H-CWP-DM: x; the 2x of indirect wait is unexplained on an
    ideal network and blamed on the intermediate ranks' receives under SMPI (tests/test_diagnosis_e2e.py)."""
    x = 0.5
    ev, ws, gt = truth(scenario, chain_ops(x), tmp_path)
    assert gt.cost("rank_region").to_dict() == pytest.approx({(0, "work"): 3 * x})
    assert cwpdm(ev, ws).attributed == pytest.approx(3 * x)
    h = hcwpdm(ev, ws)
    assert h.attributed == pytest.approx(x) and h.unexplained == pytest.approx(2 * x)


def test_case3_second_straggler_per_rank_blame_is_not_actionable(scenario, tmp_path):
    """Ranks 0 and 1 are late at a barrier by 1.0 s and 0.9 s in region A (rank 2 is not).  Waits: rank 1
    0.1 s, rank 2 1.0 s.  Both models blame (rank 0, A).  Truth per (rank, region): removing rank 0's
    excess makes rank 1 the last one and rank 0 a waiter: the total wait grows to 1.8 s (cost -0.7 s);
    only balancing region A on every rank removes the 1.1 s."""
    b = OpBuilder(3)
    b.add("enter", range(3), region="A")
    b.add("compute", range(3), value=[2.0, 1.9, 1.0], excess=[1.0, 0.9, 0.0], region="A")
    b.add("leave", range(3), region="A")
    b.add("barrier", range(3))
    ev, ws, gt = truth(scenario, b.build(), tmp_path)
    assert gt.cost("rank_region").to_dict() == pytest.approx({(0, "A"): -0.7, (1, "A"): -0.9})
    assert gt.cost("region").to_dict() == pytest.approx({"A": 1.1})
    assert by_rank_region(cwpdm(ev, ws).blame()).to_dict() == pytest.approx({(0, "A"): 1.1})
    assert by_rank_region(hcwpdm(ev, ws).blame()).to_dict() == pytest.approx({(0, "A"): 1.0})
