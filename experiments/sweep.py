"""Sweeps: what-if grids over scenario keys, one results folder per point, resumable.

A sweep file names a base scenario and a grid of dotted keys::

    base = "stencil_late_rank.toml"          # relative to the sweep file
    [grid]
    "scenario.ranks" = [16, 64]
    "simulation.alltoall" = ["ring", "bruck"]
    [sweep]
    name = "alltoall-whatif"                 # optional
    executor = "local"                       # or "dask"
    workers = 2
    scheduler = "tcp://scheduler-host:8786"  # dask only: use an existing cluster

Every point is a full scenario (any key of the schema can vary, perturbation sections and
``application.imbalance[i].*`` included; a key the base scenario cannot take is an error); its
results go to ``OUT/runs/<scenario hash>/`` through the one pipeline
(:func:`waitlab.experiments.pipeline.run`, :func:`waitlab.experiments.results.write_run`); a point's folder is
written into this run's hidden attempt folder and renamed into place by the sweep itself only once it is
complete (:mod:`waitlab.experiments.sweep_points`), never by a point that outlives a stopped sweep.  A sweep that
is interrupted therefore resumes by skipping the points whose folder exists, without redoing or corrupting them;
``OUT/sweep.csv`` is rebuilt from the finished folders.

A point's folder is named by its scenario hash, which covers the files the scenario reads (a platform file, a noise
signature, a program's sources): the sweep reads each of those once, when it is loaded
(:class:`~waitlab.experiments.scenario.InputFiles`), hands the platform files' bytes to its workers and checks that
every point's run records the hash it was planned under.  A file edited while the sweep runs therefore changes none
of its points (the sweep says so at the end), and the next run of the sweep, reading the new file, runs again exactly
the points whose hash changed.  A finished folder whose ``run.json`` records another hash than its name is not
taken as done: it is run again.
"""

from __future__ import annotations

import copy
import itertools
import math
import signal
import sys
import threading
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import CancelledError, Executor, Future, as_completed, wait
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from waitlab.errors import InputError, Interrupted, WaitlabError, unknown_name
from waitlab.experiments.dask_connect import address_problem
from waitlab.experiments.diagnosis.groundtruth import Bar
from waitlab.experiments.diagnosis.registry import resolve_all
from waitlab.experiments.diagnosis.sweep_scores import add_scores
from waitlab.experiments.executors import check_executor, open_executor
from waitlab.experiments.leftovers import clean_stale_partials
from waitlab.experiments.physics_limits import is_platform_path
from waitlab.experiments.run_folder import INCOMPLETE, check_output_folder, sweep_started, write_error
from waitlab.experiments.scenario import (
    Scenario,
    from_mapping,
    load_scenario,
    noise_file_digest,
    read_toml,
    set_dotted,
)
from waitlab.experiments.schema import STRICT, FieldProblem, PlainName, freeze, raise_validation
from waitlab.experiments.sweep_columns import details, figures_note
from waitlab.experiments.sweep_grid import builtin_file, check_keys, check_platforms, label, shown, spelled
from waitlab.experiments.sweep_lock import sweep_lock
from waitlab.experiments.sweep_points import (
    STOP_WAIT,
    check_draft,
    dask_client,
    discard,
    discard_stale_attempts,
    new_attempt,
    publish,
    recorded_hash,
    scheduler_of,
    stop_points,
    write_point,
    write_point_isolated,
)
from waitlab.platforms import PlatformModel, load_platform
from waitlab.platforms.model import read_platform_file
from waitlab.readers import read_json
from waitlab.simulator.settings_check import check_settings

#: Most points of one sweep: each is a results folder and a validated scenario (a 10^6-point grid took minutes
#: to expand before it was refused); larger studies are several sweeps.
MAX_POINTS = 10_000


