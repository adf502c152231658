"""waitlab: wait propagation in bulk-synchronous MPI programs, simulated with SimGrid SMPI.

The public API (:mod:`waitlab.api`) is re-exported here: ``waitlab.run``, ``waitlab.sweep``,
``waitlab.diagnose``, ``waitlab.load_run``, ...  It is imported on first use of one of these names
(PEP 562), so ``import waitlab.platforms`` or the command line's way to its SMPI stage do not pay for
the whole API (Bokeh, matplotlib and networkx alone take 1.5-2 s to import: docs/performance.md).

>>> import waitlab
>>> callable(waitlab.run) and "run" in dir(waitlab)
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from waitlab.errors import EnvironmentProblem, InputError, SimulationError, WaitlabError
from waitlab.lazy import lazy_attributes
from waitlab.version import __version__

if TYPE_CHECKING:  # what __getattr__ returns, for type checkers and IDEs
    from waitlab.api import (
        Diagnosis,
        Evaluation,
        LoadedRun,
        Run,
        RunResult,
        Scenario,
        Sweep,
        calibrate,
        capture,
        check_c,
        check_model,
        compare,
        default_output,
        diagnose,
        doctor,
        evaluate,
        export,
        import_otf2,
        load_events,
        load_run,
        load_scenario,
        load_sweep,
        plot,
        recorded_scenario,
        report,
        report_text,
        run,
        scenario_from_dict,
        summary_text,
        sweep,
        to_markdown,
        trace_scenario_text,
        write_report,
    )

__all__ = [
    "Diagnosis",
    "EnvironmentProblem",
    "Evaluation",
    "InputError",
    "LoadedRun",
    "Run",
    "RunResult",
    "Scenario",
    "SimulationError",
    "Sweep",
    "WaitlabError",
    "__version__",
    "calibrate",
    "capture",
    "check_c",
    "check_model",
    "compare",
    "default_output",
    "diagnose",
    "doctor",
    "evaluate",
    "export",
    "import_otf2",
    "load_events",
    "load_run",
    "load_scenario",
    "load_sweep",
    "plot",
    "recorded_scenario",
    "report",
    "report_text",
    "run",
    "scenario_from_dict",
    "summary_text",
    "sweep",
    "to_markdown",
    "trace_scenario_text",
    "write_report",
]

#: The names of ``__all__`` not imported above are taken from :mod:`waitlab.api` when first used.
__getattr__, __dir__, _FROM_API = lazy_attributes(globals(), "waitlab.api")
