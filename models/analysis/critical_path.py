"""Critical path of a run: the longest path through the happens-before graph (as Scalasca's
critical-path analysis reports it: time on the path per region and rank, and the critical-path
imbalance per region).

Each leaf activity (every event row but region rows) splits into its wait (the wait states of the
row, formula 1) and its *busy* time ``exit - max(exit of the previous activity, t0) - wait`` (gaps
count as busy time of the next activity, so busy + wait telescope to ``exit - t0``).  The graph is
*condensed*: its nodes are only the points where ranks synchronize -- the start of every operation
waited for, ``(q,k)``, the end of every wait, and each rank's start and end -- and an edge joins
consecutive points of a rank with the busy time between them as weight (numpy cumulative sums).  A
wait adds the edge ``(q,k) -> end of the wait of (p,i)`` of weight 0.  The longest path from a
super-source (:func:`longest_path`, on arrays) to the rank that finishes last is the critical path; on a
schedule without idle time its length is the makespan of the step range.  Between paths of equal length
it picks as networkx's ``dag_longest_path`` does at each point (the first of the best predecessors:
the rank's own previous point, then the waits in table order) and ends at the earliest point of the
lowest rank that reaches the length.

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

from dataclasses import dataclass

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


def _codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, names)`` of a column, categorical or not (one string conversion per distinct value)."""
    cat = col.astype("category") if not isinstance(col.dtype, pd.CategoricalDtype) else col
    return cat.cat.codes.to_numpy(), np.array([str(c) for c in cat.cat.categories] + [""], dtype=object)


