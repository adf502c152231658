"""The Python API: what the command line does, as functions (the CLI is a thin layer over these).

>>> import waitlab
>>> {"run", "sweep", "diagnose", "load_run"} <= set(waitlab.__all__)
True
"""

from __future__ import annotations

import json
import math
import re
import signal
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.capture import capture as _capture
from waitlab.experiments.capture import trace_scenario_text
from waitlab.experiments.compare import Comparison, compare_runs
from waitlab.experiments.compare import compare_png as _compare_png
from waitlab.experiments.diagnosis.check import check_model
from waitlab.experiments.diagnosis.diagnose import Diagnosis, diagnose_path
from waitlab.experiments.diagnosis.evaluate import evaluate as _evaluate
from waitlab.experiments.diagnosis.groundtruth import cache_use
from waitlab.experiments.diagnosis.leaderboard import write_leaderboard
from waitlab.experiments.diagnosis.registry import BUILTIN, DEFAULT_DIAGNOSE, resolve_all
from waitlab.experiments.estimate import preflight, remember
from waitlab.experiments.executors import open_executor
from waitlab.experiments.exports import FORMATS as EXPORT_FORMATS
from waitlab.experiments.exports import export_run
from waitlab.experiments.otf2_convert import import_otf2 as _import_otf2
from waitlab.experiments.pipeline import Run, RunResult, prepare
from waitlab.experiments.pipeline import run as _run
from waitlab.experiments.report.diagnosis_report import report_dict, to_markdown
from waitlab.experiments.report.diagnosis_report import write_report as _write_report
from waitlab.experiments.report.perturbation_report import report_text
from waitlab.experiments.report.rebuild import rebuild_report
from waitlab.experiments.report.sweep_plots import plot_sweep_folder
from waitlab.experiments.reproduce import he_sunway, okita_spilling, rao_alltoall, spill_policies, wu_lared_s
from waitlab.experiments.results import LoadedRun, load_events, load_run, summary_text, write_run
from waitlab.experiments.run_folder import results_folder
from waitlab.experiments.scenario import Scenario, load_scenario
from waitlab.experiments.sweep import Sweep, load_sweep, run_sweep
from waitlab.experiments.writer import check_picture_path, guarded_output
from waitlab.models.perturb.condition_c import ConditionCReport, check_condition_c
from waitlab.platforms import PLATFORM_ALIASES, describe_platform, list_platforms, load_platform, render_platform
from waitlab.platforms.calibration import calibration_table
from waitlab.simulator.doctor import doctor
from waitlab.simulator.progress import reporting

__all__ = [
    "DEFAULT_MODELS",
    "EXPORT_FORMATS",
    "REPRODUCTIONS",
    "Comparison",
    "Diagnosis",
    "Evaluation",
    "LoadedRun",
    "Run",
    "RunResult",
    "Scenario",
    "Sweep",
    "cache_use",
    "calibration_text",
    "capture",
    "check_c",
    "check_model",
    "compare",
    "compare_png",
    "default_output",
    "describe",
    "diagnose",
    "diagnosis_models",
    "doctor",
    "evaluate",
    "export",
    "import_otf2",
    "load_events",
    "load_run",
    "load_scenario",
    "load_sweep",
    "open_executor",
    "platform_aliases",
    "platform_sources",
    "platforms",
    "plot",
    "report",
    "report_dict",
    "report_text",
    "run",
    "signal_name",
    "summary_text",
    "sweep",
    "to_markdown",
    "trace_scenario_text",
    "with_models",
    "write_report",
]

#: Folder default outputs go under (``results/<scenario name>``).
RESULTS_ROOT = Path("results")


def _scenario(scenario: Scenario | str | Path) -> Scenario:
    return scenario if isinstance(scenario, Scenario) else load_scenario(scenario)


def default_output(name: str, suffix: str = "", root: Path = RESULTS_ROOT) -> Path:
    """``results/<name><suffix>``; names are checked plain by the schema, so this never leaves ``root``."""
    out = root / f"{name}{suffix}"
    if out.resolve().parent != root.resolve():
        raise InputError("(command line)", "-o", f"the default output for {name!r} would leave {root}/",
                         "pass -o FOLDER")
    return out


