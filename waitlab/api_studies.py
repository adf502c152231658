"""The API's studies over runs: sweeps, diagnosis and its workbench, comparison, exports, reports, reproductions.

Reached through :mod:`waitlab.api` (``waitlab.api.diagnose``, ``waitlab.diagnose``), which imports this module on
the first use of one of its names: these rooms bring Bokeh, matplotlib and networkx (1.5-2 s of imports), which
``waitlab run`` does not need before its SMPI stage (docs/performance.md).
"""

from __future__ import annotations

import numbers
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.compare import Comparison, compare_runs
from waitlab.experiments.compare import compare_png as _compare_png
from waitlab.experiments.diagnosis.check import check_model
from waitlab.experiments.diagnosis.diagnose import Diagnosis, check_options, diagnose_path
from waitlab.experiments.diagnosis.evaluate import cache_notes
from waitlab.experiments.diagnosis.evaluate import evaluate as _evaluate
from waitlab.experiments.diagnosis.groundtruth import default_cache_dir
from waitlab.experiments.diagnosis.leaderboard import LEADERBOARD_FILES, write_leaderboard
from waitlab.experiments.diagnosis.registry import DEFAULT_TIMEOUT, check_model_list, resolve_all
from waitlab.experiments.diagnosis.suite import check_only, suite_index
from waitlab.experiments.executors import open_executor
from waitlab.experiments.exports import FORMATS as EXPORT_FORMATS
from waitlab.experiments.exports import export_run
from waitlab.experiments.report.diagnosis_report import check_report_folder, report_dict, to_markdown
from waitlab.experiments.report.diagnosis_report import write_report as _write_report
from waitlab.experiments.report.rebuild import rebuild_report
from waitlab.experiments.report.sweep_plots import plot_sweep_folder, sweep_plot_axes
from waitlab.experiments.reproduce import he_sunway, okita_spilling, rao_alltoall, spill_policies, wu_lared_s
from waitlab.experiments.results import LoadedRun, load_run
from waitlab.experiments.run_folder import RESULTS_ROOT, check_output_folder, default_output, seal
from waitlab.experiments.sweep import Sweep, load_sweep, run_sweep
from waitlab.experiments.writer import check_picture_path, guarded_output
from waitlab.readers import check_bool, path_argument

__all__ = [
    "EXPORT_FORMATS",
    "REPRODUCTIONS",
    "Comparison",
    "Diagnosis",
    "Evaluation",
    "Sweep",
    "check_model",
    "compare",
    "compare_png",
    "diagnose",
    "evaluate",
    "export",
    "load_sweep",
    "plot",
    "plot_axes",
    "report",
    "report_dict",
    "sweep",
    "to_markdown",
    "with_models",
    "write_report",
]


def sweep(sweep_file: str | Path | Sweep, out: str | Path | None = None, *, executor: str | None = None,
          workers: int | None = None, scheduler: str | None = None, progress: Any = None,
          bar: bool = False) -> pd.DataFrame:
    """Run a what-if grid (resumable): one results folder per point and ``OUT/sweep.csv``.

    ``progress`` receives one message per point; ``bar`` shows a progress bar (k/N, ETA) on stderr.
    """
    check_bool("bar", bar)
    sw = sweep_file if isinstance(sweep_file, Sweep) else load_sweep(path_argument(sweep_file, "sweep_file", "sweep"))
    target = path_argument(out, "out", "sweep folder") if out is not None else default_output(sw.name)
    kind = executor or ("dask" if scheduler is not None else sw.executor)
    address = scheduler if scheduler is not None else sw.scheduler  # "" is refused, not taken for "none"
    with open_executor(kind, sw.workers if workers is None else workers, address, source=f"sweep {sw.name}") as ex:
        return run_sweep(sw, target, executor=ex, progress=progress, bar=bar)


#: The shares :func:`diagnose` takes: name -> (test, valid range, example).
_SHARES = {
    "culprit_share": (lambda v: 0 <= v <= 1, "a share in [0, 1]", "culprit_share=0.1 (10% of a model's blame)"),
    "focus_share": (lambda v: 0 < v <= 1, "a share in (0, 1]", "focus_share=0.9 (90% of the wait)"),
}


