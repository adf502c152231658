"""CWP-DM on hand-computed cases (ideal replay) and its conservation invariants (hypothesis)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ideal_replay import chain_ops, ideal_replay, work

from waitlab.models.analysis.callpaths import exclusive_times
from waitlab.models.analysis.cwpdm import cwpdm
from waitlab.models.analysis.hcwpdm import hcwpdm
from waitlab.models.analysis.syncpoints import sync_points
from waitlab.models.analysis.waitstates import make_events, wait_states
from waitlab.models.ops import OpBuilder, OpTable

EXAMPLES = int(os.environ.get("WAITLAB_HYPOTHESIS_EXAMPLES", "60"))


def run(ops: OpTable) -> tuple[pd.DataFrame, pd.DataFrame]:
    ev = ideal_replay(ops)
    return ev, wait_states(ev)


def test_three_hop_chain_short_x_long_2x():
    x = 0.75
    ev, ws = run(chain_ops(x))
    assert ws["wait"].tolist() == pytest.approx([x, x, x])
    res = cwpdm(ev, ws)
    assert len(res.costs) == 1
    row = res.costs.iloc[0]
    assert (row["rank"], row["callpath"], row["region"]) == (0, "work", "work")
    assert row["short"] == pytest.approx(x)
    assert row["long"] == pytest.approx(2 * x)
    assert row["long_late_sender"] == pytest.approx(2 * x)
    w = res.waits.set_index("rank")
    assert w.loc[1, "direct"] == pytest.approx(x) and w.loc[1, "indirect"] == pytest.approx(0)
    for r in (2, 3):
        assert w.loc[r, "direct"] == pytest.approx(0) and w.loc[r, "indirect"] == pytest.approx(x)
    # ranks 1 and 2 passed their wait on; rank 3's wait is terminal
    assert w["propagating"].tolist() == pytest.approx([x, x, 0.0])
    assert w["terminal"].tolist() == pytest.approx([0.0, 0.0, x])
    assert w["phi"].tolist() == pytest.approx([2 * x, x, 0.0])
    assert res.attributed == pytest.approx(res.total_wait)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_barrier_late_rank_blames_region_n_minus_1_x(n):
    x, late = 0.4, n - 1
    b = OpBuilder(n)
    work = np.full(n, 1.0)
    work[late] += x
    b.add("enter", range(n), region="B")
    b.add("compute", range(n), value=0.5, region="B")
    b.add("leave", range(n), region="B")
    b.add("enter", range(n), region="A")
    b.add("compute", range(n), value=work, region="A")
    b.add("leave", range(n), region="A")
    b.add("barrier", range(n))
    ev, ws = run(b.build())
    res = cwpdm(ev, ws)
    assert res.costs[["rank", "region"]].values.tolist() == [[late, "A"]]
    assert res.costs["cost"].iloc[0] == pytest.approx((n - 1) * x)
    assert res.costs["short"].iloc[0] == pytest.approx((n - 1) * x)
    assert res.costs["long"].iloc[0] == pytest.approx(0.0)


def test_long_term_cost_kept_per_wait_type():
    """0 -> 1 late sender, then a barrier: rank 2's barrier wait comes from rank 1's inherited wait.

    Rank 0 works X longer in A and sends to 1; rank 1 then works C in "post", rank 0 only C/2, rank 2 C.
    Barrier arrivals: rank 0 at B+X+C/2, rank 1 at B+X+C (last), rank 2 at B+C.
    """
    x, base, c = 0.6, 1.0, 0.4
    b = OpBuilder(3)
    b.add("enter", range(3), region="A")
    b.add("compute", range(3), value=[base + x, base, base], region="A")
    b.add("leave", range(3), region="A")
    b.add("send", 0, peer=1, value=8)
    b.add("recv", 1, peer=0, value=8)
    b.add("enter", range(3), region="post")
    b.add("compute", range(3), value=[c / 2, c, c], region="post")
    b.add("leave", range(3), region="post")
    b.add("barrier", range(3))
    ev, ws = run(b.build())
    assert ws["wait"].sum() == pytest.approx(x + x + c / 2)
    res = cwpdm(ev, ws)
    got = res.costs.set_index(["rank", "region"])
    assert sorted(got.index) == [(0, "A"), (1, "post")]
    # rank 1's late-sender wait X is direct (short on 0/A); rank 2's barrier wait X is inherited (long on 0/A)
    assert got.loc[(0, "A"), "short"] == pytest.approx(x)
    assert got.loc[(0, "A"), "long"] == pytest.approx(x)
    assert got.loc[(0, "A"), "long_wait_at_barrier"] == pytest.approx(x)
    assert got.loc[(0, "A"), "long_late_sender"] == pytest.approx(0.0)
    # rank 0's barrier wait C/2 (measured from its send to rank 1) is rank 1's extra time in "post"
    assert got.loc[(1, "post"), "short"] == pytest.approx(c / 2)
    assert res.attributed == pytest.approx(res.total_wait)


def test_a_message_that_arrived_without_a_wait_is_no_synchronization_point():
    """Rank 1 sends m1 to rank 0 at t=0, then waits for m2; rank 0 computes 2 s, receives m1, computes 1 s,
    sends m2 at t=3.  m1 caused no wait: not a synchronization point, so rank 0's interval reaches back to its
    start and holds both regions (early 2 s, late 1 s): the 3 s wait is explained, nothing capped."""
    b = OpBuilder(2)
    b.add("send", 1, peer=0, tag=1, value=8)
    work(b, 0, 2.0, "early")
    b.add("recv", 0, peer=1, tag=1, value=8)
    work(b, 0, 1.0, "late")
    b.add("send", 0, peer=1, tag=2, value=8)
    b.add("recv", 1, peer=0, tag=2, value=8)
    ev, ws = run(b.build())
    assert ws["wait"].tolist() == pytest.approx([3.0])
    res = cwpdm(ev, ws)
    assert sorted(res.costs[["rank", "region", "short"]].values.tolist()) == [
        [0, "early", pytest.approx(2.0)], [0, "late", pytest.approx(1.0)]]
    assert res.waits["capped"].tolist() == pytest.approx([0.0])
    assert res.attributed == pytest.approx(3.0)


def test_a_message_that_caused_a_wait_is_a_synchronization_point():
    """As above, but m1 is late: rank 1 works 0.5 s in "first" before sending it, and rank 0, at its receive
    since t=0.25, waits 0.25 s for it there (a synchronization point of both ranks); rank 0 then works 1 s in
    "late" and sends m2 at t=1.5, which rank 1, waiting since t=0.5, receives 1 s late.  That wait's intervals
    start at m1 (rank 0 after its receive: late; rank 1 after its send: nothing), so "early", before m1, is not
    blamed for it: first 0.25 s (capped at its wait), late 1 s."""
    b = OpBuilder(2)
    work(b, 1, 0.5, "first")
    b.add("send", 1, peer=0, tag=1, value=8)
    work(b, 0, 0.25, "early")
    b.add("recv", 0, peer=1, tag=1, value=8)
    work(b, 0, 1.0, "late")
    b.add("send", 0, peer=1, tag=2, value=8)
    b.add("recv", 1, peer=0, tag=2, value=8)
    ev, ws = run(b.build())
    assert sorted(ws["wait"].tolist()) == pytest.approx([0.25, 1.0])
    res = cwpdm(ev, ws)
    got = {(r, reg): v for r, reg, v in res.costs[["rank", "region", "cost"]].values.tolist()}
    # rank 0's 0.25 s: first's 0.5 s excess over rank 0's interval, capped at the wait (s = 0.25 / 0.5)
    assert got == {(1, "first"): pytest.approx(0.25), (0, "late"): pytest.approx(1.0)}
    assert res.attributed == pytest.approx(1.25)


def test_sync_intervals_use_last_delimiter_with_the_partner():
    """Ring halo exchange (isend/irecv/waitall): in step 0 no message waits, so no synchronization point; the
    interval of rank 0's step-1 waitall wait (0.5 s for rank 2) starts at each rank's first row, and compares both
    steps' work: 2.5 s on rank 2 against 2 s on rank 0."""
    n = 3
    b = OpBuilder(n)
    r = np.arange(n)
    for s in range(2):
        work(b, r, [1.0, 1.0, 1.0 + 0.5 * s], "w")
        b.add("irecv", r, step=s, peer=(r - 1) % n, value=8)
        b.add("isend", r, step=s, peer=(r + 1) % n, value=8)
        b.add("waitall", r, step=s)
    ev, ws = run(b.build())
    # step 1: rank 2 is 0.5 s late, so rank 0 (its right neighbour) waits 0.5 s in its second waitall
    assert ws["rank"].tolist() == [0] and ws["wait"].tolist() == pytest.approx([0.5])
    sp = sync_points(ev, ws)
    assert sp.p_start.tolist() == [-1]  # before rank 0's first row
    assert sp.interval_times(int(sp.q_interval[0]))["w"] == pytest.approx(2.5)
    assert sp.interval_times(int(sp.p_interval[0]))["w"] == pytest.approx(2.0)
    res = cwpdm(ev, ws)
    assert res.costs[["rank", "region"]].values.tolist() == [[2, "w"]]
    assert res.costs["cost"].iloc[0] == pytest.approx(0.5)