class SweepSection(BaseModel):
    """``[sweep]``: the sweep's name and where its points run."""

    model_config = STRICT
    name: PlainName = Field(description="plain name; names the sweep folder (default: the file's stem)")
    executor: Literal["local", "dask"] = Field("local", description="local processes or Dask distributed")
    workers: int | None = Field(None, ge=1, le=1024, description="parallel points (default: cores)")
    scheduler: str | None = Field(None, min_length=1, description="address of an existing Dask scheduler")
    diagnose: tuple[str, ...] = Field((), description="diagnosis models scored at every point (columns "
                                      "<model>.<score>): built-in keys or package.module:function")

    @model_validator(mode="before")
    @classmethod
    def _scheduler_implies_dask(cls, data: Any) -> Any:
        """``scheduler`` without ``executor``: the Dask executor (a scheduler is Dask's)."""
        if isinstance(data, Mapping) and data.get("scheduler") is not None and "executor" not in data:
            return {**data, "executor": "dask"}
        return data

    @field_validator("scheduler")
    @classmethod
    def _scheduler_address(cls, value: str | None) -> str | None:
        """An address Dask can reach: ``tcp://``, ``tls://`` or no scheme, a host and a port (not the dashboard's
        web address)."""
        problem = address_problem(value) if value is not None else None
        if problem is not None:
            raise FieldProblem("", *problem)
        return value

    @model_validator(mode="after")
    def _scheduler_needs_dask(self) -> SweepSection:
        if self.scheduler is not None and self.executor != "dask":
            raise FieldProblem("scheduler", 'only used with the dask executor: set executor = "dask"')
        return self


@dataclass(frozen=True)
class SweepPoint:
    """One scenario of a sweep and the grid values that made it."""

    values: tuple[tuple[str, Any], ...]
    scenario: Scenario
    data: dict[str, Any]

    @cached_property
    def key(self) -> str:
        """The point's scenario hash (its folder's name), of the files as the sweep read them when loaded."""
        return self.scenario.hash()


@dataclass(frozen=True)
class Sweep:
    name: str
    points: tuple[SweepPoint, ...]
    executor: str = "local"
    workers: int | None = None
    scheduler: str | None = None
    diagnose: tuple[str, ...] = ()
    path: str = ""  # the sweep file (named in the resume hint)


def load_sweep(path: str | Path) -> Sweep:
    """Read a sweep file and expand its grid into validated scenarios."""
    p = Path(path)
    file = str(p)
    data = read_toml(p, "sweep")
    if "scenario" in data and "base" not in data:
        raise InputError(file, "(file)", "is a scenario, not a sweep file (base, [grid], [sweep])",
                         f"run it with `waitlab run {file}`, or write a sweep file with base = \"{p.name}\" and a "
                         "[grid]")
    for key in data:
        if key not in ("base", "grid", "sweep"):
            raise InputError(file, key, "unknown key", "allowed: base, [grid], [sweep]")
    if not isinstance(data.get("base"), str):
        raise InputError(file, "base", "is required: the path of the base scenario", 'base = "scenario.toml"')
    base_path = (p.parent / data["base"]).resolve()
    if not base_path.is_file():
        raise InputError(file, "base", f"{base_path} does not exist", "give a path relative to the sweep file")
    base_scenario = load_scenario(base_path)
    base = base_scenario.resolved()
    grid = data.get("grid", {})
    if not isinstance(grid, dict) or not grid:
        raise InputError(file, "grid", "must be a table with at least one key", '"scenario.ranks" = [16, 64]')
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise InputError(file, f"grid.{key}", "must be a non-empty list of values", f'"{key}" = [1, 2]')
    check_keys(grid, file)
    opts = data.get("sweep", {})
    if not isinstance(opts, dict):
        raise InputError(file, "sweep", "must be a table", "write it as [sweep] with name, executor, workers")
    allowed = ("name", "executor", "workers", "scheduler", "diagnose")
    for key in opts:
        if key not in allowed:
            raise unknown_name(file, f"sweep.{key}", key, allowed, f"allowed: {', '.join(allowed)}")
    keys = list(grid)
    n_points = math.prod(len(v) for v in grid.values())
    if n_points > MAX_POINTS:
        raise InputError(file, "grid", f"makes {n_points:,} points ({' x '.join(str(len(v)) for v in grid.values())})"
                         f"; a sweep runs at most {MAX_POINTS:,}", "split it into several sweeps or use fewer values")
    points = []
    read = base_scenario.inputs  # each platform and noise file is read once, for every point that uses it
    for combo in itertools.product(*(grid[k] for k in keys)):
        scen = copy.deepcopy(base)
        for k, v in zip(keys, combo, strict=True):
            set_dotted(scen, k, v, file)
        values = tuple(zip(keys, combo, strict=True))
        named = label(values)
        try:
            sc = from_mapping(scen, str(base_path), inputs=read)
            check_settings(dict(sc.simulation.config_pairs()), str(base_path))  # as waitlab run checks them
        except InputError as exc:  # the scenario's own words, and its fix or "change that grid value"
            where = exc.field if exc.file == str(base_path) else f"{exc.file}: {exc.field}"
            raise InputError(file, f"grid ({named})", f"makes an invalid scenario: {where}: {exc.problem}",
                             exc.fix or "change that grid value") from None
        read = read.merged(sc.inputs)
        points.append(SweepPoint(values, sc, scen))
    check_platforms([(_label(pt), str(pt.scenario.platform.name)) for pt in points], file, dict(read.platforms))
    _check_distinct(points, grid, file)
    try:
        opts_model = SweepSection.model_validate({"name": p.stem, **freeze(opts)})
    except ValidationError as exc:
        raise_validation(exc, file, "sweep", SweepSection)
        raise
    resolve_all(list(opts_model.diagnose), file, "sweep.diagnose")  # an unknown model: refused before any run
    return Sweep(name=opts_model.name, points=tuple(points), executor=opts_model.executor,
                 workers=opts_model.workers, scheduler=opts_model.scheduler, diagnose=opts_model.diagnose,
                 path=file)


