"""Results folders: written atomically, complete, reloadable, and never replacing what waitlab did not write.

A run folder holds the resolved scenario (``scenario.toml``, valid input), the
operations (``ops.parquet``, with the cause ledger), events, waits, ledger,
per-rank budget, summary, metadata (``run.json``, with ``schema_version``) and
for a perturbed run the unperturbed run (``unperturbed/``) and the perturbation
report.  Wall-clock timings go to ``timing.json`` only, so reruns are
byte-identical elsewhere.  ``.waitlab`` marks a folder as waitlab's and lists
what it wrote: ``--force`` replaces only such a folder with nothing foreign inside.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from waitlab.errors import InputError
from waitlab.experiments.leftovers import clean_stale_partials
from waitlab.experiments.physics_limits import is_platform_path
from waitlab.experiments.pipeline import Run, RunResult
from waitlab.experiments.real_params import REAL_KINDS
from waitlab.experiments.report.notebook import loaded_html
from waitlab.experiments.run_folder import MARKER, PICTURE_MODULES, verify_folder
from waitlab.experiments.scenario import Scenario, from_mapping, read_toml, scenario_hash
from waitlab.experiments.writer import jsonable
from waitlab.lazy import Deferred
from waitlab.models.analysis.metrics import ledger_frame, ledger_table
from waitlab.models.analysis.summary import detour_seconds, placement_text, rank_budget
from waitlab.models.analysis.timeline_check import impossible_line
from waitlab.models.columns import Table, arrow_array, names, text_columns, values
from waitlab.models.columns import table as columns_table
from waitlab.models.ops import CAUSE_KINDS, Ledger, OpTable
from waitlab.readers import check_bool, path_argument, read_json
from waitlab.simulator.chrome_trace import CHROME_SUMMARY_EVENTS, write_chrome_trace
from waitlab.simulator.export import ROW_GROUP_ROWS, parquet_options, read_table, repeating_columns, write_table
from waitlab.simulator.timeline import ROW_REFERENCES, SCHEMA_VERSION

if TYPE_CHECKING:
    import pandas as pd

    from waitlab.experiments.report import html as _html
    from waitlab.experiments.report import perturbation_report as _report
    from waitlab.experiments.report import plots as _plots
else:  # the pictures' writers (Bokeh, matplotlib) and a perturbed run's report (pandas): imported when first used
    _html = Deferred(PICTURE_MODULES["report.html"])
    _plots = Deferred(PICTURE_MODULES["timeline.png"])
    _report = Deferred("waitlab.experiments.report.perturbation_report")


def summary_text(summary: dict[str, Any], metadata: dict[str, Any]) -> str:
    """Human-readable summary printed by ``waitlab run``."""
    t = summary["totals"]
    where = (f"as recorded in {metadata.get('trace')} on {metadata['nodes']} hosts (no simulation)"
             if metadata.get("source") == "recorded" else
             f"on {metadata['platform']} "
             f"({placement_text(metadata['ranks'], metadata['nodes'], metadata['ranks_per_node'])}), seed "
             f"{metadata['seed']}, SimGrid {metadata['simgrid_version']}")
    lines = [
        f"scenario {metadata['scenario']} ({metadata['scenario_hash']}): {metadata['ranks']} ranks {where}",
        f"makespan {summary['makespan']:.6f} s, {summary['events']} events, {summary['wait_states']} wait states",
        "rank-seconds: " + ", ".join(f"{k} {v:.4f}" for k, v in t.items()),
    ]
    for title, key in (("wait by pattern", "wait_by_pattern"), ("wait by MPI operation", "wait_by_op"),
                       ("wait by call path", "wait_by_path")):
        items = list(summary[key].items())[:8]
        if items and [k for k, _ in items] != ["(top level)"]:  # one path, the top level: says nothing
            total = sum(summary[key].values())
            lines.append(f"{title}: " + ", ".join(f"{k} {v:.4f} s ({100 * v / total:.1f}%)" for k, v in items))
    if summary.get("impossible_collectives"):
        lines.append(impossible_line(summary["impossible_collectives"]))
    if metadata.get("exit_statuses"):  # accepted by [application] exit_codes
        lines.append("exit statuses accepted by [application] exit_codes: " + ", ".join(
            f"rank {r} returned {c}" for r, c in metadata["exit_statuses"].items()))
    if metadata.get("note"):
        lines.append(f"note: {metadata['note']}")
    return "\n".join(lines)


def write_ops(ops: OpTable, path: Path, metadata: dict[str, Any]) -> None:
    """The operation table as Parquet; names and rank count in the file's metadata."""
    meta = {b"waitlab": json.dumps({**metadata, "n_ranks": ops.n_ranks, "names": list(ops.names),
                                    "comms": [list(c) for c in ops.comms]}, sort_keys=True).encode()}
    schema = pa.schema([pa.field(c, pa.from_numpy_dtype(getattr(ops, c).dtype), nullable=False)  # numpy: no nulls
                        for c in OpTable.COLUMNS],
                       metadata=meta)
    repeating = repeating_columns({c: getattr(ops, c) for c in OpTable.COLUMNS})
    with pq.ParquetWriter(path, schema, **parquet_options(schema, repeating)) as writer:  # a row group at a time
        for start in range(0, max(len(ops), 1), ROW_GROUP_ROWS):
            part = pa.Table.from_arrays([arrow_array(getattr(ops, c)[start:start + ROW_GROUP_ROWS])
                                         for c in OpTable.COLUMNS], schema=schema)
            writer.write_table(part, row_group_size=ROW_GROUP_ROWS)