def _labels(ev: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Region of each activity as tools name it: the MPI call for MPI operations (``MPI_<Op>``, or the program's
    own call: ``MPI_Sendrecv``), else the innermost region.

    Returns ``(code, names)``: ``names[code]`` is the label of each of ``rows`` (strings made once per
    distinct (kind, op, region), not per row)."""
    kind, kinds = _codes(ev["kind"])
    op, ops = _codes(ev["op"])
    region, regions = _codes(ev["region"])
    kind, op, region = kind[rows], op[rows], region[rows]
    mpi_names = [f"MPI_{o.capitalize()}" for o in ops]  # as MPI spells it (MPI_Recv)
    if "call" in ev:  # the program's own call (MPI_Sendrecv) where it names one: op code ops.size + its code
        call, calls = _codes(ev["call"])
        call = call[rows].astype(np.int64)
        named = np.array([c != "" for c in calls])[call]  # code -1 (missing): the last, "", not named
        op = np.where(named, ops.size + call, op)
        ops = np.concatenate([ops, calls])
        mpi_names += list(calls)
    combo = (kind.astype(np.int64) * (ops.size + 1) + op) * (regions.size + 1) + region
    del kind, op, region
    # np.unique(combo, return_inverse=True) by counting (the combinations are few): no sort of every row
    present = np.bincount(combo, minlength=kinds.size * (ops.size + 1) * (regions.size + 1)) > 0
    uniq = np.flatnonzero(present)
    code = (np.cumsum(present) - 1)[combo]
    del combo
    k_u, rest = np.divmod(uniq, (ops.size + 1) * (regions.size + 1))
    o_u, r_u = np.divmod(rest, regions.size + 1)
    names = [mpi_names[o] if kinds[k] == "mpi" else (regions[r] or ops[o])
             for k, o, r in zip(k_u.tolist(), o_u.tolist(), r_u.tolist(), strict=True)]
    return code.ravel(), np.array(names, dtype=object)


def critical_path(events: pd.DataFrame, waits: pd.DataFrame, steps: tuple[int, int] | None = None,
                  n_ranks: int | None = None) -> CriticalPath:
    """Critical path of the activities of ``steps`` (inclusive ``(first, last)``; all steps by default).

    A region's ``mean_per_rank`` is its busy time over ``n_ranks`` ranks (default: the highest rank of ``events``
    plus one), those without an event in the range included, as Scalasca averages over every process."""
    leaf = (events["kind"] != "region").to_numpy()
    if steps is not None:
        s = events["step"].to_numpy()
        leaf = leaf & (s >= steps[0]) & (s <= steps[1])
    rows = np.flatnonzero(leaf)  # event rows in the range, sorted by (rank, seq)
    n = rows.size
    if n == 0:
        empty = pd.DataFrame(columns=["rank", "region", "seconds"])
        return CriticalPath(0.0, 0.0, pd.DataFrame(columns=["rank", "first_row", "last_row", "seconds"]), empty,
                            pd.DataFrame(columns=["region", "seconds", "share", "mean_per_rank", "imbalance"]),
                            pd.Series(dtype=float))
    pos_of = np.full(len(events), -1, np.int64)
    pos_of[rows] = np.arange(n)
    rank = events["rank"].to_numpy()[rows]  # as stored (int32): widened where it is multiplied
    enter, exit_ = events["enter"].to_numpy(), events["exit"].to_numpy()[rows]  # enter: of event rows
    t0 = float(enter.min(where=leaf, initial=np.inf))
    wait = np.zeros(n)
    w_pos = pos_of[waits["event"].to_numpy()]
    ok = w_pos >= 0
    np.add.at(wait, w_pos[ok], waits["wait"].to_numpy()[ok])
    first = np.r_[True, rank[1:] != rank[:-1]]
    prev_exit = np.where(first, t0, np.r_[t0, exit_[:-1]])
    np.maximum(prev_exit, t0, out=prev_exit)
    busy = exit_ - prev_exit
    busy -= wait
    np.maximum(busy, 0.0, out=busy)
    makespan = float(exit_.max() - t0)
    # synchronization points: (q,k) -> end of the wait of (p,i), both inside the range.  A nonblocking collective's
    # completion call (q,k) may be entered after the others were released by its post, which the table does not
    # hold: the edge then takes back the time (q,k) was entered after the wait ended, so the path does not count
    # that time twice (it is never longer than the run)
    pe = pos_of[waits["peer_event"].to_numpy()]
    sync = ok & (pe >= 0)
    sp_p, sp_q = w_pos[sync], pe[sync]
    late = np.minimum(exit_[sp_p] - enter[rows[sp_q]], 0.0)
    del prev_exit, wait, exit_, pos_of  # large temporaries: n values each
    cum = np.empty(n + 1)  # cum[pos]: busy before position pos (over all ranks, in row order)
    cum[0] = 0.0
    np.cumsum(busy, out=cum[1:])
    starts = np.flatnonzero(first)
    ends = np.r_[starts[1:], n]  # one past the last position of each rank
    # nodes (rank, x, f): f=0 "before row x" (the start of an operation waited for), f=1 "after the wait of
    # row x"; each rank's start and end are f=0 points.  Consecutive points of a rank are joined by the busy
    # time between them; a wait adds (q, k, 0) -> (p, i, 1) with weight 0 (``late`` above: negative).
    x = np.concatenate([starts, ends, sp_q, sp_p])
    f = np.concatenate([np.zeros(starts.size + ends.size + sp_q.size, np.int64), np.ones(sp_p.size, np.int64)])
    r = np.concatenate([rank[starts], rank[ends - 1], rank[sp_q], rank[sp_p]]).astype(np.int64)
    code, node = np.unique(r * (2 * (n + 1)) + 2 * x + f, return_inverse=True)  # nodes sorted by (rank, x, f)
    node = node.ravel()
    k_r, k_x = np.divmod(code, 2 * (n + 1))
    k_x //= 2
    k_n = code.size
    source, sink = k_n, k_n + 1
    start_nodes, end_nodes, q_nodes, p_nodes = np.split(node, np.cumsum([starts.size, ends.size, sp_q.size]))
    # edges in networkx's insertion order of the former graph (ties pick the first best predecessor)
    chain = np.flatnonzero(k_r[1:] == k_r[:-1])
    src = np.concatenate([chain, np.full(starts.size, source), end_nodes, q_nodes])
    dst = np.concatenate([chain + 1, start_nodes, np.full(ends.size, sink), p_nodes])
    w = np.concatenate([cum[k_x[chain + 1]] - cum[k_x[chain]], enter[rows[starts]] - t0,
                        np.zeros(ends.size), late])
    dist, path = longest_path(k_n + 2, src, dst, w)
    length = float(dist[path[-1]])
    # segments: consecutive points of the path on one rank cover the rows between them
    a_n, b_n = path[:-1], path[1:]
    inner = (a_n < k_n) & (b_n < k_n)
    a_n, b_n = a_n[inner], b_n[inner]
    keep = (k_r[a_n] == k_r[b_n]) & (k_x[b_n] > k_x[a_n])
    sa, sb = k_x[a_n[keep]], k_x[b_n[keep]]
    cover = np.zeros(n + 1, np.int64)
    np.add.at(cover, sa, 1)
    np.add.at(cover, sb, -1)
    on = np.cumsum(cover[:-1]) > 0
    segments = pd.DataFrame({"rank": rank[sa].astype(np.int64), "first_row": rows[sa], "last_row": rows[sb - 1],
                             "seconds": cum[sb] - cum[sa]})
    del cum, cover
    code, names = _labels(events, rows)
    del rows
    labs, lab_of = np.unique(names.astype(str), return_inverse=True)  # labels in alphabetical order
    lab = lab_of.ravel().astype(np.int64)[code]
    del code
    table = pd.DataFrame({"rank": rank[on].astype(np.int64), "lab": lab[on], "seconds": busy[on]})
    del rank
    by_rr = table.groupby(["rank", "lab"], as_index=False, sort=True)["seconds"].sum()
    by_rr.insert(1, "region", labs.astype(object)[by_rr.pop("lab").to_numpy()])
    ranks = n_ranks if n_ranks is not None else int(events["rank"].max()) + 1
    mean = pd.Series(busy).groupby(lab).sum() / max(ranks, starts.size)  # starts: one per rank with an event
    on_path = table.groupby("lab")["seconds"].sum()
    by_region = pd.DataFrame({"seconds": on_path.to_numpy()},
                             index=pd.Index(labs.astype(object)[on_path.index.to_numpy()], name="region"))
    by_region["share"] = by_region["seconds"] / length if length > 0 else 0.0
    by_region["mean_per_rank"] = mean.reindex(on_path.index).to_numpy()
    by_region["imbalance"] = by_region["seconds"] - by_region["mean_per_rank"]
    by_region = by_region.sort_values("seconds", ascending=False).reset_index()
    return CriticalPath(length=length, makespan=makespan, segments=segments, by_region_rank=by_rr,
                        by_region=by_region, by_rank=table.groupby("rank")["seconds"].sum())


def _ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions ``lo[j] .. hi[j] - 1`` of every ``j``, concatenated, and the ``j`` of each."""
    lens = hi - lo
    owner = np.repeat(np.arange(lo.size), lens)
    return np.arange(owner.size) - np.repeat(np.cumsum(lens) - lens - lo, lens), owner