def diagnose(source: str | Path | LoadedRun, *, executor: Executor | None = None, out: str | Path | None = None,
             **kwargs: Any) -> Diagnosis:
    """CWP-DM, H-CWP-DM, the counterfactual ground truth and the scores of a results folder or scenario.

    ``out``: the report folder the diagnosis is to be written to (:func:`write_report`), refused before anything is
    read or simulated when :func:`write_report` would refuse it (a folder holding files waitlab did not write, or
    another run's folder: :func:`~waitlab.experiments.report.diagnosis_report.check_report_folder`).

    A results folder is read back as it is (only counterfactuals are simulated), checked against its integrity
    record unless ``trust_edited=True``; see
    :func:`waitlab.experiments.diagnosis.diagnose.diagnose` for the keyword arguments.  ``threshold``, ``tie_relative``
    (in [0, 1)), ``top_k`` (>= 1), ``n_candidates`` (>= 0), ``model_timeout`` (> 0), ``culprit_share`` (in [0, 1])
    and ``focus_share`` (in (0, 1]) out of range are refused before anything is read or simulated, as are ``models``
    that are not a list, ``truth``, ``memory``, ``use_cache`` or ``trust_edited`` that are not True or False
    (``truth="no"`` would compute the truth) and a ``cache_dir`` that is a file; an error names the Python argument
    (``models``, ``top_k``).
    """
    check_options(**{k: kwargs[k] for k in ("threshold", "tie_relative", "top_k", "n_candidates", "model_timeout")
                     if k in kwargs})
    for name, (test, valid, example) in _SHARES.items():
        if name in kwargs:
            value = kwargs[name]
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not test(value):  # NaN fails too
                raise InputError("(python call)", name, f"must be {valid}, got {value!r}", f"e.g. {example}")
    for name in ("truth", "memory", "use_cache", "trust_edited"):
        if name in kwargs:
            check_bool(name, kwargs[name])
    models = kwargs.get("models")
    if isinstance(models, str):
        raise InputError("(python call)", "models", f"must be a list of models, got the text {models!r}",
                         f"e.g. models=[{models!r}]")
    cache = kwargs.get("cache_dir")
    if cache is not None:
        cache = kwargs["cache_dir"] = path_argument(cache, "cache_dir", "cache folder")
    if cache is not None and cache.exists() and not cache.is_dir():
        raise InputError(str(cache), "cache_dir", "is a file, not a folder", "pass a folder for the counterfactual "
                         "cache (it is created when missing)")
    src = source if isinstance(source, LoadedRun) else path_argument(source, "source", "results folder or scenario")
    if out is not None:  # before the diagnosis: a refused report folder would waste its simulations
        check_report_folder(path_argument(out, "out", "report folder"))
    if executor is not None:
        return diagnose_path(src, executor=executor, **kwargs)
    # waitlab's own worker processes: no __main__ guard needed (scripts, stdin, notebooks), Ctrl-C stops them
    with open_executor("local", workers=2) as ex:
        return diagnose_path(src, executor=ex, **kwargs)


#: Paper reproductions of ``waitlab reproduce``: target name -> module (``reproduce``, ``write``, ``markdown``).
REPRODUCTIONS = {"wu-lared-s": wu_lared_s, "okita-spilling": okita_spilling, "spill-policies": spill_policies,
                 "rao-alltoall": rao_alltoall, "he-sunway": he_sunway}


def compare(run_a: str | Path | LoadedRun, run_b: str | Path | LoadedRun, *,
            trust_edited: bool = False) -> Comparison:
    """What changed from run A to run B (two results folders): makespan, waits, ranks and steps that moved.

    ``.text()`` is what ``waitlab compare`` prints, ``.to_dict()`` its ``--json``; draw it with :func:`compare_png`.
    ``trust_edited`` reads folders whose integrity record is missing or whose files changed (the comparison
    then says so).
    """
    a = run_a if isinstance(run_a, LoadedRun) else load_run(run_a, trust_edited)
    b = run_b if isinstance(run_b, LoadedRun) else load_run(run_b, trust_edited)
    return compare_runs(a, b)


