"""``report.html``: one self-contained page per results folder, readable offline from ``file://``.

Written by ``waitlab run``, rewritten by ``waitlab diagnose`` (adding the diagnosis) and by ``waitlab report
RUNDIR``.  Plotly draws every figure; its library is embedded once in the page (no network, no CDN).  The
timeline is built in the browser from packed columns (:mod:`waitlab.experiments.report.html_data`) for the
rank range chosen; runs of more than :data:`DIRECT_RANKS` ranks open on a rank x step heatmap of wait
whose cells drill down to their ranks.  Same folder, same bytes (fixed element ids, gzip without a time).
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from waitlab.experiments.report.html_data import rank_step_wait, timeline_payload
from waitlab.experiments.report.palette import (
    CAUSE,
    INK,
    KIND_COLOURS,
    OTHER,
    PAPER,
    PATTERN_COLOURS,
    SERIES,
    TRUTH,
    WAIT,
    model_colour,
)
from waitlab.models.analysis.propagation import propagation_graph

#: Runs up to this many ranks open on the whole timeline; larger ones on the heatmap and a rank window.
DIRECT_RANKS = 64
#: Ranks shown at once when drilling down from the heatmap.
WINDOW = 32
#: Most links of the wait-propagation diagram; most waits whose graph is built.
GRAPH_LINKS, GRAPH_MAX_WAITS = 40, 20_000
_JS = Path(__file__).with_name("report_timeline.js")
_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}.note{color:#555;font-size:.9em}
h2{border-bottom:1px solid #ddd;margin-top:1.6em}.cause{color:#2e86c1;font-weight:bold}
form input{width:6em}"""


_ORDER = {k: (i, k) for i, k in enumerate(("compute", "perturbation", "communication", "wait", "idle"))}


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _s(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(float(x)) else f"{float(x):.4g}"


def _fig(fig: go.Figure, div_id: str, height: int = 360) -> str:
    fig.update_layout(height=height, margin={"l": 60, "r": 10, "t": 40, "b": 40}, template="plotly_white")
    return str(pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id,
                           config={"displaylogo": False, "responsive": True}))


