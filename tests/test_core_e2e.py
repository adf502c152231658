"""Hand-computed end-to-end cases through real SMPI (issue 2 acceptance)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SPEED, star_platform

from waitlab.models.analysis.summary import rank_budget
from waitlab.models.ops import OpBuilder
from waitlab.simulator.replay import replay_ops

pytestmark = pytest.mark.simgrid

US = 1e-6


def test_late_sender_equals_extra_work(replay):
    x = 0.375
    b = OpBuilder(2)
    b.add("enter", [0, 1], region="work")
    b.add("compute", [0, 1], value=[1.0 + x, 1.0], excess=[x, 0.0], region="work")
    b.add("leave", [0, 1], region="work")
    b.add("send", 0, peer=1, tag=7, value=64)
    b.add("recv", 1, peer=0, tag=7, value=64)
    events, waits = replay(b.build())
    assert len(waits) == 1
    w = waits.iloc[0]
    assert (w["rank"], w["pattern"], w["op"], w["peer_rank"]) == (1, "late_sender", "recv", 0)
    assert w["wait"] == pytest.approx(x, abs=US)
    # the receive began when rank 1 finished its 1 s of work: formula (1) Enter(send) - Enter(recv)
    recv = events.iloc[int(w["event"])]
    assert recv["enter"] == pytest.approx(1.0, abs=1e-9)


def test_balanced_single_step_has_zero_wait(replay):
    n = 8
    b = OpBuilder(n)
    ranks = np.arange(n)
    b.add("compute", ranks, value=0.5, region="solve")
    b.add("isend", ranks, peer=(ranks + 1) % n, value=1024)
    b.add("irecv", ranks, peer=(ranks - 1) % n, value=1024)
    b.add("waitall", ranks)
    b.add("allreduce", ranks, value=8, value2=8)
    _, waits = replay(b.build())
    assert waits["wait"].sum() == 0.0


def test_balanced_multi_step_waits_only_collective_skew(replay):
    """With equal work, the only waits are the exit skew of the previous allreduce (tree algorithm)."""
    n, steps = 8, 5
    b = OpBuilder(n)
    ranks = np.arange(n)
    for s in range(steps):
        b.add("compute", ranks, step=s, value=0.1, region="solve")
        b.add("allreduce", ranks, step=s, value=8, value2=8)
    _, waits = replay(b.build())
    # a binomial allreduce of 8 ranks has 2*log2(8) = 6 latency+transfer hops of ~1 us each
    assert waits["wait"].max() < 20 * US


def test_allreduce_late_rank_makes_everyone_wait(replay):
    x = 0.2
    extra = np.array([x, 0.0, 0.05, 0.1])
    b = OpBuilder(4)
    b.add("compute", range(4), value=1.0 + extra, excess=extra, region="solve")
    b.add("allreduce", range(4), value=8, value2=8)
    _, waits = replay(b.build())
    got = dict(zip(waits["rank"].tolist(), waits["wait"].tolist(), strict=True))
    assert set(got) == {1, 2, 3}
    for r in (1, 2, 3):
        assert got[r] == pytest.approx(x - extra[r], abs=US)
    assert (waits["pattern"] == "wait_at_nxn").all()
    assert (waits["peer_rank"] == 0).all()


def test_pipeline_propagates_wait_to_ranks_without_extra_work(replay):
    """A chain 0 -> 1 -> 2 -> 3 where only rank 0 works X longer: ranks 1..3 all wait about X."""
    x = 0.5
    n = 4
    b = OpBuilder(n)
    b.add("compute", range(n), value=[1.0 + x, 1.0, 1.0, 1.0], excess=[x, 0, 0, 0], region="sweep")
    for r in range(n - 1):
        b.add("send", r, peer=r + 1, value=8)
        b.add("recv", r + 1, peer=r, value=8)
    events, waits = replay(b.build())
    ls = waits[waits["pattern"] == "late_sender"].set_index("rank")["wait"]
    assert sorted(ls.index) == [1, 2, 3]
    for r in (1, 2, 3):
        assert ls[r] == pytest.approx(x, abs=10 * US)
    assert (events.loc[events["rank"] > 0, "excess"] == 0).all()


def test_time_budget_adds_up_to_makespan(replay):
    b = OpBuilder(3)
    b.add("compute", range(3), value=[0.3, 0.1, 0.2], region="a")
    b.add("barrier", range(3))
    b.add("compute", range(3), value=[0.1, 0.4, 0.0], region="b")
    events, waits = replay(b.build())
    budget = rank_budget(events, waits)
    makespan = events["exit"].max()
    total = budget[["compute", "perturbation", "communication", "wait", "idle"]].sum(axis=1)
    np.testing.assert_allclose(total, makespan, atol=1e-12)
    assert (budget[["compute", "communication", "wait", "idle"]] >= -1e-12).all().all()
    np.testing.assert_allclose(budget["compute"], [0.4, 0.5, 0.2], atol=1e-9)


def test_regions_nest_with_paths(replay):
    b = OpBuilder(2)
    b.add("enter", [0, 1], region="outer")
    b.add("enter", [0, 1], region="inner")
    b.add("compute", [0, 1], value=[0.25, 0.5], region="inner")
    b.add("leave", [0, 1], region="inner")
    b.add("compute", [0, 1], value=0.125, region="outer")
    b.add("leave", [0, 1], region="outer")
    b.add("barrier", [0, 1])
    events, _ = replay(b.build())
    r0 = events[events["rank"] == 0].reset_index(drop=True)
    assert r0["kind"].tolist() == ["region", "region", "compute", "compute", "mpi"]
    assert r0["path"].tolist() == ["outer", "outer>inner", "outer>inner", "outer", ""]
    assert r0["depth"].tolist() == [0, 1, 2, 1, 0]
    outer, inner = r0.iloc[0], r0.iloc[1]
    assert (outer["enter"], outer["exit"]) == pytest.approx((0.0, 0.375), abs=1e-9)
    assert (inner["enter"], inner["exit"]) == pytest.approx((0.0, 0.25), abs=1e-9)


def test_same_ops_give_identical_event_tables(replay):
    rng = np.random.default_rng(3)
    b = OpBuilder(6)
    for s in range(3):
        b.add("compute", range(6), step=s, value=rng.uniform(0.1, 0.2, 6), region="w")
        b.add("alltoall", range(6), step=s, value=4096, value2=4096)
    ops = b.build()
    e1, w1 = replay(ops)
    e2, w2 = replay(ops)
    assert e1.equals(e2) and w1.equals(w2)


def test_region_markers_outside_smpi_give_the_same_timelines(tmp_path):
    """Markers replayed by SMPI and markers reconstructed from neighbouring actions agree exactly."""


    rng = np.random.default_rng(5)
    b = OpBuilder(4)
    for s in range(3):
        b.add("enter", range(4), step=s, region="step")
        b.add("enter", range(4), step=s, region="a")
        b.add("compute", range(4), step=s, value=rng.uniform(0.1, 0.3, 4), region="a")
        b.add("leave", range(4), step=s, region="a")
        b.add("isend", range(4), step=s, peer=[1, 2, 3, 0], value=2048)
        b.add("irecv", range(4), step=s, peer=[3, 0, 1, 2], value=2048)
        b.add("waitall", range(4), step=s)
        b.add("leave", range(4), step=s, region="step")
        b.add("allreduce", range(4), step=s, value=8, value2=8)
    ops = b.build()
    xml, hostfile = star_platform(tmp_path, 4)
    fast = replay_ops(ops, xml, hostfile, SPEED, work=tmp_path / "a")
    full = replay_ops(ops, xml, hostfile, SPEED, work=tmp_path / "b", markers_in_trace=True)
    assert fast.events.equals(full.events)
