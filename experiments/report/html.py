"""``report.html``: one self-contained page per results folder, readable offline from ``file://``.

Written by ``waitlab run``, rewritten by ``waitlab diagnose`` (adding the diagnosis) and by ``waitlab report
RUNDIR``.  Bokeh draws every figure (:mod:`waitlab.experiments.report.html_figures`); its library is
embedded in the page (inline resources: no network, no CDN; Bokeh's log at level warn).  The timeline is
filled in the browser from packed columns (:mod:`waitlab.experiments.report.html_data`) for the rank range chosen; runs
of more than :data:`DIRECT_RANKS` ranks open on a rank x step heatmap of wait whose cells drill down to
their ranks.  Same folder, same bytes: Bokeh's model ids and document ids, which it draws from a
per-process counter and from ``uuid4``, are renumbered in order of appearance.

The page is made in two steps: its skeleton (:func:`page_skeleton`: Bokeh's document and library, the template, with
a slot for each part that holds the run's data), then the slots filled (:func:`fill_page`).  The figures of a run's
page (time budget, heatmap, timeline) hold none of its data: the page's script fills them from the payload.  So the
skeleton of a page without a diagnosis depends only on its :class:`PageShape` and on the code that draws it, and is
kept in waitlab's cache (:func:`run_page_skeleton`): a run imports Bokeh (0.5 to 0.9 s) only for the first page of
its shape that this code and this Bokeh draw.  A diagnosis's figures (blame, critical path, propagation graph,
communication matrix) are drawn from its data, with Bokeh, every time.

Bokeh, not Plotly: measured in headless Chromium on this machine kind, Plotly's library alone took
6 s of script time to start (4.8 MB), Bokeh's 0.7 to 1.8 s (3.9 MB), and Plotly redrew a 32-rank
window of 7,000 bars in 8 s (SVG).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass
from importlib.metadata import version
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from waitlab.experiments.report.html_data import BUDGET_COLUMNS, budget_payload, heatmap_payload, timeline_payload
from waitlab.experiments.report.palette import CAUSE, INK, KIND_COLOURS, OTHER, PATTERN_COLOURS, SERIES, WAIT
from waitlab.models.analysis.summary import placement_text
from waitlab.models.analysis.timeline_check import impossible_line
from waitlab.simulator.build import cache_dir

if TYPE_CHECKING:
    from bokeh.document import Document

#: Runs up to this many ranks open on the whole timeline; larger ones on the heatmap and a rank window.
DIRECT_RANKS = 64
#: Ranks shown at once when drilling down from the heatmap.
WINDOW = 32
_JS = Path(__file__).with_name("report_timeline.js")
_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222;padding:0 1em;
height:auto!important}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}.note{color:#555;font-size:.9em}
h2{border-bottom:1px solid #ddd;margin-top:1.6em}.cause{color:#2e86c1;font-weight:bold}form input{width:6em}"""
_ORDER = {k: (i, k) for i, k in enumerate(("compute", "perturbation", "communication", "wait", "idle"))}
#: The page: Bokeh's own file template with our sections around the figures (roots embedded by name).
_PAGE = """{% from macros import embed %}
{% block postamble %}<style>{{ css }}</style>{% endblock %}
{% block contents %}
<h1>waitlab report: {{ name }}</h1>
{% for part in parts %}{% if part[0] == "html" %}{{ part[1] }}{% else %}{{ embed(roots[part[1]]) }}{% endif %}
{% endfor %}
{{ verbatim }}<script type="application/json" id="wl-timeline-data">{{ data }}</script>
<script>{{ config }}</script>
<script>{{ js }}</script>{{ verbatim }}
{% endblock %}
{% block js_resources %}{{ verbatim }}{{ super() }}{{ verbatim }}{% endblock %}"""
#: Marks the page's parts that hold no Bokeh id, around them, for :func:`_ids_outside_verbatim` (NUL: never in JSON,
#: Bokeh's library or the template).
_VERBATIM = "\x00wl-verbatim\x00"
#: A slot of a page's skeleton (:func:`fill_page`): a part that holds the run's data (NUL: not in the page's text).
_SLOT = re.compile("\x00wl-slot-([a-z]+)\x00")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ID = re.compile(r'"p\d{4,}"')


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _s(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(float(x)) else f"{float(x):.4g}"


def _sum_by_name(key: pd.Series, values: pd.Series) -> pd.Series:
    """``values`` summed per ``key.astype(str)``, in that text's order: a categorical key is grouped by its codes and
    only its categories become text (``astype(str)`` made a string per row: 0.1 s for 500,000 wait states); each
    group adds its rows in row order either way, so the sums are the same floats.

    A missing key is left out, as ``astype(str)`` leaves it missing:

    >>> _sum_by_name(pd.Series(pd.Categorical(["b", "a", None, "b"])), pd.Series([1.0, 2.0, 4.0, 8.0])).to_dict()
    {'a': 2.0, 'b': 9.0}
    """
    if not isinstance(key.dtype, pd.CategoricalDtype):
        return values.groupby(key.astype(str)).sum()
    sums = values.groupby(key, observed=True).sum()
    return pd.Series(sums.to_numpy(), index=[str(k) for k in sums.index], name=values.name).sort_index()


def _summary(meta: dict[str, Any], summary: dict[str, Any], waits: pd.DataFrame) -> str:
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
    out.append(_table(["wait pattern", "wait (s)", "share"],
                      [[k, _s(v), f"{100 * v / wsum:.1f}%"] for k, v in wbp.items()]))
    if len(waits):
        reg = _sum_by_name(waits["region"], waits["wait"]).sort_values(ascending=False)
        out.append(_table(["region of the waiting operation", "wait (s)", "share"],
                          [[k or "(top level)", _s(v), f"{100 * v / wsum:.1f}%"] for k, v in reg.head(12).items()]))
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


def _models_table(diag: dict[str, Any]) -> str:
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


def _ids(page: str) -> str:
    """Renumber Bokeh's per-process ids and random document ids in order of appearance (same data, same bytes)."""
    uuids: dict[str, str] = {}
    ids: dict[str, str] = {}
    n, k = count(), count(1001)
    page = _UUID.sub(lambda m: uuids.setdefault(m.group(0), f"00000000-0000-4000-8000-{next(n):012d}"), page)
    return _ID.sub(lambda m: ids.setdefault(m.group(0), f'"p{next(k)}"'), page)


def _slot(key: str) -> str:
    return f"\x00wl-slot-{key}\x00"


@dataclass(frozen=True)
class PageShape:
    """What a page's skeleton depends on besides the diagnosis's figures: the run's figures (time budget, heatmap,
    timeline) are filled by the page's script, so neither the run's name, its rank count nor its data is here."""

    #: the time budget's columns, in stacking order (empty: no time budget)
    budget_columns: tuple[str, ...]
    #: whether the page opens on the rank x step heatmap (more than :data:`DIRECT_RANKS` ranks)
    heatmap: bool

    @classmethod
    def of_run(cls, ranks: int) -> PageShape:
        """The shape of the page of a run of ``ranks`` ranks, as ``waitlab run`` writes it."""
        return cls(BUDGET_COLUMNS if ranks else (), ranks > DIRECT_RANKS)


def page_shape(n_ranks: int, budget: pd.DataFrame) -> PageShape:
    """The shape of the page of a run of ``n_ranks`` ranks whose time budget is ``budget``."""
    return PageShape(tuple(c for c in BUDGET_COLUMNS if c in budget) if len(budget) else (), n_ranks > DIRECT_RANKS)


def _run_ranks(meta: dict[str, Any], events: pd.DataFrame) -> int:
    return int(meta.get("ranks") or (int(events["rank"].max()) + 1 if len(events) else 0))


def _initial_ranks(n_ranks: int) -> list[int]:
    return [0, min(n_ranks, DIRECT_RANKS if n_ranks <= DIRECT_RANKS else WINDOW)]


def report_document(shape: PageShape, events: pd.DataFrame | None = None, waits: pd.DataFrame | None = None,
                    diagnosis: dict[str, Any] | None = None, n_ranks: int = 0
                    ) -> tuple[Document, list[tuple[str, str]]]:
    """The page's Bokeh document and its parts in order (``("html", text)``, ``("root", name)``); text that holds the
    run's data is a slot (:func:`fill_page`).  ``diagnosis`` with ``events``, ``waits`` and ``n_ranks`` draws the
    diagnosis's figures; a page without a diagnosis needs none of them."""
    from bokeh.document import Document
    from bokeh.events import DocumentReady
    from bokeh.models import CustomJS

    from waitlab.experiments.report.html_figures import (
        blame_figure,
        budget_figure,
        critical_figure,
        heatmap_figure,
        matrix_figure,
        propagation_figure,
        timeline_figure,
    )

    doc = Document()
    parts: list[tuple[str, str]] = [("html", "<h2 id='summary'>Summary</h2>" + _slot("summary"))]

    def fig(key: str, model: Any) -> None:
        model.name = key
        doc.add_root(model)
        parts.append(("root", key))

    with doc.models.freeze():  # the document's models are gathered once, at the end, not again for every root
        if shape.budget_columns:
            fig("wl-budget", budget_figure(shape.budget_columns))
        parts.append(("html", "<h2 id='causes'>Injected causes (what the simulator did)</h2>" + _slot("causes")
                      + "<h2 id='timeline'>Timeline</h2>"))
        if shape.heatmap:
            fig("wl-heatmap", heatmap_figure())
        parts.append(("html",
            "<p class='note'>Ranks x simulated time. Compute coloured by region, MPI yellow, wait states as thin bars "
            "in their pattern's colour, injected causes as thin blue bars; messages are arrows from the send to the "
            "receive, drawn once the window holds at most 1,500 of them (zoom in). Hover for the operation, peer, "
            "bytes, wait pattern and injected cause. Drag a box to zoom, wheel to zoom in time, reset to go back."
            + _slot("detail") + "</p>"
            "<form id='wl-range-form'>ranks <input id='wl-r0' type='number' min='0' value='0'> to "
            "<input id='wl-r1' type='number' min='0' value='" + _slot("last") + "'> "
            "<button type='submit'>show</button> <span id='wl-range-status'>loading...</span></form>"))
        fig("wl-timeline", timeline_figure())
        if diagnosis is not None:
            if events is None or waits is None:
                raise ValueError("a page with a diagnosis draws its propagation graph from the events and waits")
            parts.append(("html", "<h2 id='diagnosis'>Diagnosis</h2>"))
            fig("wl-blame", blame_figure(diagnosis))
            parts.append(("html", _models_table(diagnosis)))
            cp = diagnosis.get("critical_path")
            if cp:
                fig("wl-critical", critical_figure(cp))
                parts.append(("html", "<p>Ranks on the path: " + ", ".join(
                    f"{k} ({float(v):.4g} s)" for k, v in cp.get("by_rank", {}).items()) + "</p>"))
            for name, (picture, note) in (("wl-propagation", propagation_figure(events, waits)),
                                          ("wl-matrix", matrix_figure(events, waits, n_ranks))):
                if picture is not None:
                    fig(name, picture)
                parts.append(("html", f"<p class='note'>{html.escape(note)}</p>"))
        else:
            parts.append(("html", "<p class='note'>No diagnosis yet: <code>waitlab diagnose FOLDER</code> adds "
                          "each model's blame, the ground truth, the critical path and the wait-propagation graph "
                          "here.</p>"))
        doc.js_on_event(DocumentReady, CustomJS(code="window.WAITLAB_start && window.WAITLAB_start();"))
    return doc, parts


def _placed(meta: dict[str, Any]) -> str:
    """The nodes a run's ranks sit on (:func:`~waitlab.models.analysis.summary.placement_text`), '?' when unknown."""
    try:
        return placement_text(int(meta["ranks"]), int(meta["nodes"]), int(meta["ranks_per_node"]))
    except (KeyError, TypeError, ValueError):
        return f"{meta.get('nodes', '?')} nodes"


def _detail_note(payload: dict[str, Any], n_ranks: int) -> str:
    """What of the run the page's timeline carries, when not all of it (:func:`timeline_payload`)."""
    detail, events = payload["detail_ranks"], payload["events"]
    if payload.get("until") is not None:
        return (f" Detail is carried for rank 0 up to {payload['until']:.6g} s only (its first {events:,} events; "
                "<code>waitlab export --chrome</code> writes the whole run).")
    if detail < n_ranks:
        return f" Detail is carried for ranks 0 to {detail - 1} only (the first {events:,} events)."
    return ""


def page_skeleton(shape: PageShape, events: pd.DataFrame | None = None, waits: pd.DataFrame | None = None,
                  diagnosis: dict[str, Any] | None = None, n_ranks: int = 0) -> str:
    """The page with a slot for each part that holds the run's data (:func:`report_document`'s arguments).

    Bokeh's validation of the document (warnings about models that draw nothing, and the like) is not run on
    every page: it took a quarter of Bokeh's time here, the figures are the same code for every run, and
    ``tests/test_report_html_parts.py`` validates a document with every figure instead.
    """
    from bokeh.embed import file_html
    from bokeh.resources import Resources
    from bokeh.settings import settings

    doc, parts = report_document(shape, events, waits, diagnosis, n_ranks)
    validate = settings.perform_document_validation
    validate.set_value(False)
    try:
        page = file_html(doc, Resources(mode="inline", log_level="warn"), title=_slot("title"),
                         template=_PAGE, template_variables={"css": _CSS, "name": _slot("name"), "parts": parts,
                                                             "data": _slot("data"), "config": _slot("config"),
                                                             "js": _JS.read_text(encoding="utf-8"),
                                                             "verbatim": _VERBATIM})
    finally:
        validate.unset_value()
    return _ids_outside_verbatim(page)


#: The files whose text a page's skeleton is made from (with Bokeh's and Jinja's versions: :func:`skeleton_file`).
SKELETON_SOURCES = ("html.py", "html_figures.py", "html_data.py", "palette.py", _JS.name)
#: The slots of every page (:func:`fill_page`).
SLOTS = ("causes", "config", "data", "detail", "last", "name", "summary", "title")


def skeleton_file(shape: PageShape) -> Path:
    """The kept skeleton of ``shape``: ``report-CODE-SHAPE.html`` in waitlab's cache, CODE a hash of the text of
    :data:`SKELETON_SOURCES`, of the versions of Bokeh and Jinja and of Bokeh's settings from the environment
    (``BOKEH_*``: a change of any of them makes a new file), SHAPE a hash of the shape."""
    bokeh_env = sorted((k, v) for k, v in os.environ.items() if k.startswith("BOKEH_"))
    code = hashlib.sha256(repr((version("bokeh"), version("jinja2"), bokeh_env)).encode())
    for name in SKELETON_SOURCES:
        code.update((_JS.parent / name).read_bytes())
    kind = hashlib.sha256(repr(shape).encode()).hexdigest()[:8]
    return cache_dir() / f"report-{code.hexdigest()[:12]}-{kind}.html"


def run_page_skeleton(shape: PageShape) -> str:
    """:func:`page_skeleton` of a page without a diagnosis, kept in waitlab's cache (:func:`skeleton_file`): made
    with Bokeh the first time, read from the cache after.  A kept file without every slot (edited, or damaged) is made
    again; skeletons kept for other code are removed when a new one is written; a cache that cannot be written is
    only not used."""
    path = skeleton_file(shape)
    try:
        kept = path.read_text(encoding="utf-8")
        if sorted(_SLOT.findall(kept)) == sorted(SLOTS):
            return kept
    except (OSError, UnicodeDecodeError):
        pass
    page = page_skeleton(shape)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, path)  # whole or not at all: another process may read it now
        code = path.name.split("-")[1]
        for old in path.parent.glob("report-*"):  # and the files a writer of other code left half written
            if old.name.split("-")[1] != code:
                old.unlink(missing_ok=True)
    except OSError:
        pass
    return page


