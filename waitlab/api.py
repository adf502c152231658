"""The Python API: what the command line does, as functions (the CLI is a thin layer over these).

>>> import waitlab
>>> {"run", "sweep", "diagnose", "load_run"} <= set(waitlab.__all__)
True
"""

from __future__ import annotations

import numbers
import re
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waitlab.errors import InputError
from waitlab.experiments.diagnosis.names import BUILTIN_NAMES, DEFAULT_DIAGNOSE, FlagValue
from waitlab.experiments.estimate import preflight, remember
from waitlab.experiments.executors import open_executor
from waitlab.experiments.run_folder import RESULTS_ROOT, default_output, results_folder
from waitlab.experiments.scenario import Scenario, as_scenario, from_mapping, load_scenario
from waitlab.experiments.stage import prepare
from waitlab.lazy import Deferred, lazy_attributes
from waitlab.platforms import PLATFORM_ALIASES, describe_platform, list_platforms, load_platform, render_platform
from waitlab.readers import check_bool, path_argument
from waitlab.simulator.doctor import doctor
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
        plot_axes,
        report,
        report_dict,
        sweep,
        to_markdown,
        with_models,
        write_report,
    )
    from waitlab.experiments import pipeline as _pipeline
    from waitlab.experiments import results as _results
else:  # the pipeline and the results writer: the writer (and the pipeline's end) imported while SMPI runs
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
    "flag_value",
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
    "plot_axes",
    "recorded_scenario",
    "report",
    "report_dict",
    "report_text",
    "run",
    "scenario_from_dict",
    "signal_name",
    "summary_text",
    "sweep",
    "to_markdown",
    "trace_scenario_text",
    "with_models",
    "write_report",
]


def run(scenario: Scenario | str | Path, out: str | Path | None = None, *, force: bool = False,
        png: bool = False, chrome: bool = False, check_resources: bool = True, say: Any = None,
        smpi_progress: Any = None) -> Run:
    """Simulate a scenario (a :class:`Scenario` or a TOML path); with ``out``, write its results folder
    (``timeline.png`` too when ``png``: drawing it imports matplotlib, about half a second of CPU; ``trace.json``, the
    Chrome/Perfetto trace of the first 200,000 events, when ``chrome``: 0.1 s of CPU and 32 MB at 1,024 ranks x 20
    steps; ``waitlab.export(out, "chrome")`` writes the whole run's later).

    Returns the :class:`~waitlab.experiments.pipeline.Run` (``.result`` has the event table, wait
    states, summary and metadata; ``.perturbation`` the perturbation study of a perturbed scenario).
    A run of 4,096 ranks or more is estimated first (memory, scratch, time: ``say`` receives the line) and
    refused when it will not fit this machine, unless ``check_resources=False``.
    ``smpi_progress`` receives the progress of each SMPI stage at most once per second (a replay's actions, a real
    program's recorded calls: :class:`waitlab.simulator.progress.Progress`, then ``None`` when it ends); it changes no
    result.  The pipeline (with pandas and pyarrow) is imported once the scenario is prepared and estimated, the
    results writer after the SMPI stage, and the pictures' libraries only when a picture is drawn
    (:mod:`waitlab.lazy`).
    """
    if smpi_progress is not None:
        with reporting(smpi_progress):
            return run(scenario, out, force=force, png=png, chrome=chrome, check_resources=check_resources, say=say)
    if not isinstance(force, bool):  # force="no" must not replace a folder
        raise InputError("(python call)", "force", f"must be True or False, got {force!r}", "pass force=True to "
                         "replace a results folder of waitlab's, else leave it out")
    check_bool("png", png)  # png="no" would draw
    check_bool("chrome", chrome)
    check_bool("check_resources", check_resources)
    folder = path_argument(out, "out", "results folder") if out is not None else None
    if folder is not None:
        _check_parents(folder)
    if isinstance(scenario, Mapping):  # a dict: build the Scenario first, the one way its errors name its keys
        raise InputError("(python call)", "scenario", "must be a Scenario or the path of a scenario TOML file, got "
                         f"{type(scenario).__name__}", "build it with waitlab.scenario_from_dict(data) and pass that")
    sc = as_scenario(scenario)
    prep = prepare(sc)  # once: the estimate and the run share it
    est = preflight(prep, say=say, check=check_resources)
    if folder is None:
        result = _pipeline.run(sc, prep=prep)
    else:
        with results_folder(folder, force) as partial:
            paje = partial / "smpi.paje" if sc.simulation.paje else None
            result = _pipeline.run(sc, paje_file=paje, prep=prep)
            _results.write_run(result, partial, png=png, chrome=chrome)
    remember(est, prep, result.result.stage_seconds.get("smpi"))  # the estimate learns from this run
    return result