def run(scenario: Scenario | str | Path, out: str | Path | None = None, *, force: bool = False,
        png: bool = True, check_resources: bool = True, say: Any = None, smpi_progress: Any = None) -> Run:
    """Simulate a scenario (a :class:`Scenario` or a TOML path); with ``out``, write its results folder.

    Returns the :class:`~waitlab.experiments.pipeline.Run` (``.result`` has the event table, wait
    states, summary and metadata; ``.perturbation`` the perturbation study of a perturbed scenario).
    A run of 4,096 ranks or more is estimated first (memory, scratch, time: ``say`` receives the line) and
    refused when it will not fit this machine, unless ``check_resources=False``.
    ``smpi_progress`` receives the progress of each SMPI replay at most once per second
    (:class:`waitlab.simulator.progress.Progress`, then ``None`` when it ends); it changes no result.
    """
    if smpi_progress is not None:
        with reporting(smpi_progress):
            return run(scenario, out, force=force, png=png, check_resources=check_resources, say=say)
    sc = _scenario(scenario)
    prep = prepare(sc)  # once: the estimate and the run share it
    est = preflight(prep, say=say, check=check_resources)
    if out is None:
        result = _run(sc, prep=prep)
    else:
        with results_folder(Path(out), force) as partial:
            paje = partial / "smpi.paje" if sc.simulation.paje else None
            result = _run(sc, paje_file=paje, prep=prep, prewrite=True)
            write_run(result, partial, png=png)
    remember(est, prep, result.result.stage_seconds.get("smpi"))  # the estimate learns from this run
    return result


def sweep(sweep_file: str | Path | Sweep, out: str | Path | None = None, *, executor: str | None = None,
          workers: int | None = None, scheduler: str | None = None, progress: Any = None,
          bar: bool = False) -> pd.DataFrame:
    """Run a what-if grid (resumable): one results folder per point and ``OUT/sweep.csv``.

    ``progress`` receives one message per point; ``bar`` shows a progress bar (k/N, ETA) on stderr.
    """
    sw = sweep_file if isinstance(sweep_file, Sweep) else load_sweep(sweep_file)
    target = Path(out) if out is not None else default_output(sw.name)
    kind = executor or ("dask" if scheduler else sw.executor)
    with open_executor(kind, workers or sw.workers, scheduler or sw.scheduler, source=f"sweep {sw.name}") as ex:
        return run_sweep(sw, target, executor=ex, progress=progress, bar=bar)


def diagnose(source: str | Path, *, executor: Executor | None = None, **kwargs: Any) -> Diagnosis:
    """CWP-DM, H-CWP-DM, the counterfactual ground truth and the scores of a results folder or scenario.

    A results folder is read back as it is (only counterfactuals are simulated); see
    :func:`waitlab.experiments.diagnosis.diagnose.diagnose` for the keyword arguments.
    """
    if executor is not None:
        return diagnose_path(Path(source), executor=executor, **kwargs)
    # waitlab's own worker processes: no __main__ guard needed (scripts, stdin, notebooks), Ctrl-C stops them
    with open_executor("local", workers=2) as ex:
        return diagnose_path(Path(source), executor=ex, **kwargs)


def capture(scenario: Scenario | str | Path, out: str | Path, *, via: str = "layer", force: bool = False,
            check: bool = True) -> Path:
    """Record a program scenario once as a TI trace (replayed at once and compared with the live run unless
    ``check=False``); returns the index file."""
    return _capture(_scenario(scenario), Path(out), via=via, force=force, check=check)


def check_c(events: str | Path, *, atol: float = 1e-9,
            kinds: tuple[str, ...] = ("overhead", "swap", "flush", "delay")) -> ConditionCReport:
    """Check condition C (Okita et al., formula 3) on an event table or results folder.

    ``atol`` (seconds) must be finite and >= 0: a negative one would call equal sums different, NaN would call
    every pair equal.
    """
    if not math.isfinite(atol) or atol < 0:
        raise InputError("(command line)", "--atol", f"must be a finite number >= 0 (seconds), got {atol}",
                         "e.g. --atol 1e-9")
    return check_condition_c(load_events(Path(events)), atol=atol, kinds=kinds)


def platforms() -> list[str]:
    """Names of the built-in platform models."""
    return list_platforms()


def platform_sources(name: str) -> dict[str, Any]:
    """One platform's summary line, the works its figures come from, and how many figures are sourced or assumed.

    >>> d = platform_sources("dawning_5000a")
    >>> d["sources"][0], d["sourced"] > 0
    ('Rao et al.', True)
    """
    model = load_platform(name)
    works: list[str] = []
    for f in model.figures:
        if not f.assumed:
            work = re.split(r"\s§|:|,|;|\s\(|\stable\s", f.source, maxsplit=1)[0].strip()[:60]
            if work and work not in works:
                works.append(work)
    assumed = sum(1 for f in model.figures if f.assumed)
    return {"name": model.name, "summary": describe_platform(model, short=True), "sources": works,
            "sourced": len(model.figures) - assumed, "assumed": assumed}


