"""Critical path of a run: the longest path through the happens-before graph (as Scalasca's
critical-path analysis reports it: time on the path per region and rank, and the critical-path
imbalance per region).

Each leaf activity (every event row but region rows) splits into its wait (the wait states of the
row, formula 1) and its *busy* time ``exit - max(exit of the previous activity, t0) - wait`` (gaps
count as busy time of the next activity, so busy + wait telescope to ``exit - t0``).  The graph is
*condensed*: its nodes are only the points where ranks synchronize -- the start of every operation
waited for, ``(q,k)``, the end of every wait, and each rank's start and end -- and an edge joins
consecutive points of a rank with the busy time between them as weight (numpy cumulative sums).  A
wait adds the edge ``(q,k) -> end of the wait of (p,i)`` of weight 0.  The longest path (networkx,
``dag_longest_path``) from a super-source to the rank that finishes last is the critical path; on a
schedule without idle time its length is the makespan of the step range.

Examples
--------
A late-sender chain: rank 0 works 3 s, ranks 1 and 2 work 1 s; 0 sends to 1, then 1 sends to 2.
The critical path runs through rank 0's work and the two messages, 3 s = the makespan.

>>> from waitlab.models.analysis.waitstates import make_events, wait_states
>>> ev = make_events(rank=[0, 0, 1, 1, 1, 2, 2], op=["compute", "send", "compute", "recv", "send", "compute", "recv"],
...                  enter=[0, 3, 0, 1, 3, 0, 1], exit=[3, 3, 1, 3, 3, 1, 3], match=[-1, 0, -1, 0, 1, -1, 1],
...                  done=[-1, 1, -1, 3, 4, -1, 6], peer=[-1, 1, -1, 0, 2, -1, 1])
>>> cp = critical_path(ev, wait_states(ev))
>>> cp.length, cp.makespan, cp.by_rank.to_dict()
(3.0, 3.0, {0: 3.0})
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import networkx as nx
import numpy as np
import pandas as pd


@dataclass(frozen=True)
class CriticalPath:
    """Result of :func:`critical_path`.

    Attributes
    ----------
    length : float
        Busy seconds on the critical path (equals ``makespan`` when no rank idles without a wait state).
    makespan : float
        ``max exit - min enter`` over the step range.
    segments : DataFrame
        The path in time order: ``rank, first_row, last_row`` (event rows covered, inclusive), ``seconds``.
    by_region_rank : DataFrame
        ``rank, region, seconds`` of busy time on the path.
    by_region : DataFrame
        ``region, seconds, share, mean_per_rank, imbalance``: seconds on the path, its share of the
        length, the region's mean busy time per rank over the range, and the critical-path imbalance
        ``seconds - mean_per_rank`` (what making the region balanced could save at most).
    by_rank : Series
        Seconds on the path per rank.
    """

    length: float
    makespan: float
    segments: pd.DataFrame
    by_region_rank: pd.DataFrame
    by_region: pd.DataFrame
    by_rank: pd.Series


def _labels(ev: pd.DataFrame) -> np.ndarray:
    """Region of each activity as tools name it: ``MPI_<Op>`` for MPI operations, else the innermost region."""
    op = ev["op"].astype(str).to_numpy()
    region = ev["region"].astype(str).to_numpy()
    is_mpi = (ev["kind"].astype(str) == "mpi").to_numpy()
    mpi = np.char.add("MPI_", np.char.capitalize(op.astype(str)))
    return np.where(is_mpi, mpi, np.where(region == "", op, region)).astype(object)


def critical_path(events: pd.DataFrame, waits: pd.DataFrame, steps: tuple[int, int] | None = None) -> CriticalPath:
    """Critical path of the activities of ``steps`` (inclusive ``(first, last)``; all steps by default)."""
    leaf = (events["kind"].astype(str) != "region").to_numpy()
    if steps is not None:
        s = events["step"].to_numpy()
        leaf = leaf & (s >= steps[0]) & (s <= steps[1])
    rows = np.flatnonzero(leaf)  # event rows in the range, sorted by (rank, seq)
    ev = events.iloc[rows]
    n = rows.size
    if n == 0:
        empty = pd.DataFrame(columns=["rank", "region", "seconds"])
        return CriticalPath(0.0, 0.0, pd.DataFrame(columns=["rank", "first_row", "last_row", "seconds"]), empty,
                            pd.DataFrame(columns=["region", "seconds", "share", "mean_per_rank", "imbalance"]),
                            pd.Series(dtype=float))
    pos_of = np.full(len(events), -1, np.int64)
    pos_of[rows] = np.arange(n)
    rank = ev["rank"].to_numpy().astype(np.int64)
    enter, exit_ = ev["enter"].to_numpy(), ev["exit"].to_numpy()
    t0 = float(enter.min())
    wait = np.zeros(n)
    w_pos = pos_of[waits["event"].to_numpy()]
    ok = w_pos >= 0
    np.add.at(wait, w_pos[ok], waits["wait"].to_numpy()[ok])
    first = np.r_[True, rank[1:] != rank[:-1]]
    prev_exit = np.where(first, t0, np.r_[t0, exit_[:-1]])
    busy = np.maximum(exit_ - np.maximum(prev_exit, t0) - wait, 0.0)
    cum = np.r_[0.0, np.cumsum(busy)]  # cum[pos]: busy before position pos (over all ranks, in row order)
    starts = np.flatnonzero(first)
    ends = np.r_[starts[1:], n]  # one past the last position of each rank
    # synchronization points: (q,k) -> end of the wait of (p,i), both inside the range
    pe = pos_of[waits["peer_event"].to_numpy()]
    sync = ok & (pe >= 0)
    sp_p, sp_q = w_pos[sync], pe[sync]
    # nodes (rank, x, f): f=0 "before row x" (the start of an operation waited for), f=1 "after the wait of
    # row x"; each rank's start and end are f=0 points.  Consecutive points of a rank are joined by the busy
    # time between them; a wait adds (q, k, 0) -> (p, i, 1) with weight 0.
    x = np.concatenate([starts, ends, sp_q, sp_p])
    f = np.concatenate([np.zeros(starts.size + ends.size + sp_q.size, np.int64), np.ones(sp_p.size, np.int64)])
    r = np.concatenate([rank[starts], rank[ends - 1], rank[sp_q], rank[sp_p]])
    key = np.unique(np.stack([r, x, f], axis=1), axis=0)  # sorted by (rank, x, f)
    same = key[1:, 0] == key[:-1, 0]
    weight = cum[key[1:, 1]] - cum[key[:-1, 1]]
    nodes = [tuple(k) for k in key.tolist()]
    g = nx.DiGraph()
    g.add_weighted_edges_from((nodes[i], nodes[i + 1], float(weight[i])) for i in np.flatnonzero(same).tolist())
    g.add_weighted_edges_from(("source", (int(rank[s]), int(s), 0), float(enter[s] - t0)) for s in starts.tolist())
    g.add_weighted_edges_from(((int(rank[e - 1]), int(e), 0), "sink", 0.0) for e in ends.tolist())
    g.add_weighted_edges_from(((int(rank[q]), int(q), 0), (int(rank[p]), int(p), 1), 0.0)
                              for p, q in zip(sp_p.tolist(), sp_q.tolist(), strict=True))
    path = nx.dag_longest_path(g, weight="weight")
    length = float(nx.path_weight(g, path, weight="weight"))
    # segments: consecutive points of the path on one rank cover the rows between them
    seg = [(a[1], b[1]) for a, b in itertools.pairwise(path)
           if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] and b[1] > a[1]]
    cover = np.zeros(n + 1, np.int64)
    for a_, b_ in seg:
        cover[a_] += 1
        cover[b_] -= 1
    on = np.cumsum(cover[:-1]) > 0
    label = _labels(ev)
    table = pd.DataFrame({"rank": rank[on], "region": label[on], "seconds": busy[on]})
    by_rr = table.groupby(["rank", "region"], as_index=False, sort=True)["seconds"].sum()
    allr = pd.DataFrame({"rank": rank, "region": label, "seconds": busy})
    mean = allr.groupby("region")["seconds"].sum() / max(np.unique(rank).size, 1)
    by_region = table.groupby("region")["seconds"].sum().rename("seconds").to_frame()
    by_region["share"] = by_region["seconds"] / length if length > 0 else 0.0
    by_region["mean_per_rank"] = mean.reindex(by_region.index).to_numpy()
    by_region["imbalance"] = by_region["seconds"] - by_region["mean_per_rank"]
    by_region = by_region.sort_values("seconds", ascending=False).reset_index()
    sa, sb = np.array([a_ for a_, _ in seg], np.int64), np.array([b_ for _, b_ in seg], np.int64)
    segments = pd.DataFrame({"rank": rank[sa], "first_row": rows[sa], "last_row": rows[sb - 1],
                             "seconds": cum[sb] - cum[sa]})
    return CriticalPath(length=length, makespan=float(exit_.max() - t0), segments=segments, by_region_rank=by_rr,
                        by_region=by_region, by_rank=table.groupby("rank")["seconds"].sum())