def _check_distinct(points: list[SweepPoint], grid: Mapping[str, list[Any]], file: str) -> None:
    """Refuse a grid two of whose points make the same scenario, naming the value listed twice, or else the two
    points (a key that does not change the scenario, or values that mean the same)."""
    for key, values in grid.items():
        for i, v in enumerate(values):
            if any(type(v) is type(w) and v == w for w in values[:i]):
                raise InputError(file, f"grid.{key}", f"lists the value {spelled(v)!r} twice: two grid points would "
                                 "make the same scenario", "list each value once")
    first: dict[str, SweepPoint] = {}
    for pt in points:
        other = first.setdefault(_meaning(pt), pt)
        if other is not pt:
            raise InputError(file, "grid", f"the points ({_label(other)}) and ({_label(pt)}) make the same scenario "
                             "(a key that does not change it, or two values that mean the same)",
                             "drop that key or one of those values")


def _meaning(pt: SweepPoint) -> str:
    """What tells the point's scenario from another: its hash, taken with a built-in platform's own data file named
    as that built-in platform, which is what it simulates."""
    builtin = builtin_file(pt.scenario.platform.name)
    if builtin is None:
        return pt.key
    data = copy.deepcopy(pt.data)
    data["platform"]["name"] = builtin
    return from_mapping(data, pt.scenario.source).hash()


def _values(point: SweepPoint) -> dict[str, Any]:
    """The point's grid values as the tables show them (a table of settings as ``key=value``)."""
    return {k: shown(v) for k, v in point.values}


def _row(point: SweepPoint, summary: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = _values(point)
    row["scenario_hash"] = point.key
    row["makespan"] = summary["makespan"]
    for k, v in summary["totals"].items():
        row[f"total_{k}"] = v
    row["max_rank_wait"] = summary["max_rank_wait"]
    row["wait_states"] = summary["wait_states"]
    return row


#: The diagnosis models that failed at a point (``[sweep] diagnose``): point, scenario_hash, model, error.
MODEL_FAILURES = "model_failures.csv"


def run_sweep(sweep: Sweep, out: Path, *, executor: Executor | None = None,
              progress: Callable[[str], None] | None = None, bar: bool = False) -> pd.DataFrame:
    """Run every point not finished yet; return the table of all finished points (also ``out/sweep.csv``).

    A point that fails (its error, any kind) is recorded in ``out/failed.csv`` and the others go on; rerunning
    the sweep retries it.  A diagnosis model that fails at a point is recorded in ``out/model_failures.csv``
    (``table.attrs["model_failures"]``).  ``table.attrs["counts"]`` holds how many points are done (``done``:
    finished, this run or before), ``ran`` (this run), ``failed`` and ``skipped`` (already finished before this
    run).  The folder is locked (:func:`sweep_lock`) while the sweep runs.  ``bar`` shows a tqdm progress bar (k/N
    points, ETA) on stderr.

    Interrupted (Ctrl-C, SIGTERM: a :class:`KeyboardInterrupt`), the sweep starts no more points, stops the
    running ones (their folders are removed), writes ``sweep.csv`` of the finished points with
    ``incomplete.txt`` beside it, and raises :class:`~waitlab.errors.Interrupted` saying what was kept and how
    to resume.  When a point cannot be written because the disk is full or the folder is not writable, no
    further point is started.
    """
    out = Path(out)
    runs = out / "runs"
    if executor is None:  # settings first: a refused setting leaves nothing behind
        check_executor(sweep.executor, sweep.workers, sweep.scheduler, f"sweep {sweep.name}")
    # a sweep's folder is resumed whatever else it holds; any other folder must be new or empty (SWEEP_STARTED),
    # and one holding a waitlab record (a run's, an export's, a report's) is not a sweep's
    check_output_folder(out, "sweep folder", own=("*",) if sweep_started(out) else (), kind="sweep")
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "(sweep folder)", "exists and is not a folder", "choose another -o")
    try:
        runs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, out, "sweep folder") from None
    with sweep_lock(out):
        return _run_locked(sweep, out, runs, executor, progress or (lambda _msg: None), bar)