def export(run_folder: str | Path, formats: str | tuple[str, ...] = ("otf2",),
           out: str | Path | None = None, *, trust_edited: bool = False) -> dict[str, Path]:
    """Export a results folder as OTF2, a Chrome/Perfetto trace and/or the wait-propagation graph (GraphML).

    ``formats`` are names of :data:`EXPORT_FORMATS` (a tuple or list of them, or one name: ``"otf2"``); returns
    ``format -> written path``.  ``trust_edited`` exports a folder whose integrity record is missing or whose files
    changed (the exports' metadata say so).
    """
    folder = path_argument(run_folder, "run_folder", "results folder")
    formats = _export_formats(formats)
    with guarded_output(path_argument(out, "out", "export folder") if out is not None else folder, "export folder"):
        return export_run(run_folder, formats, out, trust_edited)


def _export_formats(formats: object) -> tuple[str, ...]:
    """``formats`` of :func:`export` as a tuple of names of :data:`EXPORT_FORMATS` (one name is one format), or an
    :class:`~waitlab.errors.InputError` naming the argument ``formats``.

    >>> _export_formats("otf2"), _export_formats(["chrome", "otf2"])
    (('otf2',), ('chrome', 'otf2'))
    >>> try:
    ...     _export_formats(("otf2", "pdf"))
    ... except InputError as exc:
    ...     print(exc.file, exc.field, exc.problem)
    (python call) formats unknown export format 'pdf'
    """
    names = (formats,) if isinstance(formats, str) else formats
    if not isinstance(names, tuple | list) or not names or not all(isinstance(f, str) for f in names):
        raise InputError("(python call)", "formats", f"must be a format name or a tuple of them, got {formats!r}",
                         f"e.g. formats=('otf2', 'graphml') among {', '.join(map(repr, EXPORT_FORMATS))}")
    unknown = [f for f in names if f not in EXPORT_FORMATS]
    if unknown:
        raise InputError("(python call)", "formats", f"unknown export format {', '.join(map(repr, unknown))}",
                         f"choose among {', '.join(map(repr, EXPORT_FORMATS))}; e.g. formats=('otf2', 'graphml')")
    return tuple(names)


def plot(sweep_folder: str | Path, out: str | Path | None = None, results: tuple[str, ...] | None = None, *,
         x: str | None = None, facet: str | None = None) -> Path:
    """Draw each result of a sweep (``results``, the y axes) against one swept key (``x``), one panel per value
    of ``facet`` and one line per combination of the other keys; see
    :func:`waitlab.experiments.report.sweep_plots.sweep_figure` for the defaults."""
    target = Path(out) if out else Path(sweep_folder) / "sweep.png"
    check_picture_path(target, "-o")
    sweep_plot_axes(Path(sweep_folder), results, x=x, facet=facet)  # not a sweep folder: refused before any write
    with guarded_output(target, "picture folder", file=True):
        return plot_sweep_folder(Path(sweep_folder), Path(out) if out else None, results, x=x, facet=facet)


def plot_axes(sweep_folder: str | Path, results: tuple[str, ...] | None = None, *, x: str | None = None,
              facet: str | None = None) -> dict[str, Any]:
    """What :func:`plot` draws with the same arguments: ``{"results": [...], "x": key, "facet": key or None}``."""
    return sweep_plot_axes(Path(sweep_folder), results, x=x, facet=facet)


def write_report(diag: Diagnosis, out: str | Path, png: bool = True) -> list[Path]:
    """Write a diagnosis report (``diagnosis.json``, ``diagnosis.md``, figures) into ``out``; return the files.

    A folder that cannot be written is refused with the real cause; a failed write leaves no partial files.
    """
    if not isinstance(diag, Diagnosis):
        raise InputError("(python call)", "diag", f"must be a Diagnosis (what waitlab.diagnose returns), got "
                         f"{type(diag).__name__}", "diag = waitlab.diagnose(...); waitlab.write_report(diag, out)")
    check_bool("png", png)
    target = path_argument(out, "out", "report folder")
    with guarded_output(target, "report folder"):
        return _write_report(diag, target, png=png)


def compare_png(cmp: Comparison, path: str | Path) -> Path:
    """Draw a comparison (:func:`compare`) into ``path`` (``.png``, ``.svg`` or ``.pdf``); another suffix, or a
    folder, is refused naming the argument ``path``."""
    target = path_argument(path, "path", "picture file")
    try:
        check_picture_path(target, "path")
    except InputError as exc:  # said of the Python argument, not of a flag
        raise InputError("(python call)", "path", exc.problem, exc.fix) from None
    with guarded_output(target, "picture folder", file=True):
        return _compare_png(cmp, target)