def _summary(meta: dict[str, Any], summary: dict[str, Any], budget: pd.DataFrame, waits: pd.DataFrame) -> str:
    t = summary.get("totals", {})
    out = [f"<p>{meta.get('ranks', '?')} ranks on <b>{html.escape(str(meta.get('platform', '?')))}</b> "
           f"({meta.get('nodes', '?')} nodes x {meta.get('ranks_per_node', '?')}), seed {meta.get('seed', '?')}, "
           f"scenario hash <code>{html.escape(str(meta.get('scenario_hash', '')))}</code>. "
           f"Makespan <b>{summary['makespan']:.6f} s</b>, {summary['events']:,} events, "
           f"{summary['wait_states']:,} wait states.</p>",
           "<p class='note'>All times are simulated seconds; rank-seconds add one rank's seconds over the ranks.</p>",
           _table(["activity", "rank-seconds (s)"],
                  [[k, _s(t[k])] for k in sorted(t, key=lambda k: _ORDER.get(k, (9, k)))])]
    wbp = summary.get("wait_by_pattern", {})
    wsum = sum(wbp.values()) or 1.0
    out.append(_table(["wait pattern", "wait (s)", "share"],
                      [[k, _s(v), f"{100 * v / wsum:.1f}%"] for k, v in wbp.items()]))
    if len(waits):
        reg = waits.groupby(waits["region"].astype(str), observed=True)["wait"].sum().sort_values(ascending=False)
        out.append(_table(["region of the waiting operation", "wait (s)", "share"],
                          [[k or "(top level)", _s(v), f"{100 * v / wsum:.1f}%"] for k, v in reg.head(12).items()]))
    if len(budget):
        cols = [c for c in ("compute", "perturbation", "communication", "wait", "idle") if c in budget]
        per = max(1, -(-len(budget) // 256))  # at most 256 bars: mean of rank bins beyond
        grp = budget[cols].groupby(np.arange(len(budget)) // per).mean()
        x = np.arange(len(grp)) * per
        colours = {"compute": KIND_COLOURS["compute"], "perturbation": KIND_COLOURS["noise"],
                   "communication": KIND_COLOURS["mpi"], "wait": WAIT, "idle": OTHER}
        fig = go.Figure([go.Bar(x=x, y=grp[c].to_numpy(), name=c, marker_color=colours[c]) for c in cols])
        xt = "rank" if per == 1 else f"first rank of a bin of {per} (mean per rank)"
        fig.update_layout(barmode="stack", title="Time budget per rank", xaxis_title=xt, yaxis_title="seconds (s)")
        out.append(_fig(fig, "wl-budget", 320))
    return "\n".join(out)


def _causes(ledger: pd.DataFrame | None) -> str:
    if ledger is None or not len(ledger):
        return "<p>No injected cause: the scenario injects no imbalance, noise or instrumentation.</p>"
    g = ledger.groupby(["rank", ledger["region"].astype(str), ledger["kind"].astype(str)], observed=True)[
        "seconds"].agg(["sum", "count"]).sort_values("sum", ascending=False).head(12)
    rows = [[int(r), reg or "(top level)", k, _s(v["sum"]), int(v["count"])] for (r, reg, k), v in g.iterrows()]
    top = rows[0]
    return (f"<p class='cause' id='wl-top-cause'>Largest injected cause: rank {top[0]}, region {html.escape(top[1])}"
            f" ({top[2]}, {top[3]} s in total).</p>"
            + _table(["rank", "region", "kind", "injected (s)", "occurrences"], rows)
            + "<p class='note'>In the timeline, injected excess is the thin blue bar under the activity "
              "that carried it.</p>")


def _heatmap(waits: pd.DataFrame, n_ranks: int) -> str:
    z, first, steps = rank_step_wait(waits, n_ranks)
    fig = go.Figure(go.Heatmap(z=z, y=first, x=[str(s) if s >= 0 else "none" for s in steps],
                               colorscale=[[0, PAPER], [1, WAIT]], colorbar={"title": {"text": "wait (s)"}},
                               hovertemplate="ranks from %{y}, step %{x}: %{z:.4g} s of wait<extra></extra>"))
    fig.update_layout(title="Wait per rank and step (click a cell to see its ranks below)",
                      xaxis_title="BSP step", yaxis_title="rank", yaxis_autorange="reversed")
    return _fig(fig, "wl-heatmap", 420)


def _diagnosis(diag: dict[str, Any], events: pd.DataFrame, waits: pd.DataFrame) -> str:
    out: list[str] = []
    models = diag.get("models", {})
    truth = diag.get("truth") or {}
    regions: list[str] = []
    for m in models.values():
        for r in list(m.get("by_region", {}))[:8]:
            if r not in regions:
                regions.append(r)
    regions = regions[:10]
    bars = [go.Bar(x=regions, y=[m["by_region"].get(r, 0.0) for r in regions], name=m["name"],
                   marker_color=model_colour(m["name"], i)) for i, m in enumerate(models.values())]
    if truth:
        bars.append(go.Bar(x=regions, y=[max(0.0, truth.get("by_region", {}).get(r, 0.0)) for r in regions],
                           name="ground truth", marker_color=TRUTH))
    fig = go.Figure(bars)
    fig.update_layout(barmode="group", title="Blame per region: each model next to the ground truth",
                      yaxis_title="seconds of wait (s)")
    out.append(_fig(fig, "wl-blame", 380))
    rows = [[m["name"], _s(m.get("attributed", math.nan)), _s(m.get("unexplained", math.nan)),
             ", ".join(m.get("culprits", [])), _s(m.get("scores", {}).get("spearman_region", math.nan))]
            for m in models.values()]
    out.append(_table(["model", "attributed (s)", "unexplained (s)", "culprit regions", "Spearman vs truth"], rows))
    if truth:
        out.append(f"<p>Ground truth: removing every injected cause removes {_s(truth.get('all_causes', math.nan))} s "
                   f"of wait (counterfactual re-simulation).</p>")
    cp = diag.get("critical_path")
    if cp:
        by = cp.get("by_region", [])
        fig = go.Figure(go.Bar(x=[r["seconds"] for r in by], y=[r["region"] for r in by], orientation="h",
                               marker_color=[KIND_COLOURS["mpi"] if r["region"].startswith("MPI_") else CAUSE
                                             for r in by]))
        fig.update_layout(title=f"Critical path: {cp['length']:.4g} s of the {cp['makespan']:.4g} s makespan, "
                          "by region", xaxis_title="seconds on the path (s)", yaxis_autorange="reversed")
        out.append(_fig(fig, "wl-critical", 320))
        out.append("<p>Ranks on the path: " + ", ".join(f"{k} ({float(v):.4g} s)"
                                                        for k, v in cp.get("by_rank", {}).items()) + "</p>")
    out.append(_propagation(events, waits))
    return "\n".join(out)


def _propagation(events: pd.DataFrame, waits: pd.DataFrame) -> str:
    """The wait-propagation graph folded to ranks: waiting rank <- rank it waited for, and root causes."""
    if not len(waits) or len(waits) > GRAPH_MAX_WAITS:
        return (f"<p class='note'>Wait-propagation graph: not drawn ({len(waits):,} wait states; drawn up to "
                f"{GRAPH_MAX_WAITS:,}). `waitlab export --graph` writes it as GraphML.</p>")
    g = propagation_graph(events, waits)
    flows: dict[tuple[str, str], float] = {}
    for a, b, s in g.edges(data="seconds"):
        na, nb = g.nodes[a], g.nodes[b]
        src = f"cause: rank {nb['rank']} {nb.get('callpath', '')}" if nb["kind"] == "delay" \
            else f"rank {nb['rank']} waiting"
        key = (src, f"rank {na['rank']} waiting")
        flows[key] = flows.get(key, 0.0) + float(s)
    top = sorted(flows.items(), key=lambda kv: (-kv[1], kv[0]))[:GRAPH_LINKS]
    if not top:
        return "<p class='note'>Wait-propagation graph: no wait has a cause inside the run.</p>"
    labels = sorted({n for (a, b), _ in top for n in (a, b)})
    idx = {n: i for i, n in enumerate(labels)}
    node_colour = [CAUSE if n.startswith("cause") else PATTERN_COLOURS["late_sender"] for n in labels]
    fig = go.Figure(go.Sankey(
        node={"label": labels, "color": node_colour, "pad": 12, "line": {"color": INK, "width": 0.3}},
        link={"source": [idx[a] for (a, _), _ in top], "target": [idx[b] for (_, b), _ in top],
              "value": [v for _, v in top], "hovertemplate": "%{source.label} -> %{target.label}: "
              "%{value:.4g} s<extra></extra>"}))
    fig.update_layout(title=f"Wait propagation: root causes (blue) and the waits they cause, the {len(top)} "
                      "largest flows (seconds)")
    return _fig(fig, "wl-propagation", 460)


def build_html(meta: dict[str, Any], summary: dict[str, Any], events: pd.DataFrame, waits: pd.DataFrame,
               budget: pd.DataFrame, ledger: pd.DataFrame | None, diagnosis: dict[str, Any] | None = None) -> str:
    """The page, as text (see the module docstring)."""
    n_ranks = int(meta.get("ranks") or (int(events["rank"].max()) + 1 if len(events) else 0))
    name = html.escape(str(meta.get("scenario", "run")))
    payload = timeline_payload(events, waits, ledger, n_ranks)
    regions = payload["regions"]
    initial = [0, min(n_ranks, DIRECT_RANKS if n_ranks <= DIRECT_RANKS else WINDOW)]
    js_config = {
        "colours": {"kinds": KIND_COLOURS, "patterns": PATTERN_COLOURS, "wait": WAIT, "cause": CAUSE,
                    "other": OTHER, "ink": INK},
        "regionColours": {r: SERIES[i % len(SERIES)] for i, r in enumerate(regions)},
        "initialRanks": initial,
        "window": WINDOW,
    }
    large = n_ranks > DIRECT_RANKS
    parts = [f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>waitlab report: {name}</title>",
             f"<style>{_CSS}</style>", f"<script>{get_plotlyjs()}</script></head><body>",
             f"<h1>waitlab report: {name}</h1>", "<h2 id='summary'>Summary</h2>",
             _summary(meta, summary, budget, waits), "<h2 id='causes'>Injected causes (what the simulator did)</h2>",
             _causes(ledger), "<h2 id='timeline'>Timeline</h2>"]
    if large:
        parts.append(_heatmap(waits, n_ranks))
    detail = payload["detail_ranks"]
    parts.append(
        "<p class='note'>Ranks x simulated time. Compute coloured by region, MPI yellow, wait states as thin bars "
        "in their pattern's colour, injected causes as thin blue bars; messages are arrows from the send to the "
        "receive, drawn once the window holds at most 1,500 of them (zoom in). Hover for the operation, peer, "
        "bytes, wait pattern and injected cause. Drag to zoom, shift-drag to pan, double-click to reset."
        + (f" Detail is carried for ranks 0 to {detail - 1} only (the first {payload['events']:,} events)."
           if detail < n_ranks else "") + "</p>"
        f"<form id='wl-range-form'>ranks <input id='wl-r0' type='number' min='0' value='0'> to "
        f"<input id='wl-r1' type='number' min='0' value='{initial[1] - 1}'> "
        "<button type='submit'>show</button> <span id='wl-range-status'>loading...</span></form>"
        "<div id='wl-timeline'></div>")
    if diagnosis is not None:
        parts += ["<h2 id='diagnosis'>Diagnosis</h2>", _diagnosis(diagnosis, events, waits)]
    else:
        parts.append("<p class='note'>No diagnosis yet: <code>waitlab diagnose FOLDER</code> adds each model's "
                     "blame, the ground truth, the critical path and the wait-propagation graph here.</p>")
    data = json.dumps(payload, sort_keys=True).replace("</", "<\\/")
    cfg = json.dumps(js_config, sort_keys=True)
    parts += [f"<script>window.WAITLAB = {cfg}; window.WAITLAB.regionColour = "
              "function (r) { return window.WAITLAB.regionColours[r] || window.WAITLAB.colours.kinds.compute; };"
              "</script>",
              f"<script type='application/json' id='wl-timeline-data'>{data}</script>",
              f"<script>{_JS.read_text(encoding='utf-8')}</script>", "</body></html>\n"]
    return "\n".join(parts)


def write_html_report(folder: Path, meta: dict[str, Any], summary: dict[str, Any], events: pd.DataFrame,
                      waits: pd.DataFrame, budget: pd.DataFrame, ledger: pd.DataFrame | None,
                      diagnosis: dict[str, Any] | None = None) -> Path:
    """Write ``folder/report.html``; returns its path."""
    path = Path(folder) / "report.html"
    path.write_text(build_html(meta, summary, events, waits, budget, ledger, diagnosis), encoding="utf-8")
    return path
