"""Where two ranks synchronized: the delimiters of a synchronization interval (docs/diagnosis.md, tester t1 of
session 25).

Wu et al. (after Böhme et al.) define a synchronization point as a wait: a receive whose completion depends on a
send entered later (Scalasca's SynchpointHandler.cpp likewise records late senders and receivers only); a message
that arrived without a wait, or the ``waitall`` that later completes a send's request, is none.  And a collective
synchronizes the members of its communicator only.  Both cases below are computed by hand on event
tables built directly (times as an ideal network gives them: free messages, a collective ends when its last
member arrives).
"""

from __future__ import annotations

import pandas as pd
import pytest

from waitlab.models.analysis.cwpdm import cwpdm
from waitlab.models.analysis.scoring import by_rank_region
from waitlab.models.analysis.syncpoints import sync_points
from waitlab.models.analysis.waitstates import make_events, wait_states


def _with_regions(ev: pd.DataFrame, regions: list[str], comm: list[int] | None = None) -> pd.DataFrame:
    ev = ev.copy()
    ev["region"] = pd.Categorical(regions)
    ev["path"] = pd.Categorical(regions)
    if comm is not None:
        ev["comm"] = pd.array(comm, dtype="int32").to_numpy()
    return ev


def _waitall_sender() -> pd.DataFrame:
    """Rank 2 works 0.1 s in ``late`` and sends to rank 1.  Rank 1 posts an isend to rank 0 and an irecv from
    rank 2, waits 0.1 s for both in one ``waitall``, works 0.01 s in ``tail`` and enters the barrier.  Rank 0
    receives rank 1's message at once (it left at t = 0) and waits 0.11 s in the barrier; rank 2 waits 0.01 s
    there."""
    rows = [  # rank, op, enter, exit, match, done, peer, region
        (0, "recv", 0.0, 0.0, 1, 0, 1, ""),
        (0, "barrier", 0.0, 0.11, 0, -1, -1, ""),
        (1, "isend", 0.0, 0.0, 1, 4, 0, ""),
        (1, "irecv", 0.0, 0.0, 2, 4, 2, ""),
        (1, "waitall", 0.0, 0.1, -1, -1, -1, ""),
        (1, "compute", 0.1, 0.11, -1, -1, -1, "tail"),
        (1, "barrier", 0.11, 0.11, 0, -1, -1, ""),
        (2, "compute", 0.0, 0.1, -1, -1, -1, "late"),
        (2, "send", 0.1, 0.1, 2, 8, 1, ""),
        (2, "barrier", 0.1, 0.11, 0, -1, -1, ""),
    ]
    r, op, enter, exit_, match, done, peer, region = (list(c) for c in zip(*rows, strict=True))
    ev = make_events(rank=r, op=op, enter=enter, exit=exit_, match=match, done=done, peer=peer)
    return _with_regions(ev, region)


def test_a_send_completed_by_a_waitall_does_not_cut_the_interval() -> None:
    ev = _waitall_sender()
    ws = wait_states(ev)
    got = {(int(r), p): round(float(w), 9) for r, p, w in zip(ws["rank"], ws["pattern"], ws["wait"], strict=True)}
    assert got == {(1, "late_sender"): 0.1, (0, "wait_at_barrier"): 0.11, (2, "wait_at_barrier"): 0.01}
    sp = sync_points(ev, ws)
    barrier0 = int(sp.rank.tolist().index(0))
    # rank 1's message reached rank 0 without a wait: no synchronization point, the interval on rank 1 starts at its
    # first row (row 2) and holds the waitall's own wait (when the waitall completing the isend was taken for one,
    # the interval started after it and that wait was lost)
    assert int(sp.q_start[barrier0]) == 1
    assert int(sp.inner_hi[barrier0] - sp.inner_lo[barrier0]) == 1
    # By hand (removing an activity and replaying): without `late` the waits are 0.01 + 0.01 s (cost 0.2 s),
    # without `tail` 0.1 + 0.1 s (cost 0.02 s).  CWP-DM: rank 0's 0.11 s splits into `tail` (0.01 s, short term)
    # and rank 1's inner wait (0.1 s, propagated to `late`); rank 2's 0.01 s is `tail`'s; rank 1's 0.1 s `late`'s.
    blame = by_rank_region(cwpdm(ev, ws).blame()).to_dict()
    assert blame == pytest.approx({(2, "late"): 0.2, (1, "tail"): 0.02}, abs=1e-12)


def test_a_collective_synchronizes_only_its_communicator() -> None:
    """Four ranks, rows {0, 1} and {2, 3} (communicators 1, 2), columns {0, 2} and {1, 3} (3, 4): an alltoall
    on each row, then on each column.  Rank 3 works 1 s in ``rows`` first: rank 2 waits 1 s in its row's
    alltoall, rank 0 then waits 1 s for rank 2 in the columns' and rank 1 1 s for rank 3.  Every second of the
    3 s of wait is rank 3's ``rows`` (removing it removes every wait).  Before the fix, rank 2's row alltoall
    counted as a synchronization with rank 0, which was never in it: rank 0's wait was left unexplained."""
    rows = [  # rank, op, enter, exit, match (collective instance), comm, region
        (0, "alltoall", 0.0, 0.0, 0, 1, ""),
        (0, "alltoall", 0.0, 1.0, 2, 3, ""),
        (1, "alltoall", 0.0, 0.0, 0, 1, ""),
        (1, "alltoall", 0.0, 1.0, 3, 4, ""),
        (2, "alltoall", 0.0, 1.0, 1, 2, ""),
        (2, "alltoall", 1.0, 1.0, 2, 3, ""),
        (3, "compute", 0.0, 1.0, -1, 0, "rows"),
        (3, "alltoall", 1.0, 1.0, 1, 2, ""),
        (3, "alltoall", 1.0, 1.0, 3, 4, ""),
    ]
    r, op, enter, exit_, match, comm, region = (list(c) for c in zip(*rows, strict=True))
    ev = _with_regions(make_events(rank=r, op=op, enter=enter, exit=exit_, match=match), region, comm)
    ws = wait_states(ev)
    assert sorted(zip(ws["rank"].tolist(), ws["wait"].tolist(), strict=True)) == [(0, 1.0), (1, 1.0), (2, 1.0)]
    c = cwpdm(ev, ws)
    assert by_rank_region(c.blame()).to_dict() == pytest.approx({(3, "rows"): 3.0}, abs=1e-12)
    assert c.unexplained == pytest.approx(0.0, abs=1e-12)
