"""The Bokeh figures of ``report.html``: time budget, wait heatmap, timeline, blame, critical path, propagation.

Every figure takes its colours from :mod:`waitlab.experiments.report.palette`.  The timeline's data source
(``wl-seg``) and message arrows (``wl-msg``) start empty: ``report_timeline.js`` fills them for the rank
range on screen from the packed columns of :mod:`waitlab.experiments.report.html_data`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
from bokeh.models import ColumnDataSource, CustomJS, FactorRange, HoverTool, LinearColorMapper, Range1d
from bokeh.models.annotations.arrows import Arrow, VeeHead
from bokeh.plotting import figure
from bokeh.transform import dodge

from waitlab.experiments.report.html_data import budget_bins, rank_step_wait
from waitlab.experiments.report.palette import (
    CAUSE,
    HEAT,
    INK,
    KIND_COLOURS,
    OTHER,
    PATTERN_COLOURS,
    TRUTH,
    WAIT,
    model_colour,
)
from waitlab.models.analysis.propagation import propagation_graph

#: Most edges of the wait-propagation picture; most waits whose graph is built.
GRAPH_EDGES, GRAPH_MAX_WAITS = 40, 20_000
WIDTH = 1100


def budget_figure(columns: Sequence[str], n_ranks: int) -> Any:
    """Stacked bars of ``columns`` (of compute, perturbation, communication, wait and idle) per rank (bins beyond 256
    ranks), empty: the page fills ``wl-budget-src`` and sets the height of the y range
    (:func:`~waitlab.experiments.report.html_data.budget_payload`); its ranges are set, not computed from data that
    is not there yet."""
    per = budget_bins(n_ranks)
    bars = -(-n_ranks // per)
    src = ColumnDataSource({"rank": [], **{c: [] for c in columns}}, name="wl-budget-src")
    colours = {"compute": KIND_COLOURS["compute"], "perturbation": KIND_COLOURS["noise"],
               "communication": KIND_COLOURS["mpi"], "wait": WAIT, "idle": OTHER}
    xl = "rank" if per == 1 else f"first rank of a bin of {per} ranks (mean per rank)"
    p = figure(title="Time budget per rank", width=WIDTH, height=300, x_axis_label=xl, y_axis_label="seconds (s)",
               tools="xpan,xwheel_zoom,box_zoom,reset,hover", tooltips="rank @rank: $name @$name{0.0000} s",
               x_range=Range1d(start=-0.6 * per, end=(bars - 0.4) * per), y_range=Range1d(start=0.0, end=1.0))
    p.vbar_stack(list(columns), x="rank", width=0.8 * per, source=src, color=[colours[c] for c in columns],
                 legend_label=list(columns))
    p.legend.click_policy = "hide"
    p.add_layout(p.legend[0], "right")
    return p


def heatmap_figure(waits: pd.DataFrame, n_ranks: int) -> Any:
    """Wait per (rank, step); a click shows that rank's window in the timeline."""
    z, first, steps = rank_step_wait(waits, n_ranks)
    per = int(first[1] - first[0]) if first.size > 1 else 1
    mapper = LinearColorMapper(palette=list(HEAT),
                               low=0.0, high=float(z.max()) if z.size and z.max() > 0 else 1.0)
    p = figure(title="Wait per rank and BSP step (click a cell: its ranks in the timeline below)", width=WIDTH,
               height=380, x_axis_label="BSP step (column 0: outside steps)" if steps.size and steps[0] < 0
               else "BSP step", y_axis_label="rank", tools="pan,wheel_zoom,box_zoom,reset,tap",
               x_range=Range1d(start=-0.5, end=max(steps.size, 1) - 0.5), y_range=Range1d(start=n_ranks, end=0))
    p.image(image=[z], x=-0.5, y=0, dw=max(steps.size, 1), dh=z.shape[0] * per, color_mapper=mapper)  # type: ignore[call-arg]
    p.add_tools(HoverTool(tooltips=[("rank", "$y{0}"), ("step column", "$x{0}"), ("wait (s)", "@image{0.0000}")]))
    p.js_on_event("tap", CustomJS(code="window.WAITLAB.showRanks(Math.max(0, Math.floor(cb_obj.y) - "
                                       "window.WAITLAB.window / 2));"))
    return p


def timeline_figure() -> Any:
    """Ranks x time, empty: the page fills ``wl-seg`` (bars) and ``wl-msg`` (message arrows)."""
    seg = ColumnDataSource({k: [] for k in ("left", "right", "bottom", "top", "color", "label", "text")},
                           name="wl-seg")
    msg = ColumnDataSource({k: [] for k in ("x_start", "y_start", "x_end", "y_end")}, name="wl-msg")
    p = figure(width=WIDTH, height=520, name="wl-timeline-fig", x_axis_label="simulated time (s)",
               y_axis_label="rank", tools="xwheel_zoom,xpan,box_zoom,reset,save", active_drag="box_zoom",
               active_scroll="xwheel_zoom", y_range=Range1d(start=16, end=-1),
               x_range=Range1d(start=0, end=1), output_backend="canvas")
    bars = p.quad(left="left", right="right", bottom="bottom", top="top", color="color", legend_field="label",
                  source=seg, line_width=0)
    p.add_tools(HoverTool(renderers=[bars], tooltips="<div style='max-width:420px'>@text{safe}</div>"))
    p.add_layout(Arrow(end=VeeHead(size=6, fill_color=INK, line_color=INK), line_color=INK, line_width=1,
                       x_start="x_start", y_start="y_start", x_end="x_end", y_end="y_end",
                       source=msg))  # type: ignore[call-arg]  # the stubs name line_* body_line_*
    p.legend.orientation = "horizontal"
    p.add_layout(p.legend[0], "below")
    return p


