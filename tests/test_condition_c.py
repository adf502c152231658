"""Condition C (Okita et al. formula 3) and the wait distortion, on hand-built event tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waitlab.models.analysis.waitstates import make_events
from waitlab.models.perturb.condition_c import (
    check_condition_c,
    distortion_summary,
    event_overheads,
    original_keys,
    prefix_sums,
    wait_distortion,
)


def table(rank: list[int], op: list[str], enter: list[float], exit_: list[float], match: list[int]) -> pd.DataFrame:
    kinds = [o if o in ("overhead", "flush", "swap", "delay", "compute") else "mpi" for o in op]
    ev = make_events(rank=rank, op=op, enter=enter, exit=exit_, match=match, kind=kinds)
    ev["kind"] = ev["kind"].astype(str).astype("category")
    ev["seq"] = ev.groupby("rank").cumcount()
    return ev


def test_prefix_sums_are_exclusive_per_rank() -> None:
    assert prefix_sums(np.array([0, 0, 0, 1, 1]), np.array([1.0, 2.0, 4.0, 8.0, 16.0])).tolist() == \
        [0.0, 1.0, 3.0, 0.0, 8.0]


def test_equal_overhead_on_both_sides_holds() -> None:
    # rank 0: overhead 0.2, send; rank 1: overhead 0.2, recv -> prefix 0.2 = 0.2
    ev = table([0, 0, 1, 1], ["overhead", "send", "overhead", "recv"], [0, 0.2, 0, 0.2], [0.2, 0.2, 0.2, 0.3],
               [-1, 0, -1, 0])
    rep = check_condition_c(ev)
    assert rep.holds and rep.pairs == 1 and rep.violating_pairs == 0 and rep.first == {}
    assert rep.total_overhead == pytest.approx(0.4)
    assert "holds" in rep.text()


def test_one_sided_overhead_breaks_c_at_the_send() -> None:
    # rank 0: compute, overhead 0.25, send (seq 2); rank 1: recv (seq 0); then a barrier (both)
    ev = table([0, 0, 0, 0, 1, 1], ["compute", "overhead", "send", "barrier", "recv", "barrier"],
               [0, 1, 1.25, 1.25, 0, 1.25], [1, 1.25, 1.25, 1.3, 1.25, 1.3], [-1, -1, 0, 0, 0, 0])
    rep = check_condition_c(ev)
    assert rep.violating_pairs == 1 and rep.violating_collectives == 1
    assert rep.max_difference == pytest.approx(0.25)
    f = rep.first
    assert (f["kind"], f["rank"], f["seq"], f["op"], f["peer_rank"], f["peer_seq"]) == ("p2p", 0, 2, "send", 1, 0)
    # the time is the named event's (rank 0's send starts at 1.25), not the partner's recv (0.0)
    assert f["difference"] == pytest.approx(0.25) and f["time"] == 1.25
    assert list(rep.violations["kind"]) == ["p2p", "collective"]
    # the collective row names the rank with the largest prefix and the one with the smallest
    c = rep.violations.iloc[1]
    assert (c["rank"], c["peer_rank"], c["op"]) == (0, 1, "barrier")
    # with a tolerance above the difference, C holds
    assert check_condition_c(ev, atol=0.3).holds


def test_overheads_from_kinds_and_explicit() -> None:
    ev = table([0, 0, 1], ["flush", "send", "recv"], [0, 0.5, 0], [0.5, 0.5, 0.5], [-1, 0, 0])
    assert event_overheads(ev).tolist() == [0.5, 0.0, 0.0]
    assert check_condition_c(ev, kinds=("swap",)).holds
    # an overhead on the receive itself is not before it: only the one before the send counts
    assert check_condition_c(ev, overhead=np.array([0.0, 0.0, 0.1])).holds
    assert not check_condition_c(ev, overhead=np.array([0.1, 0.0, 0.0])).holds
    with pytest.raises(ValueError, match="3 events"):
        check_condition_c(ev, overhead=np.zeros(2))


@settings(max_examples=30, deadline=None)
@given(n_ranks=st.integers(2, 6), steps=st.integers(1, 5), data=st.data())
def test_same_overhead_sequence_on_every_rank_holds(n_ranks: int, steps: int, data: st.DataObject) -> None:
    """A ring exchange plus allreduce per step, with the same overhead before every event on all ranks: C holds."""
    o = data.draw(st.lists(st.floats(0.0, 1.0), min_size=steps, max_size=steps))
    rank, op, match = [], [], []
    for r in range(n_ranks):
        for s in range(steps):
            rank += [r, r, r, r]
            op += ["overhead", "send", "recv", "allreduce"]
            m = s * n_ranks
            match += [-1, m + r, m + (r - 1) % n_ranks, s]
    enter = np.zeros(len(rank))
    dur = np.array([o[(i // 4) % steps] if op[i] == "overhead" else 0.0 for i in range(len(rank))])
    ev = table(rank, op, enter.tolist(), dur.tolist(), match)
    assert check_condition_c(ev).holds


def test_wait_distortion_joins_on_original_positions() -> None:
    # measured events (rank 1 has an inserted overhead at seq 0, so its recv moved from seq 0 to seq 1)
    mev = pd.DataFrame({"rank": [0, 1, 1], "seq": [0, 0, 1]})
    bev = pd.DataFrame({"rank": [0, 1], "seq": [0, 0]})
    mkeys = original_keys(mev, np.array([0, -1, 0]))
    bkeys = original_keys(bev)
    mw = pd.DataFrame({"event": [2], "rank": [1], "pattern": ["late_sender"], "wait": [1.25]})
    bw = pd.DataFrame({"event": [1, 0], "rank": [1, 0], "pattern": ["late_sender", "wait_at_barrier"],
                       "wait": [1.0, 0.5]})
    d = wait_distortion(mw, mkeys, bw, bkeys)
    assert d[["rank", "seq", "pattern"]].to_dict("records") == [
        {"rank": 0, "seq": 0, "pattern": "wait_at_barrier"}, {"rank": 1, "seq": 0, "pattern": "late_sender"}]
    assert d["distortion"].tolist() == pytest.approx([-0.5, 0.25])
    s = distortion_summary(d)
    assert s["total_distortion"] == pytest.approx(-0.25) and s["by_rank"] == {0: -0.5, 1: 0.25}
    assert s["by_pattern"]["late_sender"]["distortion"] == pytest.approx(0.25)