# ---------------------------------------------------------------- conservation on random scenarios


@st.composite
def scenarios(draw: st.DrawFn) -> OpTable:
    n = draw(st.integers(2, 5))
    b = OpBuilder(n)
    r = np.arange(n)
    steps = draw(st.integers(1, 4))
    regions = ["A", "B", "C"]
    for s in range(steps):
        for reg in draw(st.lists(st.sampled_from(regions), min_size=1, max_size=3, unique=True)):
            t = draw(st.lists(st.floats(0.0, 2.0, allow_nan=False).map(lambda v: round(v, 3)), min_size=n,
                              max_size=n))
            b.add("enter", r, step=s, region=reg)
            b.add("compute", r, step=s, value=t, region=reg)
            b.add("leave", r, step=s, region=reg)
        kind = draw(st.sampled_from(["chain", "ring", "halo", "barrier", "allreduce", "bcast", "reduce", "alltoall",
                                     "allgather", "gather", "scatter", "scan", "none"]))
        if kind == "chain":
            for k in range(n - 1):
                b.add("send", k, step=s, peer=k + 1, value=8)
                b.add("recv", k + 1, step=s, peer=k, value=8)
                if draw(st.booleans()):
                    work(b, k + 1, round(draw(st.floats(0.0, 1.0)), 3), "A")
        elif kind == "ring":
            b.add("send", r, step=s, peer=(r + 1) % n, value=8)
            b.add("recv", r, step=s, peer=(r - 1) % n, value=8)
        elif kind == "halo":
            b.add("irecv", r, step=s, peer=(r - 1) % n, value=8)
            b.add("irecv", r, step=s, peer=(r + 1) % n, value=8, tag=1)
            b.add("isend", r, step=s, peer=(r + 1) % n, value=8)
            b.add("isend", r, step=s, peer=(r - 1) % n, value=8, tag=1)
            b.add("waitall", r, step=s)
        elif kind != "none":
            root = draw(st.integers(0, n - 1))
            b.add(kind, r, step=s, value=8, value2=8,
                  peer=root if kind in ("bcast", "reduce", "gather", "scatter") else -1)
    return b.build()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_cwpdm_conserves_wait(ops):
    ev, ws = run(ops)
    res = cwpdm(ev, ws)
    total = float(ws["wait"].sum())
    tol = 1e-9 * max(1.0, total)
    assert res.attributed <= total + tol
    assert res.attributed + res.unexplained == pytest.approx(total, abs=tol)
    assert (res.waits["capped"] >= -tol).all() and (res.waits["indirect"] <= res.waits["wait"] + tol).all()
    if res.unexplained <= tol:
        assert res.attributed == pytest.approx(total, abs=tol)
    assert (res.costs["short"] >= 0).all() and (res.costs["long"] >= -tol).all()
    long_types = [c for c in res.costs.columns if c.startswith("long_")]
    np.testing.assert_allclose(res.costs[long_types].sum(axis=1), res.costs["long"], atol=tol)
    # the sparse representation of interval times gives the same result as the dense one
    sparse = cwpdm(ev, ws, sync=sync_points(ev, ws, dense_limit=0, split_ties=True))
    assert sync_points(ev, ws, dense_limit=0).dense is None
    pd.testing.assert_frame_equal(sparse.costs, res.costs, atol=1e-12)
    pd.testing.assert_frame_equal(sparse.waits, res.waits, atol=1e-12)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(["earliest", "each"]), st.sampled_from([0.0, 0.01, 0.3]))