def longest_path(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longest path of a DAG given as edge arrays; returns every node's distance and the path's nodes.

    Kahn's topological sort one wave at a time (every node whose predecessors are all settled, at
    once), with networkx ``dag_longest_path``'s rule at each node: the distance is the best of
    ``distance(u) + weight`` over its in-edges, the first best in edge order is the predecessor, and a
    negative best restarts the path at the node (distance 0).  The path ends at the lowest-numbered node
    of the largest distance.

    >>> dist, path = longest_path(4, np.array([0, 1, 0, 2]), np.array([1, 3, 2, 3]), np.array([1.0, 1.0, 3.0, 0.5]))
    >>> dist.tolist(), path.tolist()
    ([0.0, 1.0, 3.0, 3.5], [0, 2, 3])
    """
    src, dst, weight = np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(weight, float)
    in_order = np.argsort(dst, kind="stable")
    in_ptr = np.r_[0, np.cumsum(np.bincount(dst, minlength=n))]
    out_order = np.argsort(src, kind="stable")
    out_ptr = np.r_[0, np.cumsum(np.bincount(src, minlength=n))]
    indeg = np.diff(in_ptr)
    dist, pred = np.zeros(n), np.full(n, -1, np.int64)
    wave = np.flatnonzero(indeg == 0)
    settled = 0
    while wave.size:
        settled += wave.size
        pos, owner = _ranges(in_ptr[wave], in_ptr[wave + 1])
        if pos.size:
            e = in_order[pos]
            cand = dist[src[e]] + weight[e]
            first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            best = np.maximum.reduceat(cand, first)
            hit = np.flatnonzero(cand == np.repeat(best, np.diff(np.r_[first, owner.size])))
            pick = hit[np.r_[True, owner[hit[1:]] != owner[hit[:-1]]]]  # the first best of each node
            v, ok = wave[owner[pick]], best >= 0
            dist[v[ok]] = best[ok]
            pred[v[ok]] = src[e[pick[ok]]]
        succ = dst[out_order[_ranges(out_ptr[wave], out_ptr[wave + 1])[0]]]
        u, c = np.unique(succ, return_counts=True)
        indeg[u] -= c
        wave = u[indeg[u] == 0]
    if settled < n:
        raise ValueError(f"the graph has a cycle ({n - settled} node(s) on or after it)")
    end = int(np.argmax(dist)) if n else -1
    path = []
    pred_l = pred.tolist()
    while end >= 0:
        path.append(end)
        end = pred_l[end]
    return dist, np.array(path[::-1], np.int64)