def platform_aliases() -> dict[str, str]:
    """Deprecated platform names that still load: alias -> current built-in name."""
    return dict(PLATFORM_ALIASES)


def describe(name: str, short: bool = False, xml_ranks: int | None = None) -> str:
    """A platform model with the source of every figure (or its SimGrid XML for ``xml_ranks`` ranks)."""
    model = load_platform(name)
    return render_platform(model, xml_ranks).xml if xml_ranks else describe_platform(model, short=short)


#: Paper reproductions of ``waitlab reproduce``: target name -> module (``reproduce``, ``write``, ``markdown``).
REPRODUCTIONS = {"wu-lared-s": wu_lared_s, "okita-spilling": okita_spilling, "spill-policies": spill_policies,
                 "rao-alltoall": rao_alltoall, "he-sunway": he_sunway}


def calibrate(platform: str, *, timeout: float = 60.0) -> pd.DataFrame:
    """Every MPI-level figure of a platform against a simulated SMPI pingpong (size, source, simulated, error)."""
    return calibration_table(platform, timeout=timeout)


#: Meaning of each column of ``waitlab calibrate`` (printed under the table).
CALIBRATION_COLUMNS = {
    "path": "inter_node (two nodes) or intra_node (two cores of one node)",
    "size": "message size of the pingpong (bytes)",
    "kind": "latency (one-way time of a small message) or bandwidth (of a large one)",
    "source_s": "one-way time the platform's figure implies (s)",
    "simulated_s": "one-way time of the simulated SMPI pingpong with waitlab's calibration (s)",
    "error": "simulated_s / source_s - 1",
    "default_s": "the same pingpong with SMPI's default factors instead (s), for comparison",
    "default_error": "default_s / source_s - 1",
    "provenance": "sourced (a paper or public figure) or ASSUMED (reason in `waitlab platforms NAME`)",
}


def calibration_text(table: pd.DataFrame) -> str:
    """The calibration table in at most 120 columns, each column explained below it (``--json``: all of it)."""
    if not len(table):
        return "no MPI-level figure to calibrate against"
    rows = [[str(r["path"]), f"{int(r['size']):,}", str(r["kind"]), f"{r['source_s']:.4g}", f"{r['simulated_s']:.4g}",
             f"{100 * r['rel_error']:+.1f}%", f"{r['default_s']:.4g}", f"{100 * r['default_rel_error']:+.1f}%",
             "ASSUMED" if "assum" in str(r["provenance"]).lower() else "sourced"]
            for r in table.to_dict("records")]
    head = list(CALIBRATION_COLUMNS)
    width = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    line = [" ".join(h.ljust(w) if i in (0, 2, 8) else h.rjust(w) for i, (h, w) in enumerate(zip(head, width,
                                                                                                    strict=True)))]
    line += [" ".join(c.ljust(w) if i in (0, 2, 8) else c.rjust(w) for i, (c, w) in enumerate(zip(r, width,
                                                                                                    strict=True)))
             for r in rows]
    line += ["", *(f"  {k}: {v}" for k, v in CALIBRATION_COLUMNS.items()),
             "  (--json prints every column, with the source text of each figure)"]
    return "\n".join(line)


def compare(run_a: str | Path | LoadedRun, run_b: str | Path | LoadedRun) -> Comparison:
    """What changed from run A to run B (two results folders): makespan, waits, ranks and steps that moved.

    ``.text()`` is what ``waitlab compare`` prints, ``.to_dict()`` its ``--json``; draw it with :func:`compare_png`.
    """
    a = run_a if isinstance(run_a, LoadedRun) else load_run(run_a)
    b = run_b if isinstance(run_b, LoadedRun) else load_run(run_b)
    return compare_runs(a, b)


def export(run_folder: str | Path, formats: tuple[str, ...] = ("otf2",),
           out: str | Path | None = None) -> dict[str, Path]:
    """Export a results folder as OTF2, a Chrome/Perfetto trace and/or the wait-propagation graph (GraphML).

    ``formats`` are names of :data:`EXPORT_FORMATS`; returns ``format -> written path``.
    """
    with guarded_output(Path(out) if out is not None else Path(run_folder), "export folder"):
        return export_run(run_folder, formats, out)


def plot(sweep_folder: str | Path, out: str | Path | None = None, results: tuple[str, ...] | None = None) -> Path:
    """Draw each result of a sweep against each swept key, one line per value of the other keys."""
    target = Path(out) if out else Path(sweep_folder) / "sweep.png"
    check_picture_path(target, "-o")
    with guarded_output(target, "picture folder", file=True):
        return plot_sweep_folder(Path(sweep_folder), Path(out) if out else None, results)


