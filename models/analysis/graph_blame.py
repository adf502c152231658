"""A graph method: backtracking from the largest waits to their root causes (after ScalAna, Jin et al., SC 2020).

ScalAna builds a program performance graph and, from each problematic vertex, backtracks along the
dependence edges to the vertex that caused it.  Here the graph is waitlab's wait-propagation graph
(:func:`~.propagation.propagation_graph`: waits -> the waits and excess work that caused them):

1. start from the largest waits, fewest first that together hold ``share`` (default 0.9) of the wait;
2. from each, follow at every wait the out-edge of most seconds (the dominant dependence) until a delay
   node (excess work of a rank in a call path: a root cause) is reached;
3. charge the start wait's seconds to that root cause's (rank, region).

A path ending at a wait with no cause leaves the wait unexplained.  The end of every node's path is
found once, in reverse topological order.

Examples
--------
Rank 0 computes 3 s, ranks 1 and 2 compute 1 s; 0 sends to 1, then 1 sends to 2: both waits (2 s each)
backtrack to rank 0's compute.

>>> from waitlab.models.analysis.protocol import RunData
>>> from waitlab.models.analysis.waitstates import make_events, wait_states
>>> ev = make_events(rank=[0, 0, 1, 1, 1, 2, 2], op=["compute", "send", "compute", "recv", "send", "compute", "recv"],
...                  enter=[0, 3, 0, 1, 3, 0, 1], exit=[3, 3, 1, 3, 3, 1, 3], match=[-1, 0, -1, 0, 1, -1, 1],
...                  done=[-1, 1, -1, 3, 4, -1, 6], peer=[-1, 1, -1, 0, 2, -1, 1])
>>> graph_model(RunData(ev, wait_states(ev)), share=1.0)[["rank", "region", "seconds"]].to_dict("records")
[{'rank': 0, 'region': '(top level)', 'seconds': 4.0}]
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from waitlab.models.analysis.propagation import propagation_graph
from waitlab.models.analysis.protocol import RunData


def _root_of(g: nx.DiGraph) -> dict[str, str | None]:
    """The root cause each node's dominant-dependence path ends at (None: an unexplained wait)."""
    end: dict[str, str | None] = {}
    for n in reversed(list(nx.topological_sort(g))):
        if g.nodes[n]["kind"] == "delay":
            end[n] = n
            continue
        out = list(g.out_edges(n, data="seconds"))
        if not out:
            end[n] = None
            continue
        best = max(out, key=lambda e: (e[2], e[1]))  # the dominant dependence; ties: the larger node name
        end[n] = end[best[1]]
    return end


def graph_model(run: RunData, *, share: float = 0.9, **_: Any) -> pd.DataFrame:
    """Graph backtracking blame (see the module docstring); ``share`` of the wait to start from."""
    g = propagation_graph(run.events, run.waits)
    waits = [(n, float(d["wait"])) for n, d in g.nodes(data=True) if d["kind"] == "wait" and d["wait"] > 0]
    empty = pd.DataFrame({"rank": np.zeros(0, np.int64), "region": np.zeros(0, object), "seconds": np.zeros(0)})
    empty.attrs = {"explains": "total_wait", "unexplained": run.total_wait}
    if not waits:
        return empty
    waits.sort(key=lambda x: (-x[1], int(x[0][1:])))
    w = np.array([s for _, s in waits])
    need = share * float(w.sum())
    k = len(w) if share >= 1 else int(np.searchsorted(np.cumsum(w), need - 1e-12 * abs(need))) + 1
    end = _root_of(g)
    cps = run.callpaths
    region_of = dict(zip(cps.names, cps.region, strict=True))
    rows = []
    for n, s in waits[:k]:
        root = end.get(n)
        if root is not None:
            d = g.nodes[root]
            rows.append((int(d["rank"]), str(region_of.get(d["callpath"], "(top level)")), str(d["callpath"]), s))
    if not rows:
        return empty
    out = pd.DataFrame(rows, columns=["rank", "region", "callpath", "seconds"])
    out = out.groupby(["rank", "region", "callpath"], as_index=False, sort=True)["seconds"].sum()
    out = out.sort_values(["seconds", "rank"], ascending=[False, True], kind="stable").reset_index(drop=True)
    out.attrs = {"explains": "total_wait", "unexplained": run.total_wait - float(out["seconds"].sum())}
    return out


__all__ = ["graph_model"]