def test_hcwpdm_attributed_plus_unexplained_is_considered_wait(ops, pairing, threshold):
    ev, ws = run(ops)
    res = hcwpdm(ev, ws, pairing=pairing, threshold=threshold)
    assert res.attributed + res.unexplained == pytest.approx(res.considered_wait, abs=1e-9)
    if pairing == "each":
        assert res.considered_wait == pytest.approx(float(ws["wait"].sum()))


def test_exclusive_times_of_asked_rows():
    """Each asked row's seconds minus every wait of that row (two waits on row 1: 0.25 + 0.5), region rows 0, rows
    in any order and repeated (by hand: 2 - 0 = 2, 2 - 0.75 = 1.25, region 0, 2.5 - 1 = 1.5)."""
    ev = make_events(rank=[0, 0, 0, 1], op=["compute", "barrier", "region", "recv"], enter=[0.0, 2.0, 0.0, 1.0],
                     exit=[2.0, 4.0, 10.0, 3.5], kind=["compute", "mpi", "region", "mpi"])
    ws = pd.DataFrame({"event": [1, 3, 1], "wait": [0.25, 1.0, 0.5]})
    assert exclusive_times(ev, ws)[np.array([3, 2, 1, 0, 1])].tolist() == [1.5, 0.0, 1.25, 2.0, 1.25]
    assert exclusive_times(ev, ws.iloc[:0])[np.array([1, 3])].tolist() == [2.0, 2.5]