def _label(pt: SweepPoint) -> str:
    return label(pt.values)


#: Seconds the sweep gives the Dask scheduler to cancel its queued points when it stops (closing the client ends
#: them anyway): a scheduler that went away, or one slowed by a frozen worker, is not waited for.
CANCEL_WAIT = 3.0
#: Seconds the sweep waits, once the scheduler is lost, for the results of points that had finished to arrive.
LOST_DRAIN = 2.0


def _cancel(ex: Executor, futures: Collection[Future[Any]]) -> None:
    """Cancel ``futures``: at once for the local executor; on Dask (each cancel asks the scheduler) in a thread of
    its own, waited for at most :data:`CANCEL_WAIT` seconds."""
    if dask_client(ex) is None:
        for fut in futures:
            fut.cancel()
        return
    asking = threading.Thread(target=lambda: [fut.cancel() for fut in futures], name="waitlab-cancel", daemon=True)
    asking.start()
    asking.join(CANCEL_WAIT)


def _stop(ex: Executor, futures: Mapping[Future[Any], SweepPoint], attempt: Path) -> tuple[int | None, int]:
    """Start nothing more; end what runs (the local executor kills its children, Dask workers end theirs) and
    remove the attempt folder, so that no point can land a folder afterwards (:mod:`.sweep_points`).  Returns how
    many running points Dask workers ended (None when not Dask) and how many workers did not answer.  On Dask
    nothing here waits for a worker or a scheduler that does not answer (:data:`CANCEL_WAIT`,
    :data:`~.sweep_points.STOP_WAIT`)."""
    _cancel(ex, list(futures))
    ended = stop_points(ex, attempt)
    stop = getattr(ex, "stop", None)
    if callable(stop):
        stop()
    discard(attempt)
    return ended


