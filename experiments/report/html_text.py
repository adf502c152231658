"""The text of ``report.html``'s sections made from a run's data: its summary, its injected causes, the models'
table of a diagnosis, and what of the run the timeline carries (:mod:`waitlab.experiments.report.html` puts them
into the page's slots).  The tables are Arrow tables (a run's) or pandas DataFrames (a folder read back), read as
numpy columns (:mod:`waitlab.models.columns`): the same text from either."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from waitlab.models.analysis.grouped import descending, group_sums
from waitlab.models.analysis.summary import placement_text
from waitlab.models.analysis.timeline_check import impossible_line
from waitlab.models.columns import Table, codes, values

if TYPE_CHECKING:
    pass

_ORDER = {k: (i, k) for i, k in enumerate(("compute", "perturbation", "communication", "wait", "idle"))}


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _s(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(float(x)) else f"{float(x):.4g}"


def _sorted_codes(t: Table, name: str) -> tuple[npt.NDArray[np.int64], list[str]]:
    """The column ``name`` as codes into its categories sorted as text (-1: missing), and those categories."""
    c, cats = codes(t, name)
    order = sorted(range(len(cats)), key=cats.__getitem__)
    pos = np.empty(len(cats) + 1, np.int64)
    pos[order] = np.arange(len(cats))
    pos[-1] = -1  # a missing value (-1) stays missing
    return pos[np.asarray(c, np.int64)], [cats[i] for i in order]


def sums_by_name(t: Table, key: str, value: str) -> tuple[list[str], npt.NDArray[np.float64]]:
    """The column ``value`` of ``t`` summed per name of the column ``key`` (its text), names in text order; a missing
    key is left out, and a name without a row; the sums are :func:`group_sums`' (pandas' own).

    >>> import pyarrow as pa
    >>> sums_by_name(pa.table({"r": pa.array(["b", "a", None, "b"]).dictionary_encode(), "w": [1.0, 2.0, 4.0, 8.0]}),
    ...              "r", "w")
    (['a', 'b'], array([2., 9.]))
    """
    c, cats = _sorted_codes(t, key)
    sums = group_sums(c, values(t, value), len(cats))
    used = np.flatnonzero(np.bincount(c[c >= 0], minlength=len(cats)))
    return [cats[i] for i in used], sums[used]


def summary_html(meta: dict[str, Any], summary: dict[str, Any], waits: Table) -> str:
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
        names, sums = sums_by_name(waits, "region", "wait")
        top = descending(sums)[:12]
        out.append(_table(["region of the waiting operation", "wait (s)", "share"],
                          [[names[i] or "(top level)", _s(sums[i]), f"{100 * sums[i] / wsum:.1f}%"] for i in top]))
    return "\n".join(out)


def causes_html(ledger: Table | None) -> str:
    """The injected causes' section: the twelve largest (rank, region, kind) groups of the ledger by seconds
    (:func:`group_sums`; a row without a region or kind left out)."""
    if ledger is None or not len(ledger):
        return "<p>No injected cause: the scenario injects no imbalance, noise or instrumentation.</p>"
    region, regions = _sorted_codes(ledger, "region")
    kind, kinds = _sorted_codes(ledger, "kind")
    ok = (region >= 0) & (kind >= 0)
    rank = values(ledger, "rank").astype(np.int64)[ok]
    n_regions, n_kinds = max(len(regions), 1), max(len(kinds), 1)
    key = (rank * n_regions + region[ok]) * n_kinds + kind[ok]  # one integer: a 1-D sort, not np.unique(axis=0)
    uniq, group = np.unique(key, return_inverse=True)  # in (rank, region, kind) order
    groups = np.stack([uniq // (n_regions * n_kinds), uniq // n_kinds % n_regions, uniq % n_kinds], axis=1)
    group = group.ravel()
    seconds = values(ledger, "seconds").astype(np.float64)
    ids = np.full(ok.size, -1, np.int64)  # each row's group (-1: left out)
    ids[ok] = group
    sums = group_sums(ids, seconds, len(groups))
    counts = np.bincount(group[~np.isnan(seconds[ok])], minlength=len(groups))
    rows = [[int(groups[i, 0]), regions[groups[i, 1]] or "(top level)", kinds[groups[i, 2]], _s(sums[i]),
             int(counts[i])] for i in descending(sums)[:12]]
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