def write_report(diag: Diagnosis, out: str | Path, png: bool = True) -> list[Path]:
    """Write a diagnosis report (``diagnosis.json``, ``diagnosis.md``, figures) into ``out``; return the files.

    A folder that cannot be written is refused with the real cause; a failed write leaves no partial files.
    """
    with guarded_output(Path(out), "report folder"):
        return _write_report(diag, Path(out), png=png)


def compare_png(cmp: Comparison, path: str | Path) -> Path:
    """Draw a comparison (:func:`compare`) into ``path`` (``.png``, ``.svg`` or ``.pdf``)."""
    check_picture_path(Path(path))
    with guarded_output(Path(path), "picture folder", file=True):
        return _compare_png(cmp, Path(path))


def signal_name(exc: BaseException) -> str:
    """``SIGINT`` or ``SIGTERM``: the signal behind an interruption (``SIGINT`` for a plain Ctrl-C)."""
    return signal.Signals(int(getattr(exc, "signum", signal.SIGINT))).name


#: Models ``waitlab diagnose`` runs without ``--model`` (CWP-DM and H-CWP-DM, both pairings).
DEFAULT_MODELS: tuple[str, ...] = DEFAULT_DIAGNOSE


def diagnosis_models() -> dict[str, str]:
    """The built-in diagnosis models: key -> display name."""
    return {k: s.name for k, s in BUILTIN.items()}


@dataclass(frozen=True)
class Evaluation:
    """What ``waitlab evaluate`` produced: one row per (case, model), failures, what was simulated, the files."""

    rows: pd.DataFrame
    notes: list[str]
    counts: dict[str, int]
    files: list[Path]


def evaluate(suite: str | Path | None = None, out: str | Path | None = None, *, models: tuple[Any, ...] = (),
             only: tuple[str, ...] = (), executor: str = "local", workers: int | None = 2,
             scheduler: str | None = None, cache_dir: str | Path | None = None, use_cache: bool = True,
             progress: bool = False, png: bool = True) -> Evaluation:
    """Score every model (built-in, plug-ins, ``models``) on every case of a suite (default: the built-in one)
    and write the leaderboard into ``out`` (default ``results/leaderboard``).  See
    :func:`waitlab.experiments.diagnosis.evaluate.evaluate`."""
    target = Path(out) if out is not None else RESULTS_ROOT / "leaderboard"
    with open_executor(executor, workers, scheduler, source="evaluate") as ex:
        rows, notes, counts = _evaluate(suite, models=models, only=only, executor=ex,
                                        cache_dir=Path(cache_dir) if cache_dir is not None else None,
                                        use_cache=use_cache, progress=progress)
    with guarded_output(target, "leaderboard folder"):
        files = write_leaderboard(rows, target, notes, png=png)
    return Evaluation(rows, notes, counts, files)


def with_models(sw: Sweep, models: tuple[str, ...] | list[str]) -> Sweep:
    """The sweep with more diagnosis models scored at every point (``[sweep] diagnose`` plus ``models``)."""
    resolve_all(list(models))  # an unknown model is refused before any point runs
    return replace(sw, diagnose=tuple(dict.fromkeys([*sw.diagnose, *models])))


def report(run_folder: str | Path, diagnosis: str | Path | dict[str, Any] | None = None) -> Path:
    """(Re)write ``run_folder/report.html``: the offline, interactive report of a results folder.

    ``diagnosis`` is a diagnosis (``diagnosis.json``'s path or its data); by default the folder's own
    ``diagnosis/diagnosis.json`` when ``waitlab diagnose`` wrote one.  Returns the page's path.
    """
    if isinstance(diagnosis, str | Path):
        path = Path(diagnosis)
        try:
            diagnosis = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(str(path), "(file)", f"cannot be read as a diagnosis: {exc}",
                             "pass the diagnosis.json written by `waitlab diagnose`") from None
    return rebuild_report(run_folder, diagnosis if isinstance(diagnosis, dict) else None)


def import_otf2(archive: str | Path, out: str | Path, *, platform: str = "dawning_5000a", cpu_ratio: float = 1.0,
                force: bool = False) -> tuple[Path, str]:
    """Convert an OTF2 archive (Score-P's ``traces.otf2``) once into a TI trace folder (``kind = "trace"``);
    returns its index and a scenario TOML that replays it (:mod:`waitlab.experiments.otf2_convert`)."""
    return _import_otf2(archive, out, platform=platform, cpu_ratio=cpu_ratio, force=force)