def fill_page(skeleton: str, slots: dict[str, str]) -> str:
    """``skeleton`` with each slot replaced by its text (every slot exactly once)."""
    found: list[str] = []

    def text(m: re.Match[str]) -> str:
        found.append(m.group(1))
        return slots.get(m.group(1), "")

    page = _SLOT.sub(text, skeleton)
    if sorted(found) != sorted(slots):
        raise ValueError(f"the page's slots are {sorted(found)}, not {sorted(slots)}")
    return page


def build_html(meta: dict[str, Any], summary: dict[str, Any], events: pd.DataFrame, waits: pd.DataFrame,
               budget: pd.DataFrame, ledger: pd.DataFrame | None, diagnosis: dict[str, Any] | None = None) -> str:
    """The page, as text (see the module docstring): its skeleton (kept for a page without a diagnosis), then the
    slots."""
    n_ranks = _run_ranks(meta, events)
    shape = page_shape(n_ranks, budget)
    payload = timeline_payload(events, waits, ledger, n_ranks)
    payload["budget"] = budget_payload(budget)
    if shape.heatmap:
        payload["heatmap"] = heatmap_payload(waits, n_ranks)
    initial = _initial_ranks(n_ranks)
    name = html.escape(str(meta.get("scenario", "run")))
    config = {
        "colours": {"kinds": KIND_COLOURS, "patterns": PATTERN_COLOURS, "wait": WAIT, "cause": CAUSE,
                    "other": OTHER, "ink": INK},
        "regionColours": {r: SERIES[i % len(SERIES)] for i, r in enumerate(payload["regions"])},
        "initialRanks": initial, "window": WINDOW,
    }
    skeleton = run_page_skeleton(shape) if diagnosis is None else \
        page_skeleton(shape, events, waits, diagnosis, n_ranks)
    return fill_page(skeleton, {
        "name": name, "title": f"waitlab report: {name}", "last": str(initial[1] - 1),
        "summary": _summary(meta, summary, waits), "causes": _causes(ledger), "detail": _detail_note(payload, n_ranks),
        "data": json.dumps(payload, sort_keys=True).replace("</", "<\\/"),
        "config": "window.WAITLAB = " + json.dumps(config, sort_keys=True).replace("</", "<\\/") + ";"})


def _ids_outside_verbatim(page: str) -> str:
    """:func:`_ids` over the page but its verbatim parts, Bokeh's library and the timeline's data and script (three
    quarters of a small page; ids are only in Bokeh's document and the elements that hold its roots), which the
    template marks with :data:`_VERBATIM`; the marks go."""
    pieces = page.split(_VERBATIM)
    if len(pieces) != 5:  # a mark in the page's own text: renumber everything, as before the marks
        return _ids(page.replace(_VERBATIM, ""))
    renumbered = _ids(_VERBATIM.join(pieces[0::2])).split(_VERBATIM)
    return "".join([renumbered[0], pieces[1], renumbered[1], pieces[3], renumbered[2]])


def write_html_report(folder: Path, meta: dict[str, Any], summary: dict[str, Any], events: pd.DataFrame,
                      waits: pd.DataFrame, budget: pd.DataFrame, ledger: pd.DataFrame | None,
                      diagnosis: dict[str, Any] | None = None) -> Path:
    """Write ``folder/report.html``; returns its path."""
    path = Path(folder) / "report.html"
    path.write_text(build_html(meta, summary, events, waits, budget, ledger, diagnosis), encoding="utf-8")
    return path