def _run_locked(sweep: Sweep, out: Path, runs: Path, executor: Executor | None,
                say: Callable[[str], None], bar: bool = False) -> pd.DataFrame:
    discard_stale_attempts(runs)
    clean_stale_partials(runs)
    todo = _to_run(sweep, runs, say)
    before = {pt.key for pt in sweep.points} - {pt.key for pt in todo}  # finished by an earlier run of the sweep
    say(f"sweep {sweep.name}: {len(sweep.points)} points, {len(before)} already done, {len(todo)} to run")
    failures: list[dict[str, Any]] = []
    published: set[str] = set()
    if todo:
        def submit_all(ex: Executor) -> None:
            try:
                attempt = new_attempt(runs).absolute()  # what workers are told: each runs in a folder of its own
            except OSError as exc:
                raise write_error(exc, out, "sweep folder") from None
            try:
                _submit_all(ex, attempt)
            finally:
                discard(attempt)

        def _submit_all(ex: Executor, attempt: Path) -> None:
            # on Dask a point runs in a child process of the worker, so that stopping it ends its SimGrid run
            fn = write_point_isolated if dask_client(ex) is not None else write_point
            # each point is handed the files as the sweep read them: it simulates the bytes its key was hashed from
            futures = {ex.submit(fn, pt.data, pt.scenario.source, str(attempt), pt.key, pt.scenario.inputs): pt
                       for pt in todo}
            pending = set(futures)
            address = scheduler_of(ex) or sweep.scheduler  # named in the resume command

            def take(fut: Future[Any]) -> bool:
                """Publish a point that came back, or record its failure; False: no point can be written."""
                pt = futures[fut]
                try:
                    draft, _summary = fut.result()
                    check_draft(draft, pt.key, pt.scenario.source)  # it ran what its folder's name says
                    publish(draft, attempt, runs / pt.key)
                    published.add(pt.key)
                    say(f"done: {_label(pt)}")
                except Exception as exc:
                    text = str(exc) if isinstance(exc, WaitlabError) else f"{type(exc).__name__}: {exc}"
                    if isinstance(exc, CancelledError):  # not by this sweep, and the scheduler still answers
                        text = "cancelled on the Dask cluster, not by this sweep (another client?)"
                    failures.append({**_values(pt), "scenario_hash": pt.key, "error": one_line(text)})
                    say(f"FAILED: {_label(pt)}: {one_line(text)}")
                    if getattr(exc, "unwritable", False):  # no point can be written: start no more
                        _stop(ex, {f: futures[f] for f in pending}, attempt)
                        clean_stale_partials(runs)  # folders of points stopped before they removed them
                        for f in sorted(pending, key=lambda f: sweep.points.index(futures[f])):
                            p = futures[f]
                            failures.append({**_values(p), "scenario_hash": p.key,
                                             "error": "not run: " + one_line(text)})
                        say(f"sweep {sweep.name}: stopped: no point can be written ({one_line(text)})")
                        return False
                return True

            try:
                for fut in Bar(as_completed(futures), total=len(futures), desc=f"sweep {sweep.name}",
                                unit="point", disable=not bar, file=sys.stderr):
                    pending.discard(fut)
                    if scheduler_lost(ex, fut):  # every point not back yet is lost with it: none of them failed
                        pending.add(fut)
                        break
                    if not take(fut):
                        return
                else:
                    return
            except KeyboardInterrupt as exc:
                running = sum(1 for f in pending if f.running())
                ended, silent = _stop(ex, futures, attempt)
                clean_stale_partials(runs)  # folders of points killed before they could remove them
                raise _interrupted(sweep, out, runs, failures, exc, running if ended is None else ended,
                                   address, silent=silent) from None
            # the connection to the scheduler is lost: the points that had come back are kept, the rest are missing
            wait(pending, timeout=LOST_DRAIN)
            for f in sorted(pending, key=lambda f: sweep.points.index(futures[f])):
                if f.done() and not f.cancelled():
                    pending.discard(f)
                    take(f)
            discard(attempt)  # a point still running anywhere ends on seeing it gone
            clean_stale_partials(runs)
            raise _scheduler_lost(sweep, out, runs, failures, len(pending), address)

    try:
        if todo and executor is not None:
            submit_all(executor)
        elif todo:
            with open_executor(sweep.executor, sweep.workers, sweep.scheduler, source=f"sweep {sweep.name}") as ex:
                submit_all(ex)
        clean_stale_partials(runs)  # e.g. of a Dask worker killed mid-point (the point ran again elsewhere)
        models = _platform_models(sweep)
        table, failed_csv = _write_tables(sweep, out, runs, failures, say, done=before | published, models=models)
    except Interrupted:  # said by the loop over the points: what was kept, what was stopped
        raise
    except KeyboardInterrupt as exc:  # every point had come back: the executor was closing or the table being written
        clean_stale_partials(runs)
        raise _interrupted(sweep, out, runs, failures, exc, 0,
                           scheduler_of(executor) or sweep.scheduler) from None
    (out / INCOMPLETE).unlink(missing_ok=True)
    listed = set(table["scenario_hash"]) if len(table) else set()
    ran, skipped = len(published & listed), len(before & listed)  # a point whose folder went is a failure
    table.attrs["counts"] = {"done": len(table), "ran": ran, "failed": len(failures), "skipped": skipped}
    changed = changed_files(sweep)
    table.attrs["changed_files"] = changed
    note = figures_note(table, [(pt.key, str(pt.scenario.platform.name)) for pt in sweep.points], models)
    say(f"sweep {sweep.name}: {len(table)} of {len(sweep.points)} points done ({ran} this run, {skipped} skipped "
        f"as already done), {len(failures)} failed" + (f" (see {failed_csv}; run the sweep again to retry them)"
                                                       if failures else "")
        + (f"\n{changed_note(changed)}" if changed else "") + (f"\n{note}" if note else ""))
    return table


