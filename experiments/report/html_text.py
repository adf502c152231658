"""The text of ``report.html``'s sections made from a run's data: its summary, its injected causes, the models'
table of a diagnosis, and what of the run the timeline carries (:mod:`waitlab.experiments.report.html` puts them
into the page's slots)."""

from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd

from waitlab.models.analysis.summary import placement_text
from waitlab.models.analysis.timeline_check import impossible_line

_ORDER = {k: (i, k) for i, k in enumerate(("compute", "perturbation", "communication", "wait", "idle"))}


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _s(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(float(x)) else f"{float(x):.4g}"


def sum_by_name(key: pd.Series, values: pd.Series) -> pd.Series:
    """``values`` summed per ``key.astype(str)``, in that text's order: a categorical key is grouped by its codes and
    only its categories become text (``astype(str)`` made a string per row: 0.1 s for 500,000 wait states); each
    group adds its rows in row order either way, so the sums are the same floats.

    A missing key is left out, as ``astype(str)`` leaves it missing:

    >>> sum_by_name(pd.Series(pd.Categorical(["b", "a", None, "b"])), pd.Series([1.0, 2.0, 4.0, 8.0])).to_dict()
    {'a': 2.0, 'b': 9.0}
    """
    if not isinstance(key.dtype, pd.CategoricalDtype):
        return values.groupby(key.astype(str)).sum()
    sums = values.groupby(key, observed=True).sum()
    return pd.Series(sums.to_numpy(), index=[str(k) for k in sums.index], name=values.name).sort_index()


def summary_html(meta: dict[str, Any], summary: dict[str, Any], waits: pd.DataFrame) -> str:
    t = summary.get("totals", {})
    edited = meta.get("trust_edited")  # read with --trust-edited from a folder that is not its run's
    out = [f"<p class='note'><b>Made from an edited results folder (--trust-edited)</b>: "
           f"{html.escape(str(edited))}</p>"] if edited else []
    recorded = meta.get("source") == "recorded"  # read as recorded (waitlab analyze): nothing was simulated
    where = (f"as recorded in <code>{html.escape(str(meta.get('trace', '?')))}</code> on {meta.get('nodes', '?')} "
             "hosts (no simulation)" if recorded else
             f"on <b>{html.escape(str(meta.get('platform', '?')))}</b> ({_placed(meta)}), seed {meta.get('seed', '?')}")
    out += [f"<p>{meta.get('ranks', '?')} ranks {where}, "
           f"scenario hash <code>{html.escape(str(meta.get('scenario_hash', '')))}</code>. "
           f"Makespan <b>{summary['makespan']:.6f} s</b>, {summary['events']:,} events, "
           f"{summary['wait_states']:,} wait states.</p>",
           f"<p class='note'>All times are {'recorded' if recorded else 'simulated'} seconds; rank-seconds add one "
           "rank's seconds over the ranks.</p>",
           _table(["activity", "rank-seconds (s)"],
                  [[k, _s(t[k])] for k in sorted(t, key=lambda k: _ORDER.get(k, (9, k)))])]
    if summary.get("impossible_collectives"):  # a simulator or trace fault: the collective's waits are wrong
        out.append(f"<p class='note'><b>{html.escape(impossible_line(summary['impossible_collectives']))}</b></p>")
    wbp = summary.get("wait_by_pattern", {})
    wsum = sum(wbp.values()) or 1.0
    out.append(_table(["wait pattern", "wait (s)", "share"],  # largest first, whatever the summary's key order
                      [[k, _s(v), f"{100 * v / wsum:.1f}%"] for k, v in sorted(wbp.items(), key=lambda kv: (-kv[1],
                                                                                                          kv[0]))]))
    if len(waits):
        reg = sum_by_name(waits["region"], waits["wait"]).sort_values(ascending=False)
        out.append(_table(["region of the waiting operation", "wait (s)", "share"],
                          [[k or "(top level)", _s(v), f"{100 * v / wsum:.1f}%"] for k, v in reg.head(12).items()]))
    return "\n".join(out)


def causes_html(ledger: pd.DataFrame | None) -> str:
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


def models_html(diag: dict[str, Any]) -> str:
    models = diag.get("models", {})
    truth = diag.get("truth") or {}
    rows = [[m["name"], _s(m.get("attributed", math.nan)), _s(m.get("unexplained", math.nan)),
             ", ".join(m.get("culprits", [])), _s(m.get("scores", {}).get("spearman_region", math.nan))]
            for m in models.values()]
    out = _table(["model", "attributed (s)", "unexplained (s)", "culprit regions", "Spearman vs truth"], rows)
    if truth:
        out += (f"<p>Ground truth: removing every injected cause removes {_s(truth.get('all_causes', math.nan))} s "
                "of wait (counterfactual re-simulation).</p>")
    return out


def _placed(meta: dict[str, Any]) -> str:
    """The nodes a run's ranks sit on (:func:`~waitlab.models.analysis.summary.placement_text`), '?' when unknown."""
    try:
        return placement_text(int(meta["ranks"]), int(meta["nodes"]), int(meta["ranks_per_node"]))
    except (KeyError, TypeError, ValueError):
        return f"{meta.get('nodes', '?')} nodes"


def detail_note(payload: dict[str, Any], n_ranks: int) -> str:
    """What of the run the page's timeline carries, when not all of it
    (:func:`~waitlab.experiments.report.html_data.timeline_payload`)."""
    detail, events = payload["detail_ranks"], payload["events"]
    if payload.get("until") is not None:
        return (f" Detail is carried for rank 0 up to {payload['until']:.6g} s only (its first {events:,} events; "
                "<code>waitlab export --chrome</code> writes the whole run).")
    if detail < n_ranks:
        return f" Detail is carried for ranks 0 to {detail - 1} only (the first {events:,} events)."
    return ""
