"""Exports of a results folder for the tools users already have: OTF2, Chrome/Perfetto, GraphML.

* OTF2 (Vampir, Scalasca, Score-P's tools) through Debian's ``python3-otf2``;
* the Chrome trace (Perfetto UI, ``chrome://tracing``), exact to the nanosecond;
* the wait-propagation graph (GraphML for Gephi, yEd, Cytoscape, networkx) and its picture for small runs.

Files written into a results folder are added to its ``.waitlab`` list, so ``--force`` can still
replace the folder later.  An export replaces an earlier one whole or not at all
(:func:`~waitlab.experiments.writer.replaced_files`).  Another folder (``-o``) must hold nothing waitlab did not
write, and no record of another kind than an export's: another run's results folder or a report folder is refused
(:func:`~waitlab.experiments.run_folder.check_output_folder`); it gets a record of its own (kind ``export``)
when it has none, so that the next export into it replaces its files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.report.graph_plots import draw_propagation
from waitlab.experiments.results import load_run
from waitlab.experiments.run_folder import MARKER, check_output_folder, read_record, seal
from waitlab.experiments.writer import replaced_files
from waitlab.models.analysis.propagation import propagation_graph, write_graphml
from waitlab.simulator.chrome_trace import CHROME_MAX_EVENTS, write_chrome_trace
from waitlab.simulator.otf2_export import write_otf2

FORMATS = ("otf2", "chrome", "graphml")


def _register(folder: Path, written: Path) -> None:
    """List ``written`` (if it is inside ``folder``) in the folder's marker, as waitlab's own."""
    marker = folder / MARKER
    try:
        rel = written.resolve().relative_to(folder.resolve())
    except ValueError:
        return
    if not marker.is_file() or not rel.parts:
        return
    data = read_record(folder)
    files = set(data.get("files", []))
    files.add(rel.parts[0])
    data["files"] = sorted(files)
    marker.write_text(json.dumps(data, indent=1) + "\n")


def _run_ranks(folder: Path, meta: dict[str, Any], events: pd.DataFrame, default: int) -> int:
    """The run's rank count (``run.json`` ``ranks``, else the scenario's): every rank is an OTF2 location, those
    without events too.  Refused in one line when the event table names a rank beyond it (an edited folder)."""
    ranks = meta.get("ranks", default)
    if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1:
        raise InputError(str(folder / "run.json"), "ranks", f"must be a whole number >= 1, got {ranks!r}",
                         "restore the run's run.json, or run the scenario again")
    top = int(events["rank"].max()) + 1 if len(events) else 0
    if top > ranks:
        raise InputError(str(folder / "run.json"), "ranks", f"says {ranks} ranks but events.parquet has rank "
                         f"{top - 1}", "restore the run's run.json and events.parquet, or run the scenario again")
    return ranks


def export_run(folder: str | Path, formats: tuple[str, ...], out: str | Path | None = None,
               trust_edited: bool = False) -> dict[str, Path]:
    """Write the requested ``formats`` of a results folder; return ``format -> path``.

    Parameters
    ----------
    folder : path
        Results folder of ``waitlab run``.
    formats : tuple of str
        Any of :data:`FORMATS`.
    out : path, optional
        Folder the exports go to (default: the results folder itself): ``otf2/traces.otf2``,
        ``trace.json``, ``propagation.graphml`` (and ``propagation.png`` for graphs small enough to draw).
    trust_edited : bool
        Export a folder whose integrity record is missing or whose files changed; the exports' metadata
        (OTF2 properties, the Chrome trace's ``otherData``) then carry ``trust_edited`` with the reason.
    """
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise InputError("(command line)", "format", f"unknown or missing export format {unknown or formats}",
                         f"choose among: {', '.join('--' + f for f in FORMATS)}")
    run = load_run(folder, trust_edited)
    target = Path(out) if out is not None else run.folder
    other = target.resolve() != run.folder.resolve()  # -o: not the results folder, whose files the exports join
    if other:
        check_output_folder(target, "export folder", kind="export")  # not another run's folder, nor a report's
    target.mkdir(parents=True, exist_ok=True)
    meta = run.metadata
    if "chrome" in formats and len(run.events) > CHROME_MAX_EVENTS:  # refused before anything is written
        raise InputError(str(run.folder), "events", f"has {len(run.events)} events, more than the "
                         f"{CHROME_MAX_EVENTS} a Chrome trace holds", "use --otf2 for large runs")
    written: dict[str, Path] = {}
    # each export is written beside its final name and renamed over it at the end: an export that fails or is
    # interrupted leaves the earlier one whole (or none), never a truncated archive or trace.json
    with replaced_files(target, "export file") as files:
        if "otf2" in formats:
            placement = (pd.read_csv(run.folder / "placement.csv") if (run.folder / "placement.csv").is_file()
                         else None)
            n_ranks = _run_ranks(run.folder, meta, run.events, run.scenario.ranks)
            anchor = write_otf2(run.events, run.waits, meta, files.path("otf2"), placement=placement,
                                comms=run.ops.comms, ledger_kinds=run.ledger()["kind"].astype(str).tolist(),
                                n_ranks=n_ranks)
            written["otf2"] = target / "otf2" / anchor.name
        if "chrome" in formats:
            if not write_chrome_trace(run.events, run.waits, meta, files.path("trace.json")):
                raise InputError(str(run.folder), "events", f"has {len(run.events)} events, more than the "
                                 f"{CHROME_MAX_EVENTS} a Chrome trace holds", "use --otf2 for large runs")
            written["chrome"] = target / "trace.json"
        if "graphml" in formats:
            graph = propagation_graph(run.events, run.waits)
            if run.edited:
                graph.graph["trust_edited"] = run.edited
            write_graphml(graph, files.path("propagation.graphml"))
            written["graphml"] = target / "propagation.graphml"
            if draw_propagation(graph, files.path("propagation.png"),
                                title=f"{run.scenario.name}: wait propagation (arrow: caused by)"):
                written["graph picture"] = target / "propagation.png"
            else:  # too large to draw: no picture (an earlier one stays)
                files.discard("propagation.png")
    for path in written.values():
        _register(run.folder, path)
        if other:
            _register(target, path)
    if other and not (target / MARKER).exists():  # a new export folder: the next export's check finds it waitlab's
        seal(target, "export", sums_of=())
    return written