def _to_run(sweep: Sweep, runs: Path, say: Callable[[str], None]) -> list[SweepPoint]:
    """The points without a finished folder of their own: no ``runs/<key>/run.json``, or one recording another
    scenario hash than the folder's name (a run of another scenario, e.g. written by an older waitlab while its
    platform file was edited: it is removed and the point runs again)."""
    todo = []
    for pt in sweep.points:
        folder = runs / pt.key
        if (folder / "run.json").exists():
            recorded = recorded_hash(folder)
            if recorded == pt.key:
                continue
            say(f"running again: {_label(pt)}: {folder}/run.json records scenario hash {recorded}, not {pt.key}: "
                "it is the run of another scenario")
            discard(folder)
        todo.append(pt)
    return todo


def _platform_models(sweep: Sweep) -> dict[str, PlatformModel]:
    """The platform model of each platform of the sweep, from the files as the sweep read them (not as they are
    now: the points ran on those)."""
    models: dict[str, PlatformModel] = {}
    for pt in sweep.points:
        name = str(pt.scenario.platform.name)
        if name not in models:
            models[name] = load_platform(name, content=pt.scenario.platform_bytes())
    return models


def changed_files(sweep: Sweep) -> list[str]:
    """The platform and noise signature files of the sweep that no longer hold what the sweep read when it was
    loaded (edited while it ran): its points ran on what it read."""
    platforms: dict[str, bytes | None] = {}
    noise: dict[str, str | None] = {}
    for pt in sweep.points:
        sc = pt.scenario
        if is_platform_path(sc.platform.name):
            platforms.setdefault(sc.platform.name, sc.platform_bytes())
        if sc.noise is not None and sc.noise.file is not None:
            noise.setdefault(sc.noise.file, sc.noise_digest())
    changed = []
    for path, raw in platforms.items():
        try:
            now: bytes | None = read_platform_file(path)
        except InputError:
            now = None
        if now != raw:
            changed.append(path)
    changed += [path for path, digest in noise.items() if noise_file_digest(path) != digest]
    return changed


def changed_note(changed: list[str]) -> str:
    """What a sweep says when files it read changed while it ran."""
    files, them = ("files", "them") if len(changed) > 1 else ("file", "it")
    return (f"note: {', '.join(changed)} changed while the sweep ran: every point ran with the {files} as the sweep "
            f"read {them} when it started (the scenario_hash column names that version); run the sweep again to run "
            f"the points again with the {files} as {them} {'are' if len(changed) > 1 else 'is'} now")


def one_line(text: str) -> str:
    """The first line of an error's text (the rest, e.g. SimGrid's output, stays in the point's log)."""
    first = text.strip().splitlines()[0] if text.strip() else "failed without a message"
    return first if len(first) <= 2000 else first[:2000] + "..."


def _write_tables(sweep: Sweep, out: Path, runs: Path, failures: list[dict[str, Any]],
                  say: Callable[[str], None] | None = None, *, done: Collection[str] = (),
                  models: Mapping[str, PlatformModel] | None = None) -> tuple[pd.DataFrame, Path]:
    """``sweep.csv`` of the finished points (grid order) and ``failed.csv`` (removed when nothing failed).

    A point in ``done`` (finished, this run or before) without a finished folder of its own any more is added to
    ``failures``: the table never leaves out a finished point without saying so.
    """
    rows = []
    models = models if models is not None else _platform_models(sweep)
    figures = {name: (len(m.assumed), len(m.figures) - len(m.assumed)) for name, m in models.items()}
    for pt in sweep.points:
        summary_file = runs / pt.key / "summary.json"
        if summary_file.exists() and recorded_hash(runs / pt.key) == pt.key:
            summary = read_json(summary_file, "summary.json", 16 << 20, "run the sweep again")
            rows.append({**_row(pt, summary), **details(runs / pt.key, figures)})
        elif pt.key in done:
            failures.append({**_values(pt), "scenario_hash": pt.key,
                             "error": f"finished, but its folder {runs / pt.key} is gone or no longer holds its run"})
    # no point finished (interrupted early): the header alone, so the table still reads as the sweep's
    table = pd.DataFrame(rows) if rows else pd.DataFrame(columns=[*(k for k, _ in sweep.points[0].values),
                                                                   "scenario_hash", "makespan"])
    if sweep.diagnose and say is not None:  # diagnosis scores per point (issue 24); not when interrupted
        table = add_scores(table, sweep.points, runs, sweep.diagnose, say)
    failed_csv = out / "failed.csv"
    try:
        _write_csv(table, out / "sweep.csv")
        for path, rows_of in ((failed_csv, failures), (out / MODEL_FAILURES, table.attrs.get("model_failures"))):
            if rows_of:
                _write_csv(pd.DataFrame(rows_of), path)
            else:
                path.unlink(missing_ok=True)
    except OSError as exc:
        raise write_error(exc, out, "sweep folder") from None
    return table, failed_csv