def _check_parents(folder: Path) -> None:
    """Refuse an output folder below a file (``late.toml/sub``), naming the folder given and that file.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".toml") as f:
    ...     try:
    ...         _check_parents(Path(f.name) / "sub")
    ...     except InputError as exc:
    ...         print(exc.field, exc.problem.endswith("is a file, not a folder"))
    (output folder) True
    """
    for parent in folder.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(str(folder), "(output folder)", f"lies inside {parent}, which is a file, not a "
                                 "folder", "choose an output folder whose parents are folders")
            return


def scenario_from_dict(data: Mapping[str, Any]) -> Scenario:
    """A :class:`Scenario` from a dict of the sections and keys a scenario TOML file holds (validated as a file is,
    relative paths from the current folder); run it with :func:`run`.  The same data as a file gives the same
    scenario: its :meth:`~Scenario.hash`, run and results folder are those of the file's.  An error names the key
    (``(python call): scenario.ranks: ...``).

    >>> sc = scenario_from_dict({"scenario": {"name": "tiny", "ranks": 4}, "platform": {"name": "dawning_5000a"},
    ...                          "application": {"kind": "stencil", "steps": 2}})
    >>> sc.name, sc.ranks
    ('tiny', 4)
    """
    if not isinstance(data, Mapping):
        raise InputError("(python call)", "data", f"must be a dict of scenario sections, got {type(data).__name__}",
                         'e.g. {"scenario": {"ranks": 16}, "platform": {"name": "dawning_5000a"}, "application": '
                         '{"kind": "stencil"}}')
    try:
        return from_mapping(data, _DICT)
    except InputError as exc:
        if exc.file != _DICT:
            raise
        raise InputError("(python call)", exc.field, exc.problem, exc.fix) from None


#: The source label of a scenario built from a dict (``<...>``: no file, paths relative to the current folder).
_DICT = "<python dict>"


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
    """A platform model with the source of every figure (or its SimGrid XML for ``xml_ranks`` ranks, >= 1)."""
    if xml_ranks is not None and (isinstance(xml_ranks, bool) or not isinstance(xml_ranks, numbers.Integral)):
        raise InputError("(python call)", "xml_ranks", f"must be a number of ranks >= 1, got {xml_ranks!r}",
                         "e.g. xml_ranks=16")
    xml_ranks = None if xml_ranks is None else int(xml_ranks)  # np.int64(16) too
    if xml_ranks is not None and xml_ranks < 1:
        raise InputError("(command line)", "--xml", f"must be a number of ranks >= 1, got {xml_ranks}",
                         "e.g. --xml 16")
    model = load_platform(name)
    return render_platform(model, xml_ranks).xml if xml_ranks is not None else describe_platform(model, short=short)


def signal_name(exc: BaseException) -> str:
    """``SIGINT`` or ``SIGTERM``: the signal behind an interruption (``SIGINT`` for a plain Ctrl-C)."""
    return signal.Signals(int(getattr(exc, "signum", signal.SIGINT))).name


#: Models ``waitlab diagnose`` runs without ``--model`` (CWP-DM and H-CWP-DM, both pairings).
DEFAULT_MODELS: tuple[str, ...] = DEFAULT_DIAGNOSE


def diagnosis_models() -> dict[str, str]:
    """The built-in diagnosis models: key -> display name."""
    return dict(BUILTIN_NAMES)


def flag_value(text: str, flag: str) -> str:
    """``text`` as given on the command line with ``flag`` (the ``type=`` of ``--model``): an error about it names the
    flag (``(command line): --model: ...``), where the same text passed from Python names the argument
    (``(python call): models: ...``).  It is the same text otherwise.

    >>> flag_value("mymodels:f", "--model") == "mymodels:f"
    True
    """
    return FlagValue(text, flag)


#: The names of ``__all__`` not defined above are taken on first use from :mod:`waitlab.api_results` (pandas and
#: pyarrow) or :mod:`waitlab.api_studies` (Bokeh, matplotlib, networkx): ``waitlab run`` needs none of them before its
#: SMPI stage.
__getattr__, __dir__, LAZY = lazy_attributes(globals(), "waitlab.api_results", "waitlab.api_studies")