@dataclass(frozen=True)
class Evaluation:
    """What ``waitlab evaluate`` produced: one row per (case, model), failures, what was simulated, the files.

    ``notes`` holds one line per model failure (as the leaderboard lists them) and, after them, one line per Python
    function whose scores are not cached, and why (:func:`~waitlab.experiments.diagnosis.evaluate.cache_notes`: a
    function of a notebook cell, or one reading a value that cannot be pickled, is run and scored again every time).
    """

    rows: pd.DataFrame
    notes: list[str]
    counts: dict[str, int]
    files: list[Path]


def evaluate(suite: str | Path | None = None, out: str | Path | None = None, *, models: tuple[Any, ...] = (),
             only: tuple[str, ...] = (), executor: str = "local", workers: int | None = 2,
             scheduler: str | None = None, cache_dir: str | Path | None = None, use_cache: bool = True,
             progress: bool = False, png: bool = True, model_timeout: float = DEFAULT_TIMEOUT,
             scalasca: bool = False) -> Evaluation:
    """Score every model (built-in, plug-ins, ``models``; Scalasca's two with ``scalasca``) on every case of a
    suite (default: the built-in one) and write the leaderboard into ``out`` (default ``results/leaderboard``).
    See :func:`waitlab.experiments.diagnosis.evaluate.evaluate`.

    ``out`` is refused up front (:func:`~waitlab.experiments.run_folder.check_output_folder`) when it is the root,
    home or current folder, the suite's or the cache's folder, holds files waitlab did not write, or is another kind
    of waitlab folder (a run's, whose record the leaderboard's would replace)."""
    check_options(model_timeout=model_timeout)  # the arguments first, then the suite, then the output folder
    check_model_list(models)
    only = check_only(only)
    for name, value in (("use_cache", use_cache), ("png", png), ("scalasca", scalasca)):
        check_bool(name, value)
    suite_dir = suite_index(suite).parent  # a suite that does not exist is named before the output folder
    target = Path(out) if out is not None else RESULTS_ROOT / "leaderboard"
    inputs = (suite_dir, Path(cache_dir) if cache_dir is not None else default_cache_dir().parent)
    check_output_folder(target, "leaderboard folder", inputs=inputs, own=LEADERBOARD_FILES, kind="leaderboard")
    with open_executor(executor, workers, scheduler, source="evaluate") as ex:
        rows, notes, counts = _evaluate(suite, models=models, only=only, executor=ex,
                                        cache_dir=Path(cache_dir) if cache_dir is not None else None,
                                        use_cache=use_cache, progress=progress, model_timeout=model_timeout,
                                        scalasca=scalasca)
    check_output_folder(target, "leaderboard folder", inputs=inputs, own=LEADERBOARD_FILES, kind="leaderboard")
    with guarded_output(target, "leaderboard folder"):
        files = write_leaderboard(rows, target, notes, png=png)
        seal(target, "leaderboard", sums_of=())
    return Evaluation(rows, notes + (cache_notes(models, model_timeout) if use_cache else []), counts, files)


def with_models(sw: Sweep, models: tuple[str, ...] | list[str]) -> Sweep:
    """The sweep with more diagnosis models scored at every point (``[sweep] diagnose`` plus ``models``)."""
    resolve_all(list(models))  # an unknown model is refused before any point runs
    return replace(sw, diagnose=tuple(dict.fromkeys([*sw.diagnose, *models])))


def report(run_folder: str | Path | LoadedRun, diagnosis: str | Path | dict[str, Any] | None = None, *,
           trust_edited: bool = False) -> Path:
    """(Re)write ``run_folder/report.html``: the offline, interactive report of a results folder.

    ``diagnosis`` is a diagnosis (``diagnosis.json``'s path or its data); by default the folder's own
    ``diagnosis/diagnosis.json`` when ``waitlab diagnose`` wrote one.  It must be the diagnosis of this run
    (scenario hash, ranks and event table), and a file must match its folder's integrity record unless
    ``trust_edited`` (as must the results folder; a run already read back is used as it is).  Returns the
    page's path.
    """
    return rebuild_report(run_folder, diagnosis, trust_edited)
