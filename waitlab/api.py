"""The Python API: what the command line does, as functions (the CLI is a thin layer over these).

>>> import waitlab
>>> {"run", "sweep", "diagnose", "load_run"} <= set(waitlab.__all__)
True
"""

from __future__ import annotations

import math
import re
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.capture import capture as _capture
from waitlab.experiments.capture import trace_scenario_text
from waitlab.experiments.diagnosis.groundtruth import cache_use
from waitlab.experiments.diagnosis.names import BUILTIN_NAMES, DEFAULT_DIAGNOSE
from waitlab.experiments.estimate import preflight, remember
from waitlab.experiments.executors import open_executor
from waitlab.experiments.otf2_convert import import_otf2 as _import_otf2
from waitlab.experiments.pipeline import Run, RunResult, prepare
from waitlab.experiments.pipeline import run as _run
from waitlab.experiments.preload import preloading
from waitlab.experiments.report.perturbation_report import report_text
from waitlab.experiments.results import LoadedRun, load_events, load_run, picture_modules, summary_text, write_run
from waitlab.experiments.run_folder import RESULTS_ROOT, default_output, results_folder
from waitlab.experiments.scenario import Scenario, load_scenario
from waitlab.lazy import lazy_attributes
from waitlab.models.perturb.condition_c import ConditionCReport, check_condition_c
from waitlab.platforms import PLATFORM_ALIASES, describe_platform, list_platforms, load_platform, render_platform
from waitlab.platforms.calibration import calibration_table
from waitlab.simulator.doctor import doctor
from waitlab.simulator.progress import reporting

if TYPE_CHECKING:  # what __getattr__ returns, for type checkers and IDEs
    from waitlab.api_studies import (
        EXPORT_FORMATS,
        REPRODUCTIONS,
        Comparison,
        Diagnosis,
        Evaluation,
        Sweep,
        check_model,
        compare,
        compare_png,
        diagnose,
        evaluate,
        export,
        load_sweep,
        plot,
        report,
        report_dict,
        sweep,
        to_markdown,
        with_models,
        write_report,
    )

__all__ = [
    "DEFAULT_MODELS",
    "EXPORT_FORMATS",
    "REPRODUCTIONS",
    "RESULTS_ROOT",
    "Comparison",
    "Diagnosis",
    "Evaluation",
    "LoadedRun",
    "Run",
    "RunResult",
    "Scenario",
    "Sweep",
    "cache_use",
    "calibrate",
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


def _scenario(scenario: Scenario | str | Path) -> Scenario:
    return scenario if isinstance(scenario, Scenario) else load_scenario(scenario)


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
            with preloading(picture_modules(png)):  # imported while SMPI runs, for write_run
                result = _run(sc, paje_file=paje, prep=prep, prewrite=True)
            write_run(result, partial, png=png)
    remember(est, prep, result.result.stage_seconds.get("smpi"))  # the estimate learns from this run
    return result


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


def signal_name(exc: BaseException) -> str:
    """``SIGINT`` or ``SIGTERM``: the signal behind an interruption (``SIGINT`` for a plain Ctrl-C)."""
    return signal.Signals(int(getattr(exc, "signum", signal.SIGINT))).name


#: Models ``waitlab diagnose`` runs without ``--model`` (CWP-DM and H-CWP-DM, both pairings).
DEFAULT_MODELS: tuple[str, ...] = DEFAULT_DIAGNOSE


def diagnosis_models() -> dict[str, str]:
    """The built-in diagnosis models: key -> display name."""
    return dict(BUILTIN_NAMES)


def import_otf2(archive: str | Path, out: str | Path, *, platform: str = "dawning_5000a", cpu_ratio: float = 1.0,
                force: bool = False) -> tuple[Path, str]:
    """Convert an OTF2 archive (Score-P's ``traces.otf2``) once into a TI trace folder (``kind = "trace"``);
    returns its index and a scenario TOML that replays it (:mod:`waitlab.experiments.otf2_convert`)."""
    return _import_otf2(archive, out, platform=platform, cpu_ratio=cpu_ratio, force=force)


#: The names of ``__all__`` not defined above are taken from :mod:`waitlab.api_studies` on first use (its rooms import
#: Bokeh, matplotlib and networkx, which ``waitlab run`` does not need before its SMPI stage).
__getattr__, __dir__, STUDIES = lazy_attributes(globals(), "waitlab.api_studies")
