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
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from importlib.metadata import version
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waitlab.errors import EnvironmentProblem
from waitlab.experiments.report.html_data import BUDGET_COLUMNS, budget_payload, heatmap_payload, timeline_payload
from waitlab.experiments.report.html_text import causes_html, detail_note, models_html, summary_html
from waitlab.experiments.report.palette import CAUSE, INK, KIND_COLOURS, OTHER, PATTERN_COLOURS, SERIES, WAIT
from waitlab.experiments.writer import replaced_files
from waitlab.models.columns import Table, has, values
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


def page_shape(n_ranks: int, budget: Table) -> PageShape:
    """The shape of the page of a run of ``n_ranks`` ranks whose time budget is ``budget``."""
    return PageShape(tuple(c for c in BUDGET_COLUMNS if has(budget, c)) if len(budget) else (),
                     n_ranks > DIRECT_RANKS)


def _run_ranks(meta: dict[str, Any], events: Table) -> int:
    return int(meta.get("ranks") or (int(values(events, "rank").max()) + 1 if len(events) else 0))


def _initial_ranks(n_ranks: int) -> list[int]:
    return [0, min(n_ranks, DIRECT_RANKS if n_ranks <= DIRECT_RANKS else WINDOW)]


def report_document(shape: PageShape, events: Table | None = None, waits: Table | None = None,
                    diagnosis: dict[str, Any] | None = None, n_ranks: int = 0
                    ) -> tuple[Document, list[tuple[str, str]]]:
    """The page's Bokeh document and its parts in order (``("html", text)``, ``("root", name)``); text that holds the
    run's data is a slot (:func:`fill_page`).  ``diagnosis`` with ``events``, ``waits`` and ``n_ranks`` draws the
    diagnosis's figures; a page without a diagnosis needs none of them."""
    _import_bokeh_settings()
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
            parts.append(("html", models_html(diagnosis)))
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


def _import_bokeh_settings() -> None:
    """Import Bokeh's settings, also for a user without a home folder.

    ``bokeh.settings`` reads ``Path.home()`` when it is imported (the user's ``~/.bokeh/bokeh.yaml``), which raises
    ``RuntimeError: Could not determine home directory`` when there is neither ``HOME`` nor an entry in the password
    database (``docker run -u 12345``); every Bokeh import goes through it.  Bokeh has no setting for that file, so
    for that import only ``HOME`` names a folder that does not exist (Bokeh then reads no user configuration, as for a
    user who has none) and is unset again right after.  Anyone else imports Bokeh as it is.
    """
    if "bokeh.settings" in sys.modules:
        return
    try:
        Path.home()
        return
    except RuntimeError:
        pass
    os.environ["HOME"] = "/nonexistent"
    try:
        import bokeh.settings  # noqa: F401
    finally:
        os.environ.pop("HOME", None)


def page_skeleton(shape: PageShape, events: Table | None = None, waits: Table | None = None,
                  diagnosis: dict[str, Any] | None = None, n_ranks: int = 0) -> str:
    """The page with a slot for each part that holds the run's data (:func:`report_document`'s arguments).

    Bokeh's validation of the document (warnings about models that draw nothing, and the like) is not run on
    every page: it took a quarter of Bokeh's time here, the figures are the same code for every run, and
    ``tests/test_report_html_parts.py`` validates a document with every figure instead.
    """
    _import_bokeh_settings()
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
SKELETON_SOURCES = ("html.py", "html_figures.py", "html_data.py", "html_text.py", "palette.py", _JS.name)
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
    try:
        path = skeleton_file(shape)
    except EnvironmentProblem:  # no cache folder can be determined (no home folder): made without the cache
        return page_skeleton(shape)
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


def build_html(meta: dict[str, Any], summary: dict[str, Any], events: Table, waits: Table, budget: Table,
               ledger: Table | None, diagnosis: dict[str, Any] | None = None) -> str:
    """The page, as text (see the module docstring): its skeleton (kept for a page without a diagnosis), then the
    slots.  The tables are Arrow tables or pandas DataFrames (the same page from either); a diagnosis's figures
    (:func:`report_document`) take pandas DataFrames."""
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
        "summary": summary_html(meta, summary, waits), "causes": causes_html(ledger),
        "detail": detail_note(payload, n_ranks),
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


def write_html_report(folder: Path, meta: dict[str, Any], summary: dict[str, Any], events: Table, waits: Table,
                      budget: Table, ledger: Table | None, diagnosis: dict[str, Any] | None = None) -> Path:
    """Write ``folder/report.html``; returns its path.

    The page is written beside it and renamed over it once complete (:func:`~waitlab.experiments.writer
    .replaced_files`): a write that fails (disk full, ``ulimit -f``) leaves the folder's earlier page whole, and the
    error names the page."""
    page = build_html(meta, summary, events, waits, budget, ledger, diagnosis)
    with replaced_files(Path(folder)) as files:
        files.path("report.html").write_text(page, encoding="utf-8")
    return Path(folder) / "report.html"
