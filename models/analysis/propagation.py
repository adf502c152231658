"""The wait-propagation graph: wait states as nodes, "caused by" as edges (DESIGN.md section 6).

Every wait state ``(p,i)`` waiting for ``(q,k)`` has a synchronization interval
``zeta = ((p,i',i),(q,k',k))`` (:mod:`waitlab.models.analysis.syncpoints`).  What made ``q`` arrive
late is what CWP-DM walks: the waits ``omega(q,l)`` of ``q`` strictly inside ``(k',k)`` (propagated,
"indirect" wait) and ``q``'s excess time ``delta_hat`` over ``p`` in the interval (Wu et al., formula 2;
the "direct" cause).  The graph has

* one node ``w<row>`` per wait state (row of the ``waits`` table): ``kind="wait"``, ``rank``,
  ``pattern``, ``op``, ``wait`` (seconds), ``step``, ``region``, ``time`` (enter of the waiting
  operation), and, when a :class:`~waitlab.models.analysis.cwpdm.CwpdmResult` is given, ``direct`` and
  ``indirect``;
* one node ``d<interval>`` per synchronization interval of ``q`` in which ``q`` did more work than a
  waiting partner: ``kind="delay"``, ``rank`` (q), ``delay`` (largest ``delta_hat`` over the waits it
  caused), ``callpath`` (the call path with the largest ``delta``),
  ``time`` (enter of ``(q,k)`` minus half the delay: the middle of the excess work);
* edges from a wait to each of its causes, ``relation="caused_by"``, ``seconds`` = the inner wait
  ``omega(q,l)`` or ``delta_hat``.

Root causes are the delay nodes (sinks); waits with no out-edge are unexplained.

Examples
--------
Rank 0 computes 3 s, ranks 1 and 2 compute 1 s; 0 sends to 1, then 1 sends to 2: rank 1 waits 2 s
for rank 0's extra work, rank 2's wait of 2 s is caused by rank 1's wait.

>>> from waitlab.models.analysis.waitstates import make_events, wait_states
>>> ev = make_events(rank=[0, 0, 1, 1, 1, 2, 2], op=["compute", "send", "compute", "recv", "send", "compute", "recv"],
...                  enter=[0, 3, 0, 1, 3, 0, 1], exit=[3, 3, 1, 3, 3, 1, 3], match=[-1, 0, -1, 0, 1, -1, 1],
...                  done=[-1, 1, -1, 3, 4, -1, 6], peer=[-1, 1, -1, 0, 2, -1, 1])
>>> g = propagation_graph(ev, wait_states(ev))
>>> sorted(g.edges(data="seconds"))
[('w0', 'd0', 2.0), ('w1', 'w0', 2.0)]
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd

from waitlab.models.analysis.cwpdm import CwpdmResult
from waitlab.models.analysis.syncpoints import SyncPoints, sync_points


def propagation_graph(events: pd.DataFrame, waits: pd.DataFrame, *, sync: SyncPoints | None = None,
                      cwp: CwpdmResult | None = None) -> nx.DiGraph:
    """Build the wait-propagation graph of a run (see the module docstring for nodes and edges)."""
    sp = sync if sync is not None else sync_points(events, waits)
    g = nx.DiGraph()
    if len(sp) == 0:
        return g
    enter = events["enter"].to_numpy()
    row = sp.index  # waits-table row of each sync point
    step = waits["step"].to_numpy() if "step" in waits else np.full(len(waits), -1)
    region = waits["region"].astype(str).to_numpy() if "region" in waits else np.full(len(waits), "")
    pattern = waits["pattern"].astype(str).to_numpy()
    op = waits["op"].astype(str).to_numpy()
    extra: dict[str, np.ndarray] = {}
    if cwp is not None:
        extra = {k: cwp.waits[k].to_numpy() for k in ("direct", "indirect")}
    for j, w in enumerate(row.tolist()):
        attrs = {"kind": "wait", "rank": int(sp.rank[j]), "pattern": str(pattern[w]), "op": str(op[w]),
                 "wait": float(sp.wait[j]), "step": int(step[w]), "region": str(region[w]),
                 "time": float(enter[sp.event[j]])}
        attrs.update({k: float(v[w]) for k, v in extra.items()})
        g.add_node(f"w{w}", **attrs)
    # propagated waits: the waits of q strictly inside (k', k) -- rows inner_lo:inner_hi of the sync points
    has = sp.q_interval >= 0
    lens = np.where(has, sp.inner_hi - sp.inner_lo, 0)
    src = np.repeat(np.arange(len(sp)), lens)
    dst = np.repeat(sp.inner_lo, lens) + (np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens))
    g.add_edges_from((f"w{a}", f"w{b}", {"relation": "caused_by", "seconds": float(s)}) for a, b, s in
                     zip(row[src].tolist(), row[dst].tolist(), sp.wait[dst].tolist(), strict=True))
    # direct causes: q's excess work over p in the interval (delta_hat, Wu et al. formula 2)
    w_of, cp, delta = sp.deltas(np.flatnonzero(has))
    if w_of.size:
        total = np.bincount(w_of, weights=delta, minlength=len(sp))
        order = np.lexsort((-delta, w_of))
        first = order[np.r_[True, w_of[order][1:] != w_of[order][:-1]]]
        top_cp = np.full(len(sp), -1)
        top_cp[w_of[first]] = cp[first]
        for j in np.flatnonzero(total > 0).tolist():
            iq = int(sp.q_interval[j])
            node = f"d{iq}"
            if node not in g:
                g.add_node(node, kind="delay", rank=int(sp.peer_rank[j]), delay=0.0,
                           callpath=sp.callpaths.names[int(top_cp[j])],
                           time=float(enter[sp.peer_event[j]] - 0.5 * total[j]))
            g.nodes[node]["delay"] = max(g.nodes[node]["delay"], float(total[j]))
            g.add_edge(f"w{int(row[j])}", node, relation="caused_by", seconds=float(total[j]))
    return g


def write_graphml(graph: nx.DiGraph, path: Path) -> None:
    """Write the graph as GraphML (readable by networkx, Gephi, yEd, Cytoscape)."""
    nx.write_graphml(graph, str(path))


def root_causes(graph: nx.DiGraph) -> pd.DataFrame:
    """Total wait each delay node explains, directly or through chains of propagated waits.

    A wait's seconds are split over its out-edges in proportion to their ``seconds`` and followed to
    the delay nodes (waits are processed in reverse topological order, so each is split once).
    """
    share: dict[str, float] = {n: float(d.get("wait", 0.0)) for n, d in graph.nodes(data=True)}
    got: dict[str, float] = {}
    for n in nx.topological_sort(graph):
        out = list(graph.out_edges(n, data="seconds"))
        if graph.nodes[n]["kind"] == "delay" or not out:
            continue
        norm = sum(s for _, _, s in out)
        for _, m, s in out:
            if graph.nodes[m]["kind"] == "delay":
                got[m] = got.get(m, 0.0) + share[n] * s / norm
            else:
                share[m] += share[n] * s / norm
    rows = [{"node": m, "rank": graph.nodes[m]["rank"], "callpath": graph.nodes[m]["callpath"], "explained": v}
            for m, v in got.items()]
    return pd.DataFrame(rows, columns=["node", "rank", "callpath", "explained"]).sort_values(
        "explained", ascending=False, ignore_index=True)
