"""Which collective members synchronize: Scalasca 2.6's rules (no payload, no synchronization point; the latest
*sender*; alltoallv without full overlap), hand-computed on small event tables, and the impossible-timeline check
that follows the same rules (a valid program with a zero-count allreduce or a sparse alltoallv is not flagged)."""

from __future__ import annotations

import pandas as pd

from waitlab.models.analysis.timeline_check import impossible_collectives
from waitlab.models.analysis.waitstates import make_events, wait_states


def waits(ev: pd.DataFrame) -> dict[tuple[int, str], float]:
    ws = wait_states(ev)
    return {(int(r), str(p)): round(float(w), 9) for r, p, w in ws[["rank", "pattern", "wait"]].itertuples(index=False)}


def one_instance(op: str, enter: list[float], exit_: list[float], sent: list[int], got: list[int],
                 root: int = -1) -> pd.DataFrame:
    n = len(enter)
    return make_events(rank=list(range(n)), op=[op] * n, enter=enter, exit=exit_, match=[0] * n,
                       peer=[root] * n, nbytes=sent, recv_bytes=got)


def test_zero_count_bcast_has_no_late_broadcast():
    # root 1 enters 0.1 s late; with 8 bytes the other three wait 0.1 s each, with none nobody waits
    enter, exit_ = [0.0, 0.1, 0.0, 0.0], [0.1, 0.1, 0.1, 0.1]
    full = one_instance("bcast", enter, exit_, [0, 32, 0, 0], [8, 0, 8, 8], root=1)
    assert waits(full) == {(0, "late_broadcast"): 0.1, (2, "late_broadcast"): 0.1, (3, "late_broadcast"): 0.1}
    assert waits(one_instance("bcast", enter, exit_, [0, 0, 0, 0], [0, 0, 0, 0], root=1)) == {}


def test_scatterv_member_receiving_nothing_does_not_wait_for_the_root():
    ev = one_instance("scatterv", [0.0, 0.5, 0.2], [0.5, 0.5, 0.5], [0, 16, 0], [8, 0, 0], root=1)
    assert waits(ev) == {(0, "late_broadcast"): 0.5}  # rank 2 receives 0 elements: no synchronization point


def test_gatherv_root_waits_for_the_latest_sender_not_a_member_sending_nothing():
    # rank 2 contributes nothing and enters last (0.9); the latest sender is rank 1 (0.4): the root waits 0.4 s
    ev = one_instance("gatherv", [0.0, 0.4, 0.9], [0.4, 0.4, 0.9], [8, 8, 0], [16, 0, 0], root=0)
    assert waits(ev) == {(0, "early_reduce"): 0.4}
    # a root that receives nothing waits for nobody
    assert waits(one_instance("gatherv", [0.0, 0.4, 0.9], [0.4, 0.4, 0.9], [0, 0, 0], [0, 0, 0], root=0)) == {}


def test_zero_count_allreduce_books_no_wait_and_is_not_impossible():
    # SMPI's redbcast with count 0: rank 3 leaves before rank 2 entered (what helper runs of a valid program show)
    ev = one_instance("allreduce", [0.0, 0.0, 0.1, 0.0], [0.1, 0.1, 0.1, 0.0], [0] * 4, [0] * 4)
    assert waits(ev) == {}
    assert impossible_collectives(ev) == []
    # the same timeline with a payload is impossible (a member left before the last contribution arrived)
    paid = one_instance("allreduce", [0.0, 0.0, 0.1, 0.0], [0.1, 0.1, 0.1, 0.0], [8] * 4, [8] * 4)
    assert [f["op"] for f in impossible_collectives(paid)] == ["allreduce"]


def test_allgatherv_without_full_overlap_waits_only_for_the_latest_sender():
    # rank 3 contributes nothing and enters at 1.0, after ranks 0-2 left at 0.5: no full overlap. The latest
    # sender is rank 2 (0.3); ranks 0 and 1 receive data and entered before it: 0.3 and 0.2 s; rank 3 none.
    ev = one_instance("allgatherv", [0.0, 0.1, 0.3, 1.0], [0.5, 0.5, 0.5, 1.0], [8, 8, 8, 0], [32, 32, 32, 24])
    assert waits(ev) == {(0, "wait_at_nxn"): 0.3, (1, "wait_at_nxn"): 0.2}
    assert impossible_collectives(ev) == []  # nobody that receives left before a sender entered
    # with full overlap every member waits for the last one to enter, sender or not (formula as for a barrier)
    full = one_instance("allgatherv", [0.0, 0.1, 0.3, 0.4], [0.5, 0.5, 0.5, 0.5], [8, 8, 8, 0], [32, 32, 32, 24])
    assert waits(full) == {(0, "wait_at_nxn"): 0.4, (1, "wait_at_nxn"): 0.3, (2, "wait_at_nxn"): 0.1}


def test_sparse_alltoallv_without_full_overlap_books_no_wait():
    # pairs (0,1) and (2,3) exchange; rank 3 is 0.2 s late: ranks 0 and 1 leave at once, ranks 2 waits for 3
    enter, exit_ = [0.0, 0.0, 0.0, 0.2], [0.001, 0.001, 0.2, 0.2]
    ev = one_instance("alltoallv", enter, exit_, [8] * 4, [8] * 4)
    assert waits(ev) == {}  # the totals do not say who receives from whom (Scalasca ignores every alltoallv)
    assert impossible_collectives(ev) == []
    # as SMPI runs it (every member held until rank 3 entered: full overlap), the three others wait 0.2 s
    held = one_instance("alltoallv", enter, [0.2] * 4, [8] * 4, [8] * 4)
    assert waits(held) == {(0, "wait_at_nxn"): 0.2, (1, "wait_at_nxn"): 0.2, (2, "wait_at_nxn"): 0.2}


def test_scan_without_payload_has_no_early_scan():
    enter, exit_ = [0.0, 0.3, 0.1], [0.3, 0.3, 0.3]
    assert waits(one_instance("scan", enter, exit_, [8] * 3, [8] * 3)) == {(2, "early_scan"): 0.2}
    assert waits(one_instance("scan", enter, exit_, [0] * 3, [0] * 3)) == {}


def test_barrier_synchronizes_without_payload():
    ev = one_instance("barrier", [0.0, 0.3], [0.3, 0.3], [0, 0], [0, 0])
    assert waits(ev) == {(0, "wait_at_barrier"): 0.3}
