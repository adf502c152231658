"""waitlab: wait propagation in bulk-synchronous MPI programs, simulated with SimGrid SMPI.

The public API (:mod:`waitlab.api`) is re-exported here: ``waitlab.run``, ``waitlab.sweep``,
``waitlab.diagnose``, ``waitlab.load_run``, ...
"""

from waitlab.api import (
    Diagnosis,
    LoadedRun,
    Run,
    RunResult,
    Scenario,
    Sweep,
    capture,
    check_c,
    default_output,
    diagnose,
    load_events,
    load_run,
    load_scenario,
    load_sweep,
    report_text,
    run,
    summary_text,
    sweep,
    to_markdown,
    trace_scenario_text,
    write_report,
)
from waitlab.errors import EnvironmentProblem, InputError, SimulationError, WaitlabError
from waitlab.version import __version__

__all__ = [
    "Diagnosis", "EnvironmentProblem", "InputError", "LoadedRun", "Run", "RunResult", "Scenario", "SimulationError",
    "Sweep", "WaitlabError", "__version__", "capture", "check_c", "default_output", "diagnose", "load_events",
    "load_run", "load_scenario", "load_sweep", "report_text", "run", "summary_text", "sweep", "to_markdown",
    "trace_scenario_text", "write_report",
]
