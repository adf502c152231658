"""Exact ties split the blame equally (issue 13), and the pairwise RMA patterns in the models (issue 12).

Every expected number is counted by hand in the comments.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rma import events as rma_events

from waitlab.models.analysis.cwpdm import cwpdm
from waitlab.models.analysis.hcwpdm import hcwpdm
from waitlab.models.analysis.syncpoints import sync_points
from waitlab.models.analysis.ties import tied_culprits
from waitlab.models.analysis.waitstates import make_events, wait_states

EXAMPLES = int(os.environ.get("WAITLAB_HYPOTHESIS_EXAMPLES", "60"))


def by_rank(blame: pd.DataFrame) -> dict[int, float]:
    return {int(k): float(v) for k, v in blame.groupby("rank")["cost"].sum().items()}


def allreduce_two_late() -> pd.DataFrame:
    # 4 ranks; ranks 0 and 2 compute 1 s, ranks 1 and 3 compute 3 s, then all enter an allreduce.
    return make_events(
        rank=[0, 0, 1, 1, 2, 2, 3, 3], op=["compute", "allreduce"] * 4,
        enter=[0, 1, 0, 3, 0, 1, 0, 3], exit=[1, 3, 3, 3, 1, 3, 3, 3], match=[-1, 7] * 4)


def test_two_equally_late_ranks_at_an_allreduce_share_the_blame() -> None:
    # Ranks 0 and 2 wait 2 s each (4 s in all).  Ranks 1 and 3 are both 2 s late: each wait is split 1 s + 1 s,
    # so rank 1 gets 1 + 1 = 2 s and rank 3 gets 2 s (before: rank 1 got all 4 s, rank 3 nothing).
    ev = allreduce_two_late()
    ws = wait_states(ev)
    assert ws["wait"].tolist() == [2.0, 2.0]
    assert ws["peer_rank"].tolist() == [1, 1]  # the wait-state table names the lowest-numbered tied rank
    res = cwpdm(ev, ws)
    assert by_rank(res.blame()) == pytest.approx({1: 2.0, 3: 2.0})
    # short-term weight s = (2/2) / (delta_hat 2 + omega_hat 0) = 0.5 per share; short = 0.5 * 2 s = 1 s
    assert res.costs.set_index("rank")["short"].to_dict() == pytest.approx({1: 2.0, 3: 2.0})
    assert res.attributed == pytest.approx(4.0)
    assert res.waits["tied"].tolist() == [2, 2] and res.waits["peer_rank"].tolist() == [1, 1]
    assert res.waits["direct"].tolist() == pytest.approx([2.0, 2.0])
    # H-CWP-DM pairs the earliest waiter (rank 0, 2 s): 1 s each; pairing every waiter: 2 s each.
    assert by_rank(hcwpdm(ev, ws).blame()) == pytest.approx({1: 1.0, 3: 1.0})
    assert by_rank(hcwpdm(ev, ws, pairing="each").blame()) == pytest.approx({1: 2.0, 3: 2.0})


def test_a_tie_budget_of_zero_keeps_the_representative() -> None:
    ev = allreduce_two_late()
    ws = wait_states(ev)
    res = cwpdm(ev, ws, sync=sync_points(ev, ws, split_ties=True, tie_budget=0))
    assert by_rank(res.blame()) == pytest.approx({1: 4.0})
    assert res.waits["tied"].tolist() == [1, 1]


def test_tied_shares_propagate_long_term_cost() -> None:
    # Ranks 4 and 5 compute 3 s then send to ranks 1 and 3 (which wait 2 s each, late sender); everyone else
    # computes 1 s.  At the allreduce ranks 1, 3, 4, 5 all enter at 3 s: the waits of ranks 0 and 2 (2 s each)
    # are split four ways, 0.5 s per share.
    #   share to rank 4: delta_hat = 3 - 1 = 2, omega_hat = 0, s = 0.5/2 = 0.25: short(4) += 0.5 (same for 5);
    #   share to rank 1: delta_hat = 0, omega_hat = 2 (its recv wait), s = 0.25: phi(rank 1's wait) += 0.5.
    #   Over the two waiters phi = 1 s on rank 1's wait (and on rank 3's).  Rank 1's wait (2 s, late sender):
    #   delta_hat = 3 - 1 = 2, s = min(1, 2/2) = 1: short(4) += 2; g = phi / 2 = 0.5: long(4) += 1.
    # Rank 4: short 0.5 + 0.5 + 2 = 3, long 1, cost 4; rank 5 the same; 8 s = every wait.
    ev = make_events(
        rank=[0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5],
        op=["compute", "allreduce", "compute", "recv", "allreduce", "compute", "allreduce",
            "compute", "recv", "allreduce", "compute", "send", "allreduce", "compute", "send", "allreduce"],
        enter=[0, 1, 0, 1, 3, 0, 1, 0, 1, 3, 0, 3, 3, 0, 3, 3],
        exit=[1, 3, 1, 3, 3, 1, 3, 1, 3, 3, 3, 3, 3, 3, 3, 3],
        match=[-1, 9, -1, 0, 9, -1, 9, -1, 1, 9, -1, 0, 9, -1, 1, 9],
        done=[-1, -1, -1, 3, -1, -1, -1, -1, 8, -1, -1, 11, -1, -1, 14, -1],
        peer=[-1, -1, -1, 4, -1, -1, -1, -1, 5, -1, -1, 1, -1, -1, 3, -1])
    ws = wait_states(ev)
    assert float(ws["wait"].sum()) == pytest.approx(8.0)
    res = cwpdm(ev, ws)
    c = res.costs.set_index("rank")
    assert c["short"].to_dict() == pytest.approx({4: 3.0, 5: 3.0})
    assert c["long"].to_dict() == pytest.approx({4: 1.0, 5: 1.0})
    assert c["long_wait_at_nxn"].to_dict() == pytest.approx({4: 1.0, 5: 1.0})
    w = res.waits.set_index("event")
    # rank 0's wait: half direct (the shares of ranks 4, 5), half indirect (the shares of ranks 1, 3)
    assert (w.loc[1, "direct"], w.loc[1, "indirect"], w.loc[1, "tied"]) == pytest.approx((1.0, 1.0, 4))
    assert w.loc[3, "phi"] == pytest.approx(1.0)


def test_ties_at_reduce_and_scan() -> None:
    # Reduce rooted at 0 (enters at 1 s); ranks 2 and 3 send last, both at 3 s; rank 1 at 2 s: the root waits
    # 2 s, 1 s to rank 2 and 1 s to rank 3.
    ev = make_events(rank=[0, 0, 1, 1, 2, 2, 3, 3], op=["compute", "reduce"] * 4,
                     enter=[0, 1, 0, 2, 0, 3, 0, 3], exit=[1, 3, 2, 2, 3, 3, 3, 3], match=[-1, 4] * 4,
                     peer=[-1, 0] * 4)
    ws = wait_states(ev)
    assert ws["wait"].tolist() == [2.0] and ws["peer_rank"].tolist() == [2]
    assert by_rank(cwpdm(ev, ws).blame()) == pytest.approx({2: 1.0, 3: 1.0})
    # Scan: ranks 0 and 1 enter at 3 s, rank 2 at 1 s: rank 2 waits 2 s for the lower ranks 0 and 1 (tied);
    # rank 3 enters at 3 s too but is not a lower rank of rank 2: it takes no share.
    ev = make_events(rank=[0, 0, 1, 1, 2, 2, 3, 3], op=["compute", "scan"] * 4,
                     enter=[0, 3, 0, 3, 0, 1, 0, 3], exit=[3, 3, 3, 3, 1, 3, 3, 3], match=[-1, 5] * 4)
    ws = wait_states(ev)
    assert ws["wait"].tolist() == [2.0] and ws["peer_rank"].tolist() == [0]  # the lowest-numbered tied rank
    row, culprit = tied_culprits(ev, ws)
    assert ev["rank"].to_numpy()[culprit].tolist() == [0, 1] and row.tolist() == [0, 0]
    assert by_rank(cwpdm(ev, ws).blame()) == pytest.approx({0: 1.0, 1: 1.0})
    assert by_rank(hcwpdm(ev, ws).blame()) == pytest.approx({0: 1.0, 1: 1.0})


def test_pairwise_rma_waits_are_all_considered_by_hcwpdm() -> None:
    # tests/test_rma.py's GATS case: Late Post 3 s on rank 0 (culprit: rank 1's post after 3 s of compute);
    # rank 1's win_wait: Early Wait 1 s + Late Complete 1 s, both for rank 0's complete.  Pairwise patterns:
    # H-CWP-DM considers all 5 s (as collective waits it kept only the largest of the "instance": 3 s).
    #   Late Post: sigma(1, (top level)) = 3 - 0 -> 3 s to rank 1's compute.
    #   Early Wait / Late Complete: rank 0's interval up to its complete holds the put (1 s) and 1 s of compute;
    #   rank 1's holds 3 s of compute: sigma(0, MPI_put) = 1 is the only excess -> 1 s + 1 s to the put.
    ev = rma_events([
        (0, "win_start", 0.0, 3.0, -1), (0, "win_group", 3.0, 3.0, 1), (0, "put", 3.0, 4.0, 1),
        (0, "compute", 4.0, 5.0, -1), (0, "win_complete", 5.0, 5.1, -1),
        (1, "compute", 0.0, 3.0, -1), (1, "win_post", 3.0, 3.0, -1), (1, "win_group", 3.0, 3.0, 0),
        (1, "win_wait", 3.0, 5.2, -1),
    ])  # fmt: skip
    ws = wait_states(ev)
    h = hcwpdm(ev, ws)
    assert h.considered_wait == pytest.approx(5.0)
    assert by_rank(h.blame()) == pytest.approx({0: 2.0, 1: 3.0})
    # CWP-DM: Late Post s = min(1, 3/3) = 1 -> short(1) = 3.  The two waits of rank 1 (1 s each): delta_hat = 1
    # (the put), omega_hat = 3 (the Late Post inside rank 0's interval): s = 1/4 -> short(0, put) = 0.25 each,
    # phi(Late Post) = 2 * 0.25 * 3 = 1.5, g = 1.5/3 = 0.5 -> long(1) = 0.5 * 3 = 1.5.  4.5 + 0.5 = 5 s.
    c = cwpdm(ev, ws)
    assert by_rank(c.blame()) == pytest.approx({0: 0.5, 1: 4.5})
    assert c.attributed == pytest.approx(5.0)


def test_lock_contention_is_capped_as_a_pairwise_wait() -> None:
    # Rank 0 holds an exclusive lock on rank 2; its trace shows only a 1 s put before its unlock at 4 s.  Rank 1's
    # shared lock waits 3 s for that unlock.  delta_hat = 1 (the put), so s = min(1, 3/1) = 1: CWP-DM blames 1 s on
    # rank 0's put and leaves 2 s capped.  (As a collective wait, s = 3 would have blamed all 3 s on 1 s of work.)
    ev = rma_events([
        (0, "win_lock", 0.0, 0.0, 2), (0, "put", 0.0, 1.0, 2), (0, "win_unlock", 4.0, 4.1, 2),
        (1, "win_lock_shared", 1.0, 4.0, 2), (1, "win_unlock", 4.5, 4.6, 2),
    ])  # fmt: skip
    ws = wait_states(ev)
    assert ws["pattern"].tolist() == ["rma_lock_contention"] and ws["wait"].tolist() == [3.0]
    res = cwpdm(ev, ws)
    assert by_rank(res.blame()) == pytest.approx({0: 1.0})
    assert res.waits["capped"].tolist() == pytest.approx([2.0])


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.integers(3, 7), st.data())
def test_exactly_tied_late_ranks_get_equal_blame(n: int, data: st.DataObject) -> None:
    # n ranks compute, then one allreduce; the ranks in `late` compute x, the others less.  Every wait has the
    # same tied culprits, each share is explained by the culprit's own excess (s * delta = share), so each late
    # rank gets total / |late| from CWP-DM and from H-CWP-DM pairing every waiter.
    late = data.draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n - 1))
    x = data.draw(st.floats(0.5, 4.0))
    early = [data.draw(st.floats(0.0, 0.45)) for _ in range(n)]
    work = [x if r in late else early[r] for r in range(n)]
    ev = make_events(rank=[r for r in range(n) for _ in range(2)], op=["compute", "allreduce"] * n,
                     enter=[v for w in work for v in (0.0, w)], exit=[v for w in work for v in (w, x)],
                     match=[-1, 0] * n)
    ws = wait_states(ev)
    total = float(ws["wait"].sum())
    expected = {r: total / len(late) for r in late}
    assert by_rank(cwpdm(ev, ws).blame()) == pytest.approx(expected)
    assert by_rank(hcwpdm(ev, ws, pairing="each").blame()) == pytest.approx(expected)
    assert (cwpdm(ev, ws).waits["tied"] == len(late)).all()


def test_a_waitall_for_two_equally_late_senders_splits_its_wait() -> None:
    # Rank 0 posts irecvs from ranks 1 and 2 and enters its waitall at 1 s; both senders compute 3 s and send at
    # 3 s: the waitall waits 2 s (late sender, named peer: rank 1), 1 s for each.  Each share: delta_hat = 3 - 1
    # = 2 (compute), s = min(1, 1/2) = 0.5, short = 1 s (before: rank 1 got min(1, 2/2) * 2 = 2 s, rank 2 none).
    ev = make_events(
        rank=[0, 0, 0, 0, 1, 1, 2, 2],
        op=["compute", "irecv", "irecv", "waitall", "compute", "send", "compute", "send"],
        enter=[0, 1, 1, 1, 0, 3, 0, 3], exit=[1, 1, 1, 3, 3, 3, 3, 3], match=[-1, 0, 1, -1, -1, 0, -1, 1],
        done=[-1, 3, 3, -1, -1, 5, -1, 7], peer=[-1, 1, 2, -1, -1, 0, -1, 0])
    ws = wait_states(ev)
    assert ws[["pattern", "wait", "peer_rank"]].values.tolist() == [["late_sender", 2.0, 1]]
    res = cwpdm(ev, ws)
    assert by_rank(res.blame()) == pytest.approx({1: 1.0, 2: 1.0})
    assert res.waits["tied"].tolist() == [2]
    assert by_rank(hcwpdm(ev, ws).blame()) == pytest.approx({1: 1.0, 2: 1.0})
