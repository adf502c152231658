"""The Bokeh figures of ``report.html``: time budget, wait heatmap, timeline, blame, critical path, propagation.

Every figure takes its colours from :mod:`waitlab.experiments.report.palette`.  The timeline's data source
(``wl-seg``) and message arrows (``wl-msg``) start empty: ``report_timeline.js`` fills them for the rank
range on screen from the packed columns of :mod:`waitlab.experiments.report.html_data`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from bokeh.models import ColumnDataSource, CustomJS, FactorRange, HoverTool, LinearColorMapper, Range1d
from bokeh.models.annotations import ColorBar
from bokeh.models.annotations.arrows import Arrow, VeeHead
from bokeh.palettes import Greys256
from bokeh.plotting import figure
from bokeh.transform import dodge

from waitlab.experiments.report.html_data import comm_matrix
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

if TYPE_CHECKING:
    import pandas as pd

#: Most waits whose propagation graph is built; most waits and causes drawn (as propagation.png:
#: :data:`waitlab.experiments.report.graph_plots.DRAW_MAX_NODES`, not imported: it would bring matplotlib).
GRAPH_MAX_WAITS, DRAW_MAX_NODES = 20_000, 400
#: Largest run whose communication matrix is drawn (a cell per rank pair).
MATRIX_MAX_RANKS = 64
WIDTH = 1100


def budget_figure(columns: Sequence[str]) -> Any:
    """Stacked bars of ``columns`` (of compute, perturbation, communication, wait and idle) per rank (or per bin of
    ranks beyond 256 ranks), empty: the page fills ``wl-budget-src`` (its column ``w`` the bars' width) and sets the
    ranges and the x axis's label (:func:`~waitlab.experiments.report.html_data.budget_payload`)."""
    src = ColumnDataSource({"rank": [], "w": [], **{c: [] for c in columns}}, name="wl-budget-src")
    colours = {"compute": KIND_COLOURS["compute"], "perturbation": KIND_COLOURS["noise"],
               "communication": KIND_COLOURS["mpi"], "wait": WAIT, "idle": OTHER}
    p = figure(title="Time budget per rank", width=WIDTH, height=300, x_axis_label="rank", y_axis_label="seconds (s)",
               tools="xpan,xwheel_zoom,box_zoom,reset,hover", tooltips="rank @rank: $name @$name{0.0000} s",
               x_range=Range1d(start=-0.6, end=0.6), y_range=Range1d(start=0.0, end=1.0))
    p.vbar_stack(list(columns), x="rank", width="w", source=src, color=[colours[c] for c in columns],
                 legend_label=list(columns))
    p.legend.click_policy = "hide"
    p.add_layout(p.legend[0], "right")
    return p


def heatmap_figure() -> Any:
    """Wait per (rank, step), empty: the page fills ``wl-heat-src`` (one image), the colour mapper's top
    (``wl-heat-colours``), the ranges and the x axis's label
    (:func:`~waitlab.experiments.report.html_data.heatmap_payload`); a click shows that rank's window in the
    timeline."""
    src = ColumnDataSource({k: [] for k in ("image", "x", "y", "dw", "dh")}, name="wl-heat-src")
    mapper = LinearColorMapper(palette=list(HEAT), low=0.0, high=1.0, name="wl-heat-colours")
    p = figure(title="Wait per rank and BSP step (click a cell: its ranks in the timeline below)", width=WIDTH,
               height=380, x_axis_label="BSP step", y_axis_label="rank", tools="pan,wheel_zoom,box_zoom,reset,tap",
               x_range=Range1d(start=-0.5, end=0.5), y_range=Range1d(start=1, end=0))
    p.image(image="image", x="x", y="y", dw="dw", dh="dh", source=src, color_mapper=mapper)  # type: ignore[call-arg]
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
               title=f"Critical path: {cp['length']:.4g} s of the {cp['makespan']:.4g} s from the first activity to "
               "the last, by region",
               x_axis_label="seconds on the path (s)", tooltips="@region: @seconds{0.0000} s")
    p.hbar(y="region", right="seconds", height=0.7, color="color", source=src)
    return p


