"""The Python API: what the command line does, as functions (the CLI is a thin layer over these).

>>> import waitlab
>>> {"run", "sweep", "diagnose", "load_run"} <= set(waitlab.__all__)
True
"""

from __future__ import annotations

import re
import signal
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waitlab.experiments.diagnosis.names import BUILTIN_NAMES, DEFAULT_DIAGNOSE
from waitlab.experiments.estimate import preflight, remember
from waitlab.experiments.executors import open_executor
from waitlab.experiments.preload import preloading
from waitlab.experiments.run_folder import RESULTS_ROOT, default_output, picture_modules, results_folder
from waitlab.experiments.scenario import Scenario, as_scenario, load_scenario
from waitlab.experiments.stage import Prepared, execute, prepare
from waitlab.lazy import Deferred, lazy_attributes
from waitlab.platforms import PLATFORM_ALIASES, describe_platform, list_platforms, load_platform, render_platform
from waitlab.simulator.doctor import doctor
from waitlab.simulator.heap import reserving
from waitlab.simulator.progress import reporting

if TYPE_CHECKING:  # what __getattr__ and the deferred modules return, for type checkers and IDEs
    from waitlab.api_results import (
        CALIBRATION_COLUMNS,
        LoadedRun,
        Run,
        RunResult,
        cache_use,
        calibrate,
        calibration_text,
        capture,
        check_c,
        import_otf2,
        integrity,
        load_events,
        load_run,
        recorded_scenario,
        report_text,
        summary_text,
        trace_scenario_text,
    )
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
    from waitlab.experiments import pipeline as _pipeline
    from waitlab.experiments import results as _results
else:  # the pipeline's end and the results writer: imported while the first SMPI stage runs
    _pipeline = Deferred("waitlab.experiments.pipeline")
    _results = Deferred("waitlab.experiments.results")

__all__ = [
    "CALIBRATION_COLUMNS",
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
    "integrity",
    "load_events",
    "load_run",
    "load_scenario",
    "load_sweep",
    "open_executor",
    "platform_aliases",
    "platform_sources",
    "platforms",
    "plot",
    "recorded_scenario",
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


#: What :func:`run` imports after its first SMPI stage (the pipeline's end and the results folder's writer, with
#: pandas, pyarrow and the analysis models), and the API's tools over runs that its caller reaches next
#: (``summary_text``, ``load_run``: :mod:`waitlab.api_results`, 0.03 s after the stage otherwise): imported on a
#: thread while that stage runs (:mod:`waitlab.experiments.preload`), with the pictures' writers when a folder is
#: written.
AFTER_STAGE = (_pipeline.__name__, _results.__name__, "waitlab.api_results")


def run(scenario: Scenario | str | Path, out: str | Path | None = None, *, force: bool = False,
        png: bool = True, check_resources: bool = True, say: Any = None, smpi_progress: Any = None,
        ready_memory: bool = False) -> Run:
    """Simulate a scenario (a :class:`Scenario` or a TOML path); with ``out``, write its results folder.

    Returns the :class:`~waitlab.experiments.pipeline.Run` (``.result`` has the event table, wait
    states, summary and metadata; ``.perturbation`` the perturbation study of a perturbed scenario).
    A run of 4,096 ranks or more is estimated first (memory, scratch, time: ``say`` receives the line) and
    refused when it will not fit this machine, unless ``check_resources=False``.
    ``smpi_progress`` receives the progress of each SMPI stage at most once per second (a replay's actions, a real
    program's recorded calls: :class:`waitlab.simulator.progress.Progress`, then ``None`` when it ends); it changes no
    result.
    ``ready_memory``: a real program's after-stage memory is touched while SMPI runs
    (:func:`waitlab.simulator.heap.reserving`: faster in a fresh process, where that memory is new; the peak memory
    is higher by up to :data:`~waitlab.simulator.heap.BYTES_PER_RECORD` bytes per record, and more in a process that
    still holds earlier runs; glibc then keeps one arena for the rest of the process, so that the threads writing the
    results use that memory).  ``waitlab run`` sets it; it changes no result.
    """
    if smpi_progress is not None:
        with reporting(smpi_progress):
            return run(scenario, out, force=force, png=png, check_resources=check_resources, say=say,
                       ready_memory=ready_memory)
    sc = as_scenario(scenario)
    prep = prepare(sc)  # once: the estimate and the run share it
    est = preflight(prep, say=say, check=check_resources)
    with reserving() if ready_memory else nullcontext():  # the after-stage memory, made ready during the stage
        if out is None:
            result = _simulate(prep, None, pictures=[], prewrite=False)
        else:
            with results_folder(Path(out), force) as partial:
                paje = partial / "smpi.paje" if sc.simulation.paje else None
                result = _simulate(prep, paje, pictures=picture_modules(png), prewrite=True, report=True)
                _results.write_run(result, partial, png=png)
    remember(est, prep, result.result.stage_seconds.get("smpi"))  # the estimate learns from this run
    return result


def _simulate(prep: Prepared, paje: Path | None, *, pictures: list[str], prewrite: bool, report: bool = False
              ) -> Run:
    """:func:`waitlab.experiments.pipeline.run` of a prepared scenario, its first SMPI stage run from here: the
    pipeline's end (:data:`AFTER_STAGE`) and ``pictures`` are imported while that stage runs, and with ``report``
    what ``report.html`` can have before the run's data exists is made then too."""
    with preloading([*AFTER_STAGE, *pictures], then=partial(_prepare_report, prep.scenario) if report else None):
        first = execute(prep, paje_file=paje if prep.perturbation is None else None)  # measured runs get the Paje
    return _pipeline.run(prep.scenario, paje_file=paje, prep=prep, first=first, prewrite=prewrite)


def _prepare_report(scenario: Scenario) -> None:
    """:func:`waitlab.experiments.results.prepare_report`, looked up on the preload thread once :data:`AFTER_STAGE` is
    in (a ``partial`` of it, made before the stage, would import the results writer there)."""
    _results.prepare_report(scenario)


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


def signal_name(exc: BaseException) -> str:
    """``SIGINT`` or ``SIGTERM``: the signal behind an interruption (``SIGINT`` for a plain Ctrl-C)."""
    return signal.Signals(int(getattr(exc, "signum", signal.SIGINT))).name


#: Models ``waitlab diagnose`` runs without ``--model`` (CWP-DM and H-CWP-DM, both pairings).
DEFAULT_MODELS: tuple[str, ...] = DEFAULT_DIAGNOSE


def diagnosis_models() -> dict[str, str]:
    """The built-in diagnosis models: key -> display name."""
    return dict(BUILTIN_NAMES)


#: The names of ``__all__`` not defined above are taken on first use from :mod:`waitlab.api_results` (pandas and
#: pyarrow) or :mod:`waitlab.api_studies` (Bokeh, matplotlib, networkx): ``waitlab run`` needs none of them before its
#: SMPI stage.
__getattr__, __dir__, LAZY = lazy_attributes(globals(), "waitlab.api_results", "waitlab.api_studies")