def placement_csv(placement: Table) -> str:
    """``placement.csv``: the placement table as CSV text (a header, then one line per rank, as pandas writes it).

    >>> from waitlab.platforms.placement_table import placement_table
    >>> print(placement_csv(placement_table((0, 0, 300), ("node-0", "node-0", "node-300"), 256, arrow=True)), end="")
    rank,node,supernode,host
    0,0,0,node-0
    1,0,0,node-0
    2,300,1,node-300
    """
    out = io.StringIO()
    cols = names(placement)
    writer = csv.writer(out, lineterminator="\n")  # quoted only where needed, as pandas' to_csv
    writer.writerow(cols)
    writer.writerows(zip(*(values(placement, c).tolist() for c in cols), strict=True))
    return out.getvalue()


def write_result(result: RunResult, folder: Path, *, png: bool = True, scenario_file: bool = True,
                 html: bool = True, chrome: bool = False) -> None:
    """Write every output file of one SMPI run into ``folder`` (``report.html`` too unless ``html=False``,
    ``trace.json`` only when ``chrome``).

    The files are made by two background threads, the longest first (``events.parquet``, ``trace.json``,
    ``report.html``, then the other tables), while this one writes the small ones and draws the timeline (the
    trace's C formatter, the page's gzip and pyarrow's encoder run without Python's lock, matplotlib mostly with
    it): each file is written by one thread, so its bytes do not change.
    """
    meta = result.metadata
    events, waits = result.event_table, result.wait_table
    budget = result.budget_table  # made with the summary, unless a rank has no event
    if budget is None or len(budget) != result.scenario.ranks:
        budget = rank_budget(events, waits, result.scenario.ranks)
    ledger = ledger_frame(result.ops, arrow=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        # the longest first (the event table's Parquet, then the pages): the last to end ends soonest
        tables: list[Future[Any]] = [
            pool.submit(write_table, events, folder / "events.parquet", meta, int64=ROW_REFERENCES)]
        # a summary (the first steps) beyond CHROME_SUMMARY_EVENTS: `waitlab export --chrome` writes the whole run
        trace = pool.submit(lambda: write_chrome_trace(events, waits, meta, folder / "trace.json",
                                                       max_events=CHROME_SUMMARY_EVENTS)) if chrome else None
        # offline, interactive; rewritten by `waitlab diagnose` and `waitlab report`
        page = pool.submit(_html.write_html_report, folder, jsonable(meta), jsonable(result.summary), events,
                           waits, budget, ledger) if html else None
        tables += [pool.submit(write_ops, result.ops, folder / "ops.parquet", meta),
                   pool.submit(write_table, text_columns(ledger), folder / "ledger.parquet", meta),
                   pool.submit(write_table, waits, folder / "waits.parquet", meta),
                   pool.submit(write_table, budget, folder / "ranks.parquet", meta)]
        if result.placement_table is not None:  # rank -> node, supernode (platform.placement)
            (folder / "placement.csv").write_text(placement_csv(result.placement_table))
        if png:
            _plots.timeline_png(result.events, result.waits, folder / "timeline.png", title=result.scenario.name)
        if scenario_file:
            (folder / "scenario.toml").write_text(f"# resolved scenario of a waitlab run: valid input\n"
                                                  f"{result.scenario.to_toml()}")
        if result.metadata.get("application_kind") == "program":
            write_program_output(result, folder / "program")
        (folder / "summary.json").write_text(json.dumps(jsonable(result.summary), indent=2, sort_keys=True) + "\n")
        (folder / "summary.txt").write_text(summary_text(result.summary, meta) + "\n")
        for written in tables if page is None else [*tables, page]:
            written.result()  # a writer's error is raised here
    run = {**meta, "resolved_scenario": result.scenario.resolved()}
    if trace is not None:  # trace.json was written (False: a table too large for one, not written)
        run["chrome_trace"] = trace.result()
    run["files"] = sorted([*(p.name for p in folder.iterdir()), "run.json"])
    (folder / "run.json").write_text(json.dumps(jsonable(run), indent=2, sort_keys=True) + "\n")


#: Largest ``program/output.txt`` kept (characters): beyond it, its beginning and end, and what was left out.
MAX_OUTPUT_CHARS = 8 << 20


def bounded_output(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """``text``, or at most its first and last ``limit / 2`` characters, cut at line ends, with a line of its own
    saying how much was left out.  A side whose kept part holds no line end (one line longer than ``limit / 2``)
    is cut inside that line, the marker still on a line of its own.

    >>> print(bounded_output("one\\ntwo\\nthree\\nfour\\nfive", 10))
    one
    [waitlab: 15 characters of the program's output left out here (output.txt keeps 8)]
    five
    >>> print(bounded_output("abcdefghij", 4))
    ab
    [waitlab: 6 characters of the program's output left out here (output.txt keeps 4)]
    ij
    """
    if len(text) <= limit:
        return text
    half = limit // 2
    end = text.rfind("\n", 0, half) + 1  # the first kept part: whole lines, else the first half of the first line
    head = text[:end] if end else text[:half]
    start = text.find("\n", len(text) - half - 1) + 1  # the last kept part: whole lines, else the last half
    tail = text[start:] if 0 < start < len(text) else text[len(text) - half:]
    kept = len(head) + len(tail)
    sep = "" if head.endswith("\n") else "\n"
    return (f"{head}{sep}[waitlab: {len(text) - kept} characters of the program's output left out here "
            f"(output.txt keeps {kept})]\n{tail}")


def write_program_output(result: RunResult, folder: Path) -> None:
    """A real program's output: ``output.txt`` (its stdout and stderr, interleaved with SimGrid's messages, as
    smpirun printed them), ``workdir/`` (the files it wrote into its working folder) and ``rerun/`` (the
    platform XML, hostfile, program and exact smpirun command line: ``sh rerun/smpirun.sh`` re-runs it with
    stock SimGrid)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "output.txt").write_text(bounded_output(result.smpi_output))
    for rel, data in result.files.items():
        path = folder / "workdir" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for rel, data in result.rerun.items():  # platform.xml, hostfile, program, smpirun.sh: a stock SimGrid re-run
        path = folder / "rerun" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if rel in ("program", "smpirun.sh"):
            path.chmod(0o755)


def write_run(run: Run, folder: Path, *, png: bool = True, chrome: bool = False) -> None:
    """The whole results folder of ``waitlab run`` (perturbed runs: the unperturbed run and the report too;
    ``timeline.png`` when ``png``, ``trace.json`` when ``chrome``)."""
    res = run.result
    timing: dict[str, Any] = {"stage_seconds": res.stage_seconds}
    pres = run.perturbation
    if pres is not None:
        sub = folder / "unperturbed"
        sub.mkdir()
        write_result(pres.unperturbed, sub, png=False, scenario_file=False, html=False, chrome=chrome)
        meta = res.metadata
        write_table(pres.distortion, folder / "distortion.parquet", meta)
        if len(pres.condition_c.violations):
            write_table(pres.condition_c.violations, folder / "condition_c_violations.parquet", meta)
        buf = _report.buffer_timeline(pres)
        if len(buf):
            write_table(buf, folder / "buffer.parquet", meta)
        if len(pres.noise_hits):  # where noise landed: `waitlab check-c RUN` books it as noise, as the run did
            write_table(noise_detours(pres), folder / NOISE_DETOURS, meta, csv=False)
        (folder / "perturbation.json").write_text(json.dumps(jsonable(pres.report), indent=2, sort_keys=True) + "\n")
        (folder / "perturbation.txt").write_text(_report.report_text(pres.report) + "\n")
        timing["perturbation_stage_seconds"] = pres.perturbed.seconds
    (folder / "timing.json").write_text(json.dumps(jsonable(timing), indent=2, sort_keys=True) + "\n")
    write_result(res, folder, png=png, chrome=chrome)


#: The OS-noise detours inside the measured run's events (``rank``, ``seq``: the event; ``seconds``): written when
#: noise delayed work, summed in the folder's integrity record, read by :func:`folder_detours`.
NOISE_DETOURS = "noise_detours.parquet"
#: Said by every refusal of a damaged :data:`NOISE_DETOURS`.
_REWRITE = "re-run `waitlab run` to write the folder again"


def noise_detours(pres: Any) -> Table:
    """The events of a perturbation study's measured run that noise detours landed in (``rank``, ``seq``), and the
    detours' seconds in each (:func:`waitlab.models.analysis.summary.detour_seconds`), as an Arrow table."""
    ev, ops, hits = pres.measured.events, pres.measured.ops, pres.noise_hits
    seconds = detour_seconds(len(ev), _report.event_op_rows(ev, ops), hits.row, hits.seconds)
    rows = np.flatnonzero(seconds)
    return columns_table({"rank": ev["rank"].to_numpy()[rows].astype(np.int32),
                          "seq": ev["seq"].to_numpy()[rows].astype(np.int32), "seconds": seconds[rows]})


def folder_detours(folder: Path, events: Table) -> npt.NDArray[np.float64] | None:
    """Seconds of OS-noise detour inside every row of ``events`` (the folder's event table), from the folder's
    :data:`NOISE_DETOURS`; ``None`` when the folder has none (noise delayed no work, or the run was not perturbed).

    A perturbed run whose noise delayed work and that has no such file (written by a waitlab before it recorded where
    noise landed) is refused: its check would count the detours inside tracer rows as overhead, unlike the run's."""
    path = folder / NOISE_DETOURS
    if not path.exists():
        report = read_json(folder / "perturbation.json", "perturbation report") \
            if (folder / "perturbation.json").is_file() else {}
        noise = report.get("noise") if isinstance(report, dict) else None
        delayed = noise.get("delayed_work_seconds", 0) if isinstance(noise, dict) else 0
        if isinstance(delayed, int | float) and not isinstance(delayed, bool) and delayed > 0:
            raise InputError(str(path), "(file)", f"is missing: noise delayed {delayed:g} s of this run's work, and "
                             "without the file a detour inside a tracer row would count as overhead (the folder was "
                             "written before waitlab recorded where noise landed)",
                             "re-run `waitlab run`, or check events.parquet itself (detours then count as overhead)")
        return None
    if not path.is_file():
        raise InputError(str(path), "(file)", "is not a file", _REWRITE)
    try:
        t = pq.read_table(path)
    except Exception as exc:  # pyarrow raises many kinds
        raise InputError(str(path), "(file)", f"cannot be read: {' '.join(str(exc).split())[:300]}",
                         _REWRITE) from None
    for name, kind in (("rank", pa.types.is_integer), ("seq", pa.types.is_integer), ("seconds", pa.types.is_floating)):
        if name not in t.column_names or not kind(t.schema.field(name).type) or t.column(name).null_count:
            raise InputError(str(path), f"column {name}", "is missing, not of its type (rank, seq: integers; "
                             "seconds: a float) or has an empty value", _REWRITE)
    rank, seq = values(t, "rank").astype(np.int64), values(t, "seq").astype(np.int64)
    seconds = values(t, "seconds").astype(np.float64)
    if not np.isfinite(seconds).all() or (seconds < 0).any():
        raise InputError(str(path), "column seconds", "holds a negative or non-finite detour", _REWRITE)
    ev_rank, ev_seq = values(events, "rank").astype(np.int64), values(events, "seq").astype(np.int64)
    span = int(max(ev_seq.max(initial=0), seq.max(initial=0), 0)) + 1
    key, ev_key = rank * span + seq, ev_rank * span + ev_seq
    order = np.argsort(ev_key, kind="stable")
    at = np.searchsorted(ev_key[order], key)
    found = (rank >= 0) & (seq >= 0) & (at < len(order))
    found[found] = ev_key[order[at[found]]] == key[found]
    if not found.all():
        i = int(np.flatnonzero(~found)[0])
        raise InputError(str(path), "columns rank, seq", f"name event (rank {rank[i]}, seq {seq[i]}), which "
                         "events.parquet does not hold", _REWRITE)
    if np.unique(key).size != key.size:
        raise InputError(str(path), "columns rank, seq", "name an event twice", _REWRITE)
    row = order[at]
    length = values(events, "exit")[row] - values(events, "enter")[row]
    if (seconds > length + 1e-9).any():
        i = int(np.flatnonzero(seconds > length + 1e-9)[0])
        raise InputError(str(path), "column seconds", f"holds a detour of {seconds[i]:g} s in event (rank {rank[i]}, "
                         f"seq {seq[i]}), which lasts {length[i]:g} s", _REWRITE)
    return np.bincount(row, weights=seconds, minlength=len(events)).astype(np.float64)


@dataclass(frozen=True)
class LoadedRun:
    """A results folder read back: its scenario, operations, events, waits and metadata."""

    folder: Path
    scenario: Scenario
    events: pd.DataFrame
    waits: pd.DataFrame
    metadata: dict[str, Any]
    #: Why the folder is not the one its run wrote, when read with ``trust_edited`` ("" when intact); the same
    #: words are in ``metadata["trust_edited"]``, so every output made from it says so.
    edited: str = ""
    #: Why its scenario cannot be simulated again as the run (None when it can): a file the scenario reads (platform
    #: file, noise signature file, program sources or trace files) changed since the run, so re-resolving the
    #: scenario gives another scenario hash than run.json's.  The folder's tables are read all the same (report,
    #: compare, export, ``diagnose --no-truth``); a diagnosis's ground truth, which simulates the run again, raises it.
    changed: InputError | None = None
    #: The identity (device, inode, size, modification time) of each file read when first used (``ops.parquet``,
    #: ``ledger.parquet``) as it was when the folder was loaded: a file replaced since (``run --force`` into the
    #: folder) is another run's, refused by :meth:`check_unchanged`.
    stamps: tuple[tuple[str, tuple[int, ...]], ...] = field(default=(), repr=False, compare=False)

    def check_unchanged(self) -> None:
        """Refuse, in one line naming the folder, to read a file of the folder lazily when it changed since
        :func:`load_run` (it may be another run's: its ledger would be taken for this run's)."""
        for name, stamp in self.stamps:
            if _file_stamp(self.folder / name) != stamp:
                raise InputError(str(self.folder), name, "changed since the folder was loaded (it may be another "
                                 "run's now), so it cannot be read as this run's", "load the folder again: "
                                 "waitlab.load_run(folder)")

    @property
    def inputs_changed(self) -> str:
        """:attr:`changed` in words ("" when the scenario's files are those the run read)."""
        return "" if self.changed is None else str(self.changed)

    @property
    def perturbed(self) -> bool:
        return (self.folder / "perturbation.json").is_file()

    @cached_property
    def ops(self) -> OpTable:
        """The operations the run replayed, with the cause ledger: read when first used (the ground truth needs
        them, the models and ``diagnose --no-truth`` do not; 9 M operations take 0.6 GB)."""
        self.check_unchanged()
        return read_ops(self.folder / "ops.parquet")

    def ledger(self) -> pd.DataFrame:
        """The cause ledger (rank, region, step, seconds, kind), without reading the operations."""
        if "ops" in self.__dict__:
            return ledger_frame(self.ops)
        self.check_unchanged()
        path = self.folder / "ops.parquet"
        names = _ops_meta(path, _parquet_schema(path, "operation table"))[1]
        return ledger_table(read_ledger(self.folder / "ledger.parquet", names), names)

    def _repr_html_(self) -> str:
        return loaded_html(self)


#: Columns a results folder's tables must have to be read back (the rest is checked by their readers).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "events.parquet": ("rank", "seq", "kind", "op", "enter", "exit", "match"),
    "ledger.parquet": ("rank", "region", "step", "seconds", "kind"),
    "waits.parquet": ("event", "rank", "pattern", "op", "wait"),
}


#: Files of a results folder a :class:`LoadedRun` reads when first used (checked by :meth:`~LoadedRun.check_unchanged`).
LAZY_FILES = ("ops.parquet", "ledger.parquet")


def _file_stamp(path: Path) -> tuple[int, ...] | None:
    """A file's identity and version (device, inode, size, modification time in ns), None when it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _parquet_schema(path: Path, what: str = "") -> pa.Schema:
    """The schema of a results folder's table (its footer only), refused in one line when the file is missing,
    is no Parquet file or lacks a column it must have."""
    if not path.is_file():
        raise InputError(str(path), "(file)", "is missing", f"the results folder needs its {what or path.name}; "
                         "re-run `waitlab run` to rewrite it")
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises many kinds for truncated or foreign files
        raise InputError(str(path), "(file)", f"cannot be read as Parquet ({type(exc).__name__}: {exc})",
                         "the file is damaged; re-run `waitlab run` to rewrite it") from None
    missing = [c for c in REQUIRED_COLUMNS.get(path.name, ()) if c not in schema.names]
    if missing:
        raise InputError(str(path), f"column {missing[0]}", "is missing", "the file is damaged or not waitlab's; "
                         "re-run `waitlab run` to rewrite the folder")
    return schema


def _read_parquet(path: Path, what: str, int32: Sequence[str] = ()) -> pd.DataFrame:
    _parquet_schema(path, what)
    try:
        df, _ = read_table(path, int32)
    except Exception as exc:  # pyarrow raises many kinds for truncated or foreign files
        raise InputError(str(path), "(file)", f"cannot be read as Parquet ({type(exc).__name__}: {exc})",
                         "the file is damaged; re-run `waitlab run` to rewrite it") from None
    return df


def _ops_meta(path: Path, schema: pa.Schema) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The waitlab metadata of ``ops.parquet`` and its names (region names of the operations and the ledger)."""
    try:
        meta = json.loads((schema.metadata or {})[b"waitlab"])
        return meta, tuple(str(n) for n in meta["names"])
    except Exception as exc:
        raise InputError(str(path), "(file)", f"is not an operation table ({type(exc).__name__}: {exc})",
                         "re-run `waitlab run` to rewrite the folder") from None


def read_ledger(path: Path, names: tuple[str, ...]) -> Ledger:
    """The cause ledger of ``ledger.parquet``; ``names``: the operation table's names its regions index."""
    _parquet_schema(path, "cause ledger")
    lookup = {n: i for i, n in enumerate(names)}
    kind_of = {k: i for i, k in enumerate(CAUSE_KINDS)}
    unknown: set[str] = set()
    try:  # a row group's column at a time, copied into the ledger's arrays: the Parquet reader holds one column's
        # worth, not the table (0.1 GB at 1.3 M rows); region and kind come as dictionaries: no string per row
        pf = pq.ParquetFile(path, read_dictionary=["region", "kind"])
        n = pf.metadata.num_rows
        out = Ledger(rank=np.empty(n, np.int32), region=np.empty(n, np.int32), step=np.empty(n, np.int32),
                     seconds=np.empty(n, np.float64), kind=np.empty(n, np.int8))
        at = 0
        for g in range(pf.num_row_groups):
            rows = pf.metadata.row_group(g).num_rows
            for c in REQUIRED_COLUMNS["ledger.parquet"]:
                col, pos = pf.read_row_group(g, columns=[c]).column(0), at
                for chunk in (ch for ch in col.chunks if len(ch)):  # (an empty ledger's text columns have no type)
                    dst = getattr(out, c)[pos:pos + len(chunk)]
                    if c in ("region", "kind"):  # each chunk's own dictionary, looked up once per name
                        chunk = chunk if pa.types.is_dictionary(chunk.type) else chunk.dictionary_encode()
                        idx = chunk.indices.to_numpy()
                        used = np.bincount(idx, minlength=len(chunk.dictionary)) > 0
                        values = [str(v) for v in chunk.dictionary.to_pylist()]
                        if c == "kind":
                            unknown |= {v for v, u in zip(values, used, strict=True) if u and v not in kind_of}
                        table = lookup if c == "region" else kind_of
                        dst[:] = np.array([table.get(v, -1) for v in values] + [-1], dst.dtype)[idx]
                    else:
                        dst[:] = chunk.to_numpy()
                    pos += len(chunk)
                del col
            at += rows
    except Exception as exc:  # pyarrow raises many kinds for truncated or foreign files
        raise InputError(str(path), "(file)", f"cannot be read as Parquet ({type(exc).__name__}: {exc})",
                         "the file is damaged; re-run `waitlab run` to rewrite it") from None
    finally:
        pa.default_memory_pool().release_unused()
    if unknown:
        raise InputError(str(path), "column kind", f"holds {sorted(unknown)[0]!r}, not a kind of cause "
                         f"({', '.join(CAUSE_KINDS)})", "the file is damaged; re-run `waitlab run` to rewrite it")
    return out


def read_ops(path: Path) -> OpTable:
    """The operation table of ``ops.parquet`` (with the ledger of the ``ledger.parquet`` beside it)."""
    if not path.is_file():
        raise InputError(str(path), "(file)", "is missing", "re-run `waitlab run` to rewrite the folder")
    try:
        table = pq.read_table(path)
        cols = {c: table.column(c).to_numpy() if c in table.column_names else np.zeros(table.num_rows, np.int32)
                for c in OpTable.COLUMNS}  # folders written before the comm column: MPI_COMM_WORLD
    except Exception as exc:
        raise InputError(str(path), "(file)", f"is not an operation table ({type(exc).__name__}: {exc})",
                         "re-run `waitlab run` to rewrite the folder") from None
    meta, names = _ops_meta(path, table.schema)
    ledger = read_ledger(path.parent / "ledger.parquet", names)
    dtypes = {"rank": np.int32, "seq": np.int32, "code": np.int8, "step": np.int32, "name": np.int32,
              "value": np.float64, "value2": np.float64, "peer": np.int32, "tag": np.int32, "cause": np.int64,
              "excess": np.float64, "comm": np.int32}
    return OpTable(n_ranks=int(meta["n_ranks"]), names=names, ledger=ledger,
                   comms=tuple(tuple(int(r) for r in c) for c in meta.get("comms", [])),
                   **{c: np.asarray(cols[c], dtypes[c]) for c in OpTable.COLUMNS})


#: Largest run.json read back (bytes); waitlab's own are a few KiB.
MAX_RUN_JSON_BYTES = 16 << 20
#: Key of the metadata (and so of every output made from a run) saying it was read from an edited folder.
EDITED_KEY = "trust_edited"


def load_run(folder: str | Path, trust_edited: bool = False) -> LoadedRun:
    """Read a results folder of ``waitlab run`` (any kind of run) back, checking its schema version and its
    integrity record (:func:`~waitlab.experiments.run_folder.verify_folder`).

    ``trust_edited`` reads a folder whose record is missing or whose files changed anyway; the reason is then
    in ``edited`` and in ``metadata["trust_edited"]``, which every output made from the run carries.

    A file the scenario reads that changed since the run (:func:`inputs_changed`) does not stop the reading: it is
    kept in ``changed``, which a diagnosis's ground truth (simulating the run again) raises.
    """
    check_bool("trust_edited", trust_edited)
    folder = path_argument(folder, "folder", "results folder").absolute()  # a later chdir reads the same folder
    run_json = folder / "run.json"
    if not run_json.is_file():  # a `run --force` killed between its renames: the previous folder is put back
        clean_stale_partials(folder.parent, folder.name)
    if not folder.is_dir() or not run_json.is_file():
        raise InputError(str(folder), "(folder)", "is not a results folder of `waitlab run` (no run.json)",
                         "pass the folder written by `waitlab run`")
    meta = _run_json(run_json)
    unperturbed = is_unperturbed_run(folder)  # RUN/unperturbed: the scenario is RUN's (its perturbation not applied)
    scenario_path = (folder.parent if unperturbed else folder) / "scenario.toml"
    if not scenario_path.is_file():
        raise InputError(str(scenario_path), "(file)", "is missing", "re-run `waitlab run` to rewrite the folder")
    scenario = from_mapping(read_toml(scenario_path), str(scenario_path))
    changed = inputs_changed(scenario, meta, folder, scenario_path)  # read as it is; simulated again: refused
    stamps = tuple((name, _file_stamp(folder / name)) for name in LAZY_FILES)  # before reading: a later change shows
    ops_path = folder / "ops.parquet"  # the operations are read when first used (LoadedRun.ops); checked here
    _ops_meta(ops_path, _parquet_schema(ops_path, "operation table"))
    _parquet_schema(folder / "ledger.parquet", "cause ledger")
    events = _read_parquet(folder / "events.parquet", "event table", ROW_REFERENCES)  # int32, as in the run
    waits = _read_parquet(folder / "waits.parquet", "wait states")
    pa.default_memory_pool().release_unused()  # the Parquet decoding's buffers: back to the system now, not later
    # last: a damaged file gets its own error first; a valid but edited one this one
    edited = verify_unperturbed(folder, trust_edited) if unperturbed else verify_folder(folder, trust_edited)
    if edited:
        meta[EDITED_KEY] = edited
    return LoadedRun(folder, scenario, events, waits, meta, edited, changed,
                     tuple((n, st) for n, st in stamps if st is not None))


def input_files(scenario: Scenario) -> list[str]:
    """What the scenario reads besides itself, as a refusal names it: its platform file, noise signature file and
    application files (a program's sources, a trace)."""
    named = [f"platform file {scenario.platform.name}"] if is_platform_path(scenario.platform.name) else []
    if scenario.noise is not None and scenario.noise.file is not None:
        named.append(f"noise signature file {scenario.noise.file}")
    app = scenario.application
    if scenario.application_kind in REAL_KINDS and getattr(app, "digest", False):
        files = [*getattr(app, "sources", ()), *filter(None, [getattr(app, "binary", None)]),
                 *getattr(app, "inputs", ()), *filter(None, [getattr(app, "trace", None)])]
        shown = ", ".join(map(str, files[:3])) + (", ..." if len(files) > 3 else "")
        named.append(f"the application's sources and inputs ({shown})" if scenario.application_kind == "program"
                     else f"the application's trace files ({shown}; known by their sizes and modification times)")
    return named


def inputs_changed(scenario: Scenario, meta: dict[str, Any], folder: Path, scenario_path: Path) -> InputError | None:
    """Whether a file ``scenario`` (re-resolved from a results folder) reads changed since the run: its hash, over
    the files as they are now, is not run.json's ``scenario_hash``.  None when unchanged, else the one-line refusal
    of simulating it again, naming the file when the scenario reads one.

    The hash is also taken over run.json's ``resolved_scenario`` (the scenario as the run's waitlab resolved it: a
    later waitlab may fill in more defaults) and, for folders written before the hash covered the platform and noise
    files, with the application's digest alone (such a folder cannot tell an edited file: it is read as it is).
    """
    recorded = meta.get("scenario_hash")
    fingerprint = scenario.fingerprint()
    now = scenario_hash(scenario.resolved(), fingerprint)
    if not isinstance(recorded, str) or now == recorded:
        return None
    resolved = meta.get("resolved_scenario")
    if isinstance(resolved, dict) and recorded in (scenario_hash(resolved, fingerprint), scenario_hash(
            resolved, str(getattr(scenario.application, "digest", "")))):
        return None
    named = input_files(scenario)
    hashes = f"scenario hash now {now}, the run's {recorded}"
    harm = "simulating that run again (a diagnosis's ground truth) would simulate another scenario under its name"
    fix = (f"restore the file as the run read it, or run `waitlab run {scenario_path} -o NEW` to simulate the "
           "file as it is now (a sweep's point: run the sweep again)")
    if len(named) == 1 and named[0].startswith(("platform file ", "noise signature file ")):
        return InputError(named[0].split(" file ", 1)[1], "(file)",
                          f"changed since the run of results folder {folder} ({hashes}): {harm}", fix)
    if named:
        what = named[0] if len(named) == 1 else f"one of the files its scenario reads ({'; '.join(named)})"
        return InputError(str(folder), "(input files)", f"{what} changed since the run ({hashes}): {harm}", fix)
    return InputError(str(folder / "run.json"), "scenario_hash", f"is {recorded}, but the folder's scenario.toml "
                      f"gives {now}: {harm}", "re-run `waitlab run` to rewrite the folder")


def _run_json(run_json: Path) -> dict[str, Any]:
    """A results folder's ``run.json``, refused unless waitlab wrote it in the schema this version reads."""
    meta = read_json(run_json, "run.json", MAX_RUN_JSON_BYTES, "re-run `waitlab run`")
    if not isinstance(meta, dict) or "schema_version" not in meta:
        raise InputError(str(run_json), "schema_version", "is missing: this is not the run.json of a waitlab results "
                         "folder", "pass a folder written by `waitlab run`")
    version = meta["schema_version"]
    if version != SCHEMA_VERSION:
        raise InputError(str(run_json), "schema_version", f"is {version!r}; this waitlab reads version "
                         f"{SCHEMA_VERSION}", "re-run the scenario with this version of waitlab")
    return meta


def events_digest(events: pd.DataFrame) -> str:
    """SHA-256 (hex) of an event table's identity columns (rank, seq, enter, exit): the same for a run read
    back from its folder and for the same run simulated again, different after an edit.  A diagnosis names
    the run it belongs to with it (``diagnosis.json``'s ``run``)."""
    h = hashlib.sha256()
    for column, dtype in (("rank", np.int64), ("seq", np.int64), ("enter", np.float64), ("exit", np.float64)):
        values = events[column].to_numpy()
        for start in range(0, len(values), _DIGEST_ROWS):  # a slice at a time: no copy of the whole column
            h.update(np.ascontiguousarray(values[start:start + _DIGEST_ROWS], dtype).data)
    return h.hexdigest()


#: Rows of a column :func:`events_digest` converts at a time.
_DIGEST_ROWS = 1 << 20


def run_identity(meta: dict[str, Any], events: pd.DataFrame) -> dict[str, Any]:
    """What names a run in its diagnosis (``diagnosis.json``'s ``run``): scenario hash, ranks and the digest of
    its event table."""
    return {"scenario_hash": meta.get("scenario_hash"), "ranks": meta.get("ranks"),
            "events_digest": events_digest(events)}


def is_unperturbed_run(folder: Path) -> bool:
    """Whether ``folder`` is the ``unperturbed/`` run inside a perturbed run's results folder (it has no
    ``scenario.toml`` of its own: the scenario is RUN's)."""
    folder = Path(folder)
    return (folder.name == "unperturbed" and (folder / MARKER).is_file() and (folder / "run.json").is_file()
            and (folder.parent / MARKER).is_file() and (folder.parent / "scenario.toml").is_file())


def verify_unperturbed(folder: Path, trust_edited: bool = False) -> str:
    """Check ``RUN/unperturbed`` as :func:`verify_folder` checks a run: RUN itself (its scenario is the one of both
    runs), then every file the sub-folder's own integrity record lists; ``""`` when intact (with ``trust_edited``
    the reason it would have been refused)."""
    folder = Path(folder)
    return verify_folder(folder.parent, trust_edited) or verify_folder(folder, trust_edited, checked=None,
                                                                         required=("run.json", "events.parquet"))


def load_events(path: Path, trust_edited: bool = False) -> pd.DataFrame:
    """An event table from ``events.parquet``, ``events.csv`` or a results folder holding one (checked against
    its integrity record unless ``trust_edited``)."""
    check_bool("trust_edited", trust_edited)
    path = path_argument(path, "path", "event table or results folder")
    if path.is_dir():
        found = [c for c in (path / "events.parquet", path / "events.csv") if c.exists()]
        if not found:
            raise InputError(str(path), "(folder)", "holds no events.parquet or events.csv",
                             "pass a results folder written by waitlab run, or the event file itself")
        if (path / "run.json").is_file():  # a results folder: of the schema this version reads
            _run_json(path / "run.json")
        if is_unperturbed_run(path):
            verify_unperturbed(path, trust_edited)
        else:
            verify_folder(path, trust_edited)  # its event table must be the one its run wrote
        path = found[0]
    if not path.exists():
        raise InputError(str(path), "(file)", "does not exist", "check the path")
    import pandas as pd  # an event table file of any origin, read into pandas: its one reader here

    try:
        ev = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as exc:  # pyarrow/pandas raise many kinds
        said = " ".join(str(exc).split())  # pandas' parser errors span lines
        raise InputError(str(path), "(file)", f"cannot be read as an event table: {said[:300]}",
                         "use events.parquet or events.csv from a waitlab results folder") from None
    need = ("rank", "seq", "kind", "op", "enter", "exit", "match")
    missing = [c for c in need if c not in ev.columns]
    if missing:
        raise InputError(str(path), f"column {missing[0]}", "is missing",
                         f"an event table needs the columns {', '.join(need)} (docs/event_table.md)")
    return ev.sort_values(["rank", "seq"], kind="stable").reset_index(drop=True)
