"""H-CWP-DM (Wu et al., formulas 3-5) on hand-computed cases (ideal replay)."""

from __future__ import annotations

import numpy as np
import pytest
from ideal_replay import chain_ops, ideal_replay, work

from waitlab.models.analysis.hcwpdm import considered_waits, hcwpdm
from waitlab.models.analysis.waitstates import make_events, wait_states
from waitlab.models.ops import OpBuilder


def test_three_hop_chain_blames_rank0_for_the_direct_wait_only():
    x = 0.75
    ev = ideal_replay(chain_ops(x))
    ws = wait_states(ev)
    res = hcwpdm(ev, ws)
    assert res.costs[["rank", "region"]].values.tolist() == [[0, "work"]]
    assert res.costs["cost"].iloc[0] == pytest.approx(x)
    w = res.waits.set_index("rank")
    assert w.loc[1, "explained"] == pytest.approx(x)
    # ranks 2 and 3 wait for ranks that were themselves waiting: no excess in the interval -> unexplained
    assert w.loc[2, "unexplained"] == pytest.approx(x) and w.loc[3, "unexplained"] == pytest.approx(x)
    assert res.unexplained == pytest.approx(2 * x)
    assert res.considered_wait == pytest.approx(3 * x)


def two_hotspots(ex_a: float, ex_b: float, n: int = 3):
    """Rank 0 is late at an allreduce by ex_a in region A and ex_b in region B (both 1 s on other ranks)."""
    b = OpBuilder(n)
    work(b, range(n), [1.0 + ex_a] + [1.0] * (n - 1), "A")
    work(b, range(n), [1.0 + ex_b] + [1.0] * (n - 1), "B")
    b.add("allreduce", range(n), value=8)
    ev = ideal_replay(b.build())
    return ev, wait_states(ev)


def test_two_hotspots_3_to_1_split_the_wait_3_to_1():
    ev, ws = two_hotspots(0.3, 0.1)
    res = hcwpdm(ev, ws, pairing="each")
    got = res.costs.groupby("region")["cost"].sum()
    # two waiting ranks, 0.4 s each, split 3:1
    assert got["A"] == pytest.approx(2 * 0.3) and got["B"] == pytest.approx(2 * 0.1)
    assert got["A"] / got["B"] == pytest.approx(3.0)


def test_earliest_pairing_considers_one_wait_per_collective():
    n = 4
    b = OpBuilder(n)
    work(b, range(n), [1.0, 1.2, 1.5, 2.0], "A")
    b.add("barrier", range(n))
    ev = ideal_replay(b.build())
    ws = wait_states(ev)
    assert sorted(ws["wait"].round(9).tolist()) == [0.5, 0.8, 1.0]
    assert considered_waits(ev, ws, "earliest").tolist() == [True, False, False]
    early = hcwpdm(ev, ws, pairing="earliest")
    each = hcwpdm(ev, ws, pairing="each")
    assert early.considered_wait == pytest.approx(1.0)  # rank 0 (earliest) waits 1 s for rank 3
    assert early.costs[["rank", "region", "cost"]].values.tolist() == [[3, "A", pytest.approx(1.0)]]
    assert each.considered_wait == pytest.approx(2.3)
    assert each.attributed == pytest.approx(2.3)


def test_non_hotspot_excess_is_not_blamed():
    """Region C holds < 1% of the time: its excess is ignored; the wait is split among hotspots only."""
    n = 2
    b = OpBuilder(n)
    work(b, range(n), [2.0, 1.0], "A")
    work(b, range(n), [0.002, 0.001], "C")  # 0.003 s of 3.0 s total compute: 0.1%
    b.add("barrier", range(n))
    ev = ideal_replay(b.build())
    ws = wait_states(ev)
    res = hcwpdm(ev, ws)
    assert "C" not in res.hotspots and "A" in res.hotspots
    assert res.costs[["region", "cost"]].values.tolist() == [["A", pytest.approx(1.001)]]
    assert hcwpdm(ev, ws, threshold=0.0).costs.set_index("region")["cost"]["C"] == pytest.approx(1.001 * 0.001
                                                                                                / 1.001)


def test_only_non_hotspot_excess_gives_unexplained():
    n = 2
    b = OpBuilder(n)
    work(b, range(n), [1.0, 1.0], "A")
    work(b, range(n), [0.003, 0.001], "C")
    b.add("barrier", range(n))
    ev = ideal_replay(b.build())
    ws = wait_states(ev)
    res = hcwpdm(ev, ws)
    assert res.costs.empty
    assert res.unexplained == pytest.approx(0.002)
    assert res.waits["unexplained"].tolist() == pytest.approx([0.002])


def test_threshold_and_pairing_are_validated():
    ev, ws = two_hotspots(0.1, 0.1)
    with pytest.raises(ValueError, match="pairing"):
        hcwpdm(ev, ws, pairing="latest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threshold"):
        hcwpdm(ev, ws, threshold=1.5)


def test_p2p_waits_are_all_considered():
    ev = ideal_replay(chain_ops(0.5, n=3))
    ws = wait_states(ev)
    assert considered_waits(ev, ws, "earliest").all()
    assert np.isclose(hcwpdm(ev, ws).considered_wait, 1.0)


def test_float_noise_of_equal_times_is_no_excess() -> None:
    # rank 2 is 0.5 s late; rank 0 waits for it, then computes 0.1 + 0.2 s and sends to rank 1, which computed 0.3 s
    # and waits 0.5 s.  Rank 0's compute equals rank 1's (its two parts sum to 0.30000000000000004 in floats): no
    # excess of rank 0, so none of rank 1's wait is blamed on it -- both waits go back to rank 2 (by hand)
    ev = make_events(rank=[0, 0, 0, 0, 1, 1, 2, 2],
                     op=["recv", "compute", "compute", "send", "compute", "recv", "compute", "send"],
                     enter=[0, 0.5, 0.6, 0.8, 0, 0.3, 0, 0.5], exit=[0.5, 0.6, 0.8, 0.8, 0.3, 0.8, 0.5, 0.5],
                     match=[0, -1, -1, 1, -1, 1, -1, 0], done=[0, -1, -1, 3, -1, 5, -1, 7],
                     peer=[2, -1, -1, 1, -1, 0, -1, 0])
    waits = wait_states(ev)
    assert waits["wait"].tolist() == pytest.approx([0.5, 0.5])
    for pairing in ("earliest", "each"):
        costs = hcwpdm(ev, waits, pairing=pairing).costs
        assert costs["rank"].tolist() == [2], pairing