def blame_figure(diag: dict[str, Any]) -> Any:
    """Blame per region: each model and the ground truth side by side (one colour per model, truth green)."""
    models = list(diag.get("models", {}).values())
    truth = diag.get("truth") or {}
    regions: list[str] = []
    for m in models:
        for r in list(m.get("by_region", {}))[:8]:
            if r not in regions:
                regions.append(r)
    regions = regions[:10] or ["(none)"]
    series = [(m["name"], [float(m["by_region"].get(r, 0.0)) for r in regions], model_colour(m["name"], i))
              for i, m in enumerate(models)]
    if truth:
        series.append(("ground truth", [max(0.0, float(truth.get("by_region", {}).get(r, 0.0))) for r in regions],
                       TRUTH))
    p = figure(x_range=FactorRange(factors=regions), width=WIDTH, height=360, y_axis_label="seconds of wait (s)",
               title="Blame per region: each model next to the ground truth", tools="hover,save",
               tooltips="$name, @x: @$name{0.0000} s", name="wl-blame")
    src = ColumnDataSource({"x": regions, **{name: ys for name, ys, _ in series}})
    w = 0.8 / max(len(series), 1)
    for i, (name, _, colour) in enumerate(series):
        p.vbar(x=dodge("x", (i - (len(series) - 1) / 2) * w, range=p.x_range), top=name, width=w * 0.95,
               source=src, color=colour, legend_label=name, name=name)
    p.add_layout(p.legend[0], "right")
    return p


def critical_figure(cp: dict[str, Any]) -> Any:
    """Time on the critical path per region."""
    by = cp.get("by_region", [])
    regions = [r["region"] for r in by][::-1] or ["(none)"]
    src = ColumnDataSource({"region": regions, "seconds": [r["seconds"] for r in by][::-1] or [0.0],
                            "color": [KIND_COLOURS["mpi"] if r.startswith("MPI_") else CAUSE for r in regions]})
    p = figure(y_range=FactorRange(factors=regions), width=WIDTH, height=60 + 28 * len(regions), tools="hover,save",
               title=f"Critical path: {cp['length']:.4g} s of the {cp['makespan']:.4g} s makespan, by region",
               x_axis_label="seconds on the path (s)", tooltips="@region: @seconds{0.0000} s")
    p.hbar(y="region", right="seconds", height=0.7, color="color", source=src)
    return p


def propagation_figure(events: pd.DataFrame, waits: pd.DataFrame) -> tuple[Any | None, str]:
    """The wait-propagation graph folded to ranks: root causes (blue) and the ranks that waited (red).

    Returns the figure (None when not drawn) and a sentence saying what it shows.
    """
    if not len(waits) or len(waits) > GRAPH_MAX_WAITS:
        return None, (f"Wait-propagation graph: not drawn ({len(waits):,} wait states; drawn up to "
                      f"{GRAPH_MAX_WAITS:,}); `waitlab export --graphml` writes the whole graph.")
    g = propagation_graph(events, waits)
    flows: dict[tuple[str, str], float] = {}
    for a, b, s in g.edges(data="seconds"):
        na, nb = g.nodes[a], g.nodes[b]
        cause = f"cause: rank {nb['rank']} {nb.get('callpath', '')}".strip() if nb["kind"] == "delay" \
            else f"rank {nb['rank']} waiting"
        key = (f"rank {na['rank']} waiting", cause)
        flows[key] = flows.get(key, 0.0) + float(s)
    top = sorted(flows.items(), key=lambda kv: (-kv[1], kv[0]))[:GRAPH_EDGES]
    if not top:
        return None, "Wait-propagation graph: no wait has a cause inside the run."
    rank_graph = nx.DiGraph()
    for (a, b), s in top:
        rank_graph.add_edge(a, b, seconds=s)
    pos = nx.spring_layout(rank_graph, seed=1, k=1.2 / max(1.0, np.sqrt(rank_graph.number_of_nodes())))
    names = sorted(rank_graph.nodes)
    xy = np.array([pos[n] for n in names])
    nodes = ColumnDataSource({"x": xy[:, 0], "y": xy[:, 1], "name": names,
                              "color": [CAUSE if n.startswith("cause") else PATTERN_COLOURS["late_sender"]
                                        for n in names]})
    smax = max(s for _, s in top)
    edges = ColumnDataSource({"x_start": [pos[a][0] for (a, _), _ in top], "y_start": [pos[a][1] for (a, _), _ in top],
                              "x_end": [pos[b][0] for (_, b), _ in top], "y_end": [pos[b][1] for (_, b), _ in top],
                              "width": [0.5 + 5 * s / smax for _, s in top]})
    p = figure(width=WIDTH, height=460, tools="pan,wheel_zoom,reset,save", x_axis_location=None,
               y_axis_location=None, title=f"Wait propagation: the {len(top)} largest flows, from a waiting rank to "
               "what it waited for (a rank that waited itself, or a root cause in blue); width = seconds")
    p.grid.visible = False
    p.add_layout(Arrow(end=VeeHead(size=8, fill_color=INK, line_color=INK), line_color=OTHER,
                       line_width="width", x_start="x_start", y_start="y_start", x_end="x_end", y_end="y_end",
                       source=edges))  # type: ignore[call-arg]
    r = p.scatter("x", "y", size=14, color="color", source=nodes)
    p.text("x", "y", text="name", source=nodes, text_font_size="9pt", x_offset=8, y_offset=-4)
    p.add_tools(HoverTool(renderers=[r], tooltips="@name"))
    return p, f"{len(top)} flows of {len(flows)}; seconds: " + ", ".join(f"{a} -> {b} {s:.4g} s"
                                                                         for (a, b), s in top[:5])