class SchedulerLost(WaitlabError):
    """The sweep lost the connection to its Dask scheduler (it stopped, or the network failed): the finished points
    are kept, the others are missing, not failed, and running the same command again runs them (exit status 3,
    as for any sweep that leaves a point missing)."""

    exit_code = 3


def scheduler_lost(ex: Executor, fut: Future[Any]) -> bool:
    """Whether a point's future came back cancelled because the Dask client lost its scheduler (Dask then cancels
    every future of the client; the sweep cancels none while it waits for them)."""
    client = dask_client(ex)
    return client is not None and fut.cancelled() and getattr(client, "status", "running") != "running"


def _resume_command(sweep: Sweep, out: Path, scheduler: str | None) -> str:
    return f"waitlab sweep {sweep.path or 'SWEEP.toml'} -o {out}" + (f" --scheduler {scheduler}" if scheduler else "")


def _keep_finished(sweep: Sweep, out: Path, runs: Path, failures: list[dict[str, Any]], why: str, again: str) -> str:
    """Write the table of the finished points, marked incomplete (``incomplete.txt`` says the sweep ``why`` and how
    to resume); return the account of what was kept."""
    try:
        table, _ = _write_tables(sweep, out, runs, failures)
        (out / INCOMPLETE).write_text(
            f"sweep {sweep.name} {why}: {len(table)} of {len(sweep.points)} points finished; "
            f"sweep.csv lists only those.\nRun `{again}` to run the missing points.\n")
        return (f"{len(table)} of {len(sweep.points)} points finished and are kept ({runs}/<hash>/), their table "
                f"is {out / 'sweep.csv'} (marked incomplete: {out / INCOMPLETE})")
    except WaitlabError as err:
        return f"the finished points are kept in {runs}/, but their table could not be written ({err})"


def _interrupted(sweep: Sweep, out: Path, runs: Path, failures: list[dict[str, Any]], exc: BaseException,
                 running: int, scheduler: str | None = None, *, silent: int = 0) -> Interrupted:
    """Write the table of the finished points, marked incomplete, and the account of what was kept (the resume
    command names the ``scheduler`` the points ran on; ``silent``: Dask workers that did not answer the stop)."""
    signum = int(getattr(exc, "signum", signal.SIGINT))
    name = signal.Signals(signum).name
    again = _resume_command(sweep, out, scheduler)
    kept = _keep_finished(sweep, out, runs, failures, f"was interrupted by {name}", again)
    unanswered = (f" ({silent} Dask worker{' did' if silent == 1 else 's did'} not answer within {STOP_WAIT:g} s and "
                  f"{'was' if silent == 1 else 'were'} not waited for: {'its' if silent == 1 else 'their'} points end "
                  "on seeing their folder gone)") if silent else ""
    stopped = (f"; {running} running point{'' if running == 1 else 's'} stopped and removed{unanswered}"
               if running or unanswered else "")
    return Interrupted(f"sweep {sweep.name} interrupted by {name}: {kept}{stopped}; rerun `{again}` to run only "
                       "the missing points", signum)


def _scheduler_lost(sweep: Sweep, out: Path, runs: Path, failures: list[dict[str, Any]], missing: int,
                    scheduler: str | None) -> SchedulerLost:
    """Write the table of the finished points, marked incomplete, and say in one line that the connection to the
    scheduler was lost, what was kept and that the same command resumes."""
    where = scheduler or "(the LocalCluster started here)"
    again = _resume_command(sweep, out, scheduler)
    kept = _keep_finished(sweep, out, runs, failures, f"lost the connection to the Dask scheduler {where}", again)
    failed = f"; {len(failures)} failed (see {out / 'failed.csv'})" if failures else ""
    return SchedulerLost(f"sweep {sweep.name}: the connection to the Dask scheduler {where} was lost (it stopped, or "
                         f"the network failed): {kept}{failed}; {missing} unfinished point"
                         f"{' was' if missing == 1 else 's were'} not recorded as failed (fix: once the scheduler and "
                         f"its workers run again, rerun `{again}`: it runs only the missing points)")


def _write_csv(table: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    table.to_csv(tmp, index=False)
    tmp.replace(path)
