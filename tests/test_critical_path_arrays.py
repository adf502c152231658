"""The critical path on arrays against plain networkx references (issue 41).

``longest_path`` is checked against ``networkx.dag_longest_path`` on random DAGs, and
``critical_path`` against a plain, uncondensed graph of the run (two points per event) whose longest
path networkx finds.  Weights are distinct powers of two (plus integers) so that no two paths have the
same length and the path is unique.
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waitlab.models.analysis.critical_path import critical_path, longest_path
from waitlab.models.analysis.waitstates import make_events, wait_states


@st.composite
def dags(draw: st.DrawFn, distinct: bool = True) -> tuple[int, list[tuple[int, int]], list[float]]:
    n = draw(st.integers(2, 14))
    perm = draw(st.permutations(range(n)))  # node numbers are not a topological order
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=min(len(pairs), 40), unique=True))
    edges = [(perm[i], perm[j]) for i, j in chosen]
    if distinct:
        order = draw(st.permutations(range(len(edges))))
        weights = [2.0 ** -(k + 1) + draw(st.integers(0, 3)) for k in order]
    else:
        weights = [float(draw(st.integers(0, 2))) for _ in edges]
    return n, edges, weights


@settings(max_examples=60, deadline=None)
@given(dags())
def test_longest_path_is_networkx_dag_longest_path(dag):
    n, edges, weights = dag
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_weighted_edges_from((a, b, w) for (a, b), w in zip(edges, weights, strict=True))
    dist, path = longest_path(n, np.array([a for a, _ in edges]), np.array([b for _, b in edges]), np.array(weights))
    assert path.tolist() == nx.dag_longest_path(g)
    assert dist[path[-1]] == nx.dag_longest_path_length(g)


@settings(max_examples=60, deadline=None)
@given(dags(distinct=False))
def test_longest_path_breaks_ties_as_networkx(dag):
    """With ties, each node keeps its first best in-edge; a sink after every node makes the end unique."""
    n, edges, weights = dag
    edges = edges + [(v, n) for v in range(n)]
    weights = weights + [1.0] * n
    g = nx.DiGraph()
    g.add_weighted_edges_from((a, b, w) for (a, b), w in zip(edges, weights, strict=True))
    dist, path = longest_path(n + 1, np.array([a for a, _ in edges]), np.array([b for _, b in edges]),
                              np.array(weights))
    assert path.tolist() == nx.dag_longest_path(g)
    assert dist[path[-1]] == nx.dag_longest_path_length(g)


def test_longest_path_refuses_a_cycle():
    with pytest.raises(ValueError, match="cycle"):
        longest_path(3, np.array([0, 1, 2]), np.array([1, 2, 1]), np.ones(3))


@st.composite
def runs(draw: st.DrawFn) -> pd.DataFrame:
    """Steps of compute, a message to the next rank (eager send, blocking receive) and a barrier."""
    ranks, steps = draw(st.integers(2, 4)), draw(st.integers(1, 3))
    slots = draw(st.permutations(range(ranks * steps)))
    work = np.array([draw(st.integers(0, 4)) + 2.0 ** -(k + 1) for k in slots]).reshape(ranks, steps)
    msg = draw(st.lists(st.booleans(), min_size=steps, max_size=steps))
    rows: dict[int, list[tuple]] = {r: [] for r in range(ranks)}  # rank -> (op, enter, exit, match, peer)
    t = np.zeros(ranks)
    mid = 0
    for s in range(steps):
        t = t + work[:, s]
        for r in range(ranks):
            rows[r].append(("compute", t[r] - work[r, s], t[r], -1, -1))
        if msg[s]:
            sent = t.copy()
            for r in range(ranks):
                if r < ranks - 1:
                    rows[r].append(("send", t[r], t[r], mid + r, r + 1))
                if r > 0:
                    end = max(t[r], sent[r - 1])
                    rows[r].append(("recv", t[r], end, mid + r - 1, r - 1))
                    t[r] = end
            mid += ranks
        last = t.max()
        for r in range(ranks):
            rows[r].append(("barrier", t[r], last, 10_000 + s, -1))
        t[:] = last
    flat = [(r, *x) for r in range(ranks) for x in rows[r]]
    ev = make_events(rank=[f[0] for f in flat], op=[f[1] for f in flat], enter=[f[2] for f in flat],
                     exit=[f[3] for f in flat], match=[f[4] for f in flat], peer=[f[5] for f in flat],
                     done=[i if f[1] in ("send", "recv") else -1 for i, f in enumerate(flat)])
    ev["step"] = np.array([0] * len(flat), np.int32)
    return ev


def plain_reference(ev: pd.DataFrame, waits: pd.DataFrame) -> tuple[float, dict[int, float]]:
    """Length and busy seconds per rank on the longest path of a graph with two points per event.

    ``("b", i)`` is the start of row ``i``, ``("w", i)`` the end of its wait: ``b_i -> w_i`` weighs 0, and
    ``w_i -> b_(next row of the rank)`` (or the rank's end) weighs row i's busy time, ``exit_i -
    max(exit of the previous row, t0) - wait_i``; a wait of row i caused by row k adds ``b_k -> w_i``.
    """
    t0 = float(ev["enter"].min())
    wait = waits.groupby("event")["wait"].sum().reindex(range(len(ev)), fill_value=0.0).to_numpy()
    g = nx.DiGraph()
    prev_exit: dict[int, float] = {}
    last: dict[int, int] = {}
    busy: dict[int, float] = {}
    for i, (r, a, b) in enumerate(zip(ev["rank"].tolist(), ev["enter"].tolist(), ev["exit"].tolist(), strict=True)):
        before = prev_exit.get(r, t0)
        busy[i] = max(b - max(before, t0) - wait[i], 0.0)
        if r in last:
            g.add_edge(("w", last[r]), ("b", i), weight=busy[last[r]])
        else:
            g.add_edge("source", ("b", i), weight=a - t0)
        g.add_edge(("b", i), ("w", i), weight=0.0)
        prev_exit[r], last[r] = b, i
    for r, i in last.items():
        g.add_edge(("w", i), ("end", r), weight=busy[i])
        g.add_edge(("end", r), "sink", weight=0.0)
    for p, q in zip(waits["event"].tolist(), waits["peer_event"].tolist(), strict=True):
        if q >= 0:
            g.add_edge(("b", q), ("w", p), weight=0.0)
    path = nx.dag_longest_path(g)
    on_path = [a[1] for a, b in itertools.pairwise(path)
               if isinstance(a, tuple) and a[0] == "w" and isinstance(b, tuple) and b[0] in ("b", "end")]
    per_rank: dict[int, float] = {}
    for i in on_path:
        r = int(ev["rank"].iloc[i])
        per_rank[r] = per_rank.get(r, 0.0) + busy[i]
    return nx.path_weight(g, path, "weight"), per_rank


@settings(max_examples=40, deadline=None)
@given(runs())
def test_critical_path_matches_a_plain_graph_of_every_event(ev):
    waits = wait_states(ev)
    cp = critical_path(ev, waits)
    length, per_rank = plain_reference(ev, waits)
    assert cp.length == pytest.approx(length, abs=1e-12)
    assert cp.makespan == pytest.approx(float(ev["exit"].max() - ev["enter"].min()))
    got = {int(k): float(v) for k, v in cp.by_rank.items() if v > 0}
    want = {k: v for k, v in per_rank.items() if v > 0}
    assert got == pytest.approx(want, abs=1e-12)
    assert float(cp.segments["seconds"].sum()) == pytest.approx(length, abs=1e-12)