def propagation_figure(events: pd.DataFrame, waits: pd.DataFrame) -> tuple[Any | None, str]:
    """The wait-propagation graph at (simulated time, rank), as ``waitlab export --graphml`` draws
    ``propagation.png`` (:func:`~waitlab.experiments.report.graph_plots.draw_propagation`): wait states in their
    pattern's colour, root causes (excess work) in blue, an arrow from each wait to what caused it.

    Returns the figure (None when not drawn) and a sentence saying what it shows.
    """
    if not len(waits) or len(waits) > GRAPH_MAX_WAITS:
        return None, (f"Wait-propagation graph: not drawn ({len(waits):,} wait states; drawn up to "
                      f"{GRAPH_MAX_WAITS:,}); `waitlab export --graphml` writes the whole graph.")
    from waitlab.models.analysis.propagation import propagation_graph  # networkx (0.3 s): only to build a graph

    g = propagation_graph(events, waits)
    if not g.number_of_edges():
        return None, "Wait-propagation graph: no wait has a cause inside the run."
    if g.number_of_nodes() > DRAW_MAX_NODES:
        return None, (f"Wait-propagation graph: not drawn ({g.number_of_nodes():,} waits and causes; drawn up to "
                      f"{DRAW_MAX_NODES}); `waitlab export --graphml` writes it for Gephi or yEd.")
    names = list(g.nodes)
    at = {n: i for i, n in enumerate(names)}
    data = [g.nodes[n] for n in names]
    secs = np.array([d.get("wait", d.get("delay", 0.0)) for d in data], float)
    smax = float(secs.max()) if secs.size and secs.max() > 0 else 1.0
    nodes = ColumnDataSource({
        "time": [float(d["time"]) for d in data], "rank": [int(d["rank"]) for d in data], "seconds": secs,
        "size": 7 + 16 * np.sqrt(secs / smax),
        "colour": [CAUSE if d["kind"] == "delay" else PATTERN_COLOURS.get(d.get("pattern", ""), WAIT) for d in data],
        "label": ["root cause: excess work" if d["kind"] == "delay" else f"wait: {d.get('pattern', '')}"
                  for d in data]}, name="wl-propagation-src")
    a, b = zip(*g.edges, strict=True)
    ia, ib = np.array([at[x] for x in a]), np.array([at[x] for x in b])
    t, r = np.asarray(nodes.data["time"], float), np.asarray(nodes.data["rank"], float)
    edges = ColumnDataSource({"x_start": t[ia], "y_start": r[ia], "x_end": t[ib], "y_end": r[ib]})
    ranks = sorted({int(x) for x in r})
    span = float(t.max() - t.min()) or 1.0
    p = figure(width=WIDTH, height=max(260, 26 * len(ranks) + 110), tools="pan,wheel_zoom,box_zoom,reset,save",
               x_range=Range1d(start=float(t.min()) - 0.03 * span, end=float(t.max()) + 0.03 * span),
               y_range=Range1d(start=max(ranks) + 0.7, end=min(ranks) - 0.7), x_axis_label="simulated time (s)",
               y_axis_label="rank", title="Wait propagation: each wait (coloured by pattern) points to what caused it "
               "(a wait of another rank, or excess work in blue); area = seconds")
    p.yaxis.ticker = ranks
    p.add_layout(Arrow(end=VeeHead(size=6, fill_color=INK, line_color=INK), line_color=INK, line_width=0.8,
                       line_alpha=0.6, x_start="x_start", y_start="y_start", x_end="x_end", y_end="y_end",
                       source=edges))  # type: ignore[call-arg]
    dots = p.scatter("time", "rank", size="size", color="colour", line_color=INK, line_width=0.5, source=nodes,
                     legend_field="label")
    p.add_layout(p.legend[0], "right")
    p.add_tools(HoverTool(renderers=[dots], tooltips="@label: rank @rank at @time{0.000000} s, @seconds{0.0000} s"))
    waits_n = int(sum(1 for d in data if d["kind"] != "delay"))
    return p, (f"{waits_n} wait states and {len(names) - waits_n} root causes, {len(a)} arrows \"caused by\" "
               "(the picture waitlab export --graphml writes as propagation.png).")


def matrix_figure(events: pd.DataFrame, waits: pd.DataFrame, n_ranks: int) -> tuple[Any | None, str]:
    """The communication matrix: bytes sent from each rank (row) to each rank (column), and the wait that pair's
    messages caused (a red dot, area = seconds); hover for bytes, messages and wait
    (:func:`~waitlab.experiments.report.html_data.comm_matrix`)."""
    if n_ranks > MATRIX_MAX_RANKS:
        return None, f"Communication matrix: not drawn above {MATRIX_MAX_RANKS} ranks ({n_ranks})."
    m = comm_matrix(events, waits)
    if not len(m):
        return None, "Communication matrix: the run sends no point-to-point message."
    wmax = float(m["wait"].max()) or 1.0
    src = ColumnDataSource({"sender": m["sender"].to_numpy(), "receiver": m["receiver"].to_numpy(),
                            "bytes": m["bytes"].to_numpy(), "messages": m["messages"].to_numpy(),
                            "wait": m["wait"].to_numpy(), "dot": np.where(m["wait"] > 0, 4 + 14 * np.sqrt(
                                m["wait"].to_numpy() / wmax), 0)}, name="wl-matrix-src")
    side = min(700, 160 + 28 * n_ranks)
    p = figure(width=side + 120, height=side, tools="hover,save", x_range=Range1d(start=-0.5, end=n_ranks - 0.5),
               y_range=Range1d(start=n_ranks - 0.5, end=-0.5), x_axis_label="receiver", y_axis_label="sender",
               title="Communication matrix: bytes per rank pair; red dots: the wait its messages caused",
               tooltips="rank @sender -> rank @receiver: @bytes bytes in @messages messages, wait caused "
                        "@wait{0.000000} s")
    mapper = LinearColorMapper(palette=Greys256[200:40:-1], low=0, high=float(m["bytes"].max()))
    p.rect("receiver", "sender", width=0.95, height=0.95, source=src, fill_color={"field": "bytes",
           "transform": mapper}, line_color=None)
    p.scatter("receiver", "sender", size="dot", color=PATTERN_COLOURS["late_sender"], line_color=INK,
              line_width=0.5, source=src)
    p.add_layout(ColorBar(color_mapper=mapper, title="bytes"), "right")
    p.grid.visible = False
    top = m.sort_values(["wait", "sender", "receiver"], ascending=[False, True, True]).head(3)
    said = ", ".join(f"{s} -> {r} {w:.4g} s" for s, r, w in zip(top["sender"], top["receiver"], top["wait"],
                                                                  strict=True) if w > 0)
    return p, (f"{len(m)} rank pairs exchanged {int(m['messages'].sum()):,} messages "
               f"({int(m['bytes'].sum()):,} bytes); their messages caused {float(m['wait'].sum()):.4g} s of wait"
               + (f", most: {said}." if said else "."))
