"""Pictures of the wait-propagation graph (:mod:`waitlab.models.analysis.propagation`) for small runs."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
from matplotlib.lines import Line2D

from waitlab.experiments.report.canvas import subplots
from waitlab.experiments.report.palette import CAUSE, INK, PATTERN_COLOURS, WAIT

#: Largest graph drawn node by node.
DRAW_MAX_NODES = 400


def draw_propagation(graph: nx.DiGraph, out_png: Path, title: str = "") -> bool:
    """Draw the graph at (time, rank): waits coloured by pattern, root causes blue, arrows "caused by".

    Node area grows with the seconds of the wait (or of the delay).  Returns False (and draws nothing) for a
    graph without nodes (a run without waits) and above :data:`DRAW_MAX_NODES` nodes: use the GraphML file with
    Gephi or yEd for large runs.
    """
    if not 0 < graph.number_of_nodes() <= DRAW_MAX_NODES:
        return False
    pos = {n: (d["time"], d["rank"]) for n, d in graph.nodes(data=True)}
    secs = np.array([d.get("wait", d.get("delay", 0.0)) for _, d in graph.nodes(data=True)], float)
    size = 40 + 400 * secs / secs.max() if secs.size and secs.max() > 0 else np.full(secs.size, 60.0)
    colour = [CAUSE if d["kind"] == "delay" else PATTERN_COLOURS.get(d.get("pattern", ""), WAIT)
              for _, d in graph.nodes(data=True)]
    ranks = sorted({d["rank"] for _, d in graph.nodes(data=True)})
    fig, ax = subplots(figsize=(11, max(3.0, 0.35 * len(ranks) + 1.5)))
    nx.draw_networkx_edges(graph, pos, ax=ax, edge_color=INK, width=0.8, arrowsize=8, node_size=size,
                           connectionstyle="arc3,rad=0.08")
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_color=colour, node_size=size, linewidths=0.5,
                           edgecolors=INK)
    xs = np.array([p[0] for p in pos.values()], float)
    pad = 0.03 * float(xs.max() - xs.min()) if xs.size and xs.max() > xs.min() else 1.0
    ax.set_xlim(float(xs.min()) - pad, float(xs.max()) + pad)
    ax.set_yticks(ranks)
    ax.set_ylim(max(ranks, default=0) + 0.7, min(ranks, default=0) - 0.7)
    ax.tick_params(left=True, bottom=True, labelleft=True, labelbottom=True)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("rank")
    present = sorted({d["pattern"] for _, d in graph.nodes(data=True) if d["kind"] == "wait"})
    handles = [Line2D([], [], marker="o", ls="", color=PATTERN_COLOURS.get(p, WAIT), label=f"wait: {p}")
               for p in present]
    handles.append(Line2D([], [], marker="o", ls="", color=CAUSE, label="root cause: excess work"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_title(title or "wait propagation (arrow: caused by)")
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    return True
