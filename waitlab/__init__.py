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

import importlib
from typing import TYPE_CHECKING, Any

from waitlab.errors import EnvironmentProblem, InputError, SimulationError, WaitlabError
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
        capture,
        check_c,
        check_model,
        compare,
        default_output,
        diagnose,
        evaluate,
        export,
        load_events,
        load_run,
        load_scenario,
        load_sweep,
        plot,
        report_text,
        run,
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
    "capture",
    "check_c",
    "check_model",
    "compare",
    "default_output",
    "diagnose",
    "evaluate",
    "export",
    "load_events",
    "load_run",
    "load_scenario",
    "load_sweep",
    "plot",
    "report_text",
    "run",
    "summary_text",
    "sweep",
    "to_markdown",
    "trace_scenario_text",
    "write_report",
]

#: The names of ``__all__`` taken from :mod:`waitlab.api` when first used (the others are imported above).
_FROM_API = frozenset(__all__) - set(globals())


def __getattr__(name: str) -> Any:
    """``waitlab.run`` and the other API names: :mod:`waitlab.api` is imported the first time one is used."""
    if name in _FROM_API:
        value = getattr(importlib.import_module("waitlab.api"), name)
        globals()[name] = value  # once: later uses are plain attribute reads
        return value
    raise AttributeError(f"module 'waitlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM_API})
