"""How the API's result objects show in a Jupyter notebook (``_repr_html_``): small HTML tables.

The classes (:class:`~waitlab.experiments.pipeline.Run`, :class:`~waitlab.experiments.results.LoadedRun`,
:class:`~waitlab.experiments.diagnosis.diagnose.Diagnosis`, :class:`~waitlab.experiments.compare.Comparison`) call
these functions; they read the objects' attributes only, so this module imports none of them.
"""

from __future__ import annotations

import html
import math
from typing import Any

from waitlab.experiments.report.palette import TRUTH, model_colour


def _rows(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _g(x: Any) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{float(x):.4g}"


def summary_html(title: str, summary: dict[str, Any], metadata: dict[str, Any]) -> str:
    """A run's summary: makespan, rank-seconds per activity and wait per pattern (seconds)."""
    head = (f"<b>{html.escape(title)}</b>: {metadata.get('ranks', '?')} ranks on "
            f"{html.escape(str(metadata.get('platform', '?')))}, seed {metadata.get('seed', '?')}; makespan "
            f"<b>{summary['makespan']:.6f} s</b>, {summary['events']:,} events, {summary['wait_states']:,} wait "
            "states")
    totals = _rows(["activity", "rank-seconds (s)"], [[k, _g(v)] for k, v in summary.get("totals", {}).items()])
    waits = _rows(["wait pattern", "wait (s)"], [[k, _g(v)] for k, v in summary.get("wait_by_pattern", {}).items()])
    return f"<div>{head}<div style='display:flex;gap:2em'>{totals}{waits}</div></div>"


def run_html(run: Any) -> str:
    """``Run``: its summary (and the perturbation study's makespans when perturbed)."""
    res = run.result
    out = summary_html(f"run of {res.scenario.name}", res.summary, res.metadata)
    if run.perturbation is not None:
        rep = run.perturbation.report
        out += f"<p>perturbed run: {html.escape(str({k: rep[k] for k in list(rep)[:4]}))}</p>"
    return out


def loaded_html(run: Any) -> str:
    """``LoadedRun``: where it was read from and its events."""
    return (f"<div><b>results folder {html.escape(str(run.folder))}</b>: scenario {html.escape(run.scenario.name)}, "
            f"{len(run.events):,} events, {len(run.waits):,} wait states, total wait "
            f"{float(run.waits['wait'].sum()) if len(run.waits) else 0.0:.4g} s; open report.html in a browser "
            "for the timeline</div>")


def diagnosis_html(diag: Any) -> str:
    """``Diagnosis``: what each model blames, next to the ground truth."""
    b = diag.baseline
    rows: list[list[str]] = []
    for m in diag.models:
        s = diag.scores.get(m.key, {})
        colour = model_colour(m.key, len(rows))
        rows.append([f"<span style='color:{colour}'>&#9632;</span> {html.escape(m.name)}",
                     _g(m.attributed), _g(m.unexplained),
                     html.escape(", ".join(diag.culprits.get(m.key, []))), _g(s.get("spearman_region")),
                     _g(s.get("top_k_region"))])
    head = "".join(f"<th>{h}</th>" for h in ("model", "attributed (s)", "unexplained (s)", "culprit regions",
                                               "Spearman vs truth (regions)", "top-k precision (regions)"))
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    out = (f"<div><b>diagnosis</b>: total wait {b['total_wait']:.4g} s, makespan {b['makespan']:.4g} s"
           f"<table><tr>{head}</tr>{body}</table>")
    if diag.truth is not None:
        tc = diag.truth.cost("region")
        out += (f"<p><span style='color:{TRUTH}'>&#9632;</span> ground truth (counterfactual re-runs): removing "
                f"every injected cause removes {diag.truth.all_causes:.4g} s of wait; by region: "
                + html.escape(", ".join(f"{r} {v:.4g} s" for r, v in tc.head(6).items())) + "</p>")
    return out + "</div>"


def comparison_html(cmp: Any) -> str:
    """``Comparison``: its text, preformatted."""
    return f"<pre>{html.escape(cmp.text())}</pre>"
