"""The API's tools over runs and traces: results folders, capture, condition C, calibration, OTF2 import.

Reached through :mod:`waitlab.api` (``waitlab.api.load_run``, ``waitlab.check_c``), which imports this module on the
first use of one of its names: these tools need pandas and pyarrow (0.5-0.8 s of imports), which ``waitlab run``
imports while its SMPI stage goes on (docs/performance.md).
"""

from __future__ import annotations

import math
import numbers
import textwrap
from pathlib import Path

import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.capture import CAPTURE_VIA, trace_scenario_text
from waitlab.experiments.capture import capture as _capture
from waitlab.experiments.diagnosis.groundtruth import cache_use
from waitlab.experiments.otf2_convert import import_otf2 as _import_otf2
from waitlab.experiments.pipeline import Run, RunResult
from waitlab.experiments.recorded import recorded_scenario as _recorded_scenario
from waitlab.experiments.report.perturbation_report import report_text
from waitlab.experiments.results import (
    LoadedRun,
    folder_detours,
    is_unperturbed_run,
    load_events,
    load_run,
    summary_text,
    verify_unperturbed,
)
from waitlab.experiments.run_folder import verify_folder
from waitlab.experiments.scenario import Scenario, as_scenario
from waitlab.models.perturb.condition_c import ConditionCReport, check_condition_c, kinds_problem
from waitlab.platforms.calibration import calibration_table
from waitlab.readers import check_bool, path_argument

__all__ = [
    "CALIBRATION_COLUMNS",
    "LoadedRun",
    "Run",
    "RunResult",
    "cache_use",
    "calibrate",
    "calibration_text",
    "capture",
    "check_c",
    "import_otf2",
    "integrity",
    "load_events",
    "load_run",
    "recorded_scenario",
    "report_text",
    "summary_text",
    "trace_scenario_text",
]


def capture(scenario: Scenario | str | Path, out: str | Path, *, via: str = "layer", force: bool = False,
            check: bool = True) -> Path:
    """Record a program scenario once as a TI trace (replayed at once and compared with the live run unless
    ``check=False``); returns the index file."""
    check_bool("force", force)  # force="no" must not replace a trace folder
    check_bool("check", check)
    if via not in CAPTURE_VIA:  # (the command line offers only these)
        raise InputError("(python call)", "via", f"must be one of {', '.join(map(repr, CAPTURE_VIA))}, got {via!r}",
                         "e.g. via='layer'")
    return _capture(as_scenario(scenario), path_argument(out, "out", "trace folder"), via=via, force=force,
                    check=check)


def integrity(folder: str | Path) -> str:
    """Why a results folder is not the one its run wrote (its integrity record ``.waitlab`` is missing or
    damaged, or a file changed since), or ``""`` when it is intact."""
    if is_unperturbed_run(Path(folder)):  # RUN/unperturbed: checked with RUN (whose scenario it shares)
        return verify_unperturbed(Path(folder), trust_edited=True)
    return verify_folder(Path(folder), trust_edited=True)


def check_c(events: str | Path, *, atol: float = 1e-9,
            kinds: tuple[str, ...] = ("overhead", "swap", "flush", "delay"),
            trust_edited: bool = False) -> ConditionCReport:
    """Check condition C (Okita et al., formula 3) on an event table or results folder.

    ``atol`` (seconds) must be finite and >= 0: a negative one would call equal sums different, NaN would call
    every pair equal.  A results folder is checked against its integrity record unless ``trust_edited``; the OS-noise
    detours its run recorded (``noise_detours.parquet``) are noise, not tracer overhead, as in the run's own check
    (``perturbation.txt``).  An event table alone does not say where noise landed: a detour inside a tracer row
    counts as overhead.
    """
    check_bool("trust_edited", trust_edited)
    if isinstance(atol, bool) or not isinstance(atol, numbers.Real):  # (the command line gives a float)
        raise InputError("(python call)", "atol", f"must be a number of seconds, got {atol!r}", "e.g. atol=1e-9")
    if isinstance(kinds, str) or not isinstance(kinds, tuple | list) or not all(isinstance(k, str) for k in kinds):
        raise InputError("(python call)", "kinds", f"must be a tuple of event kinds, got {kinds!r}",
                         "e.g. kinds=('overhead', 'swap', 'flush', 'delay')")
    events = path_argument(events, "events", "event table or results folder")
    if not math.isfinite(atol) or atol < 0:
        raise InputError("(command line)", "--atol", f"must be a finite number >= 0 (seconds), got {atol}",
                         "e.g. --atol 1e-9")
    if kinds_problem(tuple(kinds)):
        raise InputError("(command line)", "--kinds", kinds_problem(tuple(kinds)),
                         "e.g. --kinds overhead,swap,flush,delay (all the tracer's time)")
    ev = load_events(events, trust_edited)
    noise = folder_detours(events, ev) if events.is_dir() else None
    return check_condition_c(ev, atol=atol, kinds=tuple(kinds), noise=noise)


def calibrate(platform: str, *, timeout: float = 60.0) -> pd.DataFrame:
    """Every MPI-level figure of a platform against a simulated SMPI pingpong (size, source, simulated, error,
    role): a check of the fit, since SMPI's factors are fitted to these figures (role ``fit target``), not a
    validation; ``attrs["held_out"]`` holds the platform's sourced figures the fit did not use, simulated the same
    way (:data:`waitlab.platforms.calibration.HELD_OUT`).  ``timeout`` (seconds per pingpong) must be > 0."""
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not math.isfinite(timeout) \
            or timeout <= 0:
        raise InputError("(python call)", "timeout", f"must be a positive number of seconds, got {timeout!r}",
                         "e.g. timeout=60")
    if not isinstance(platform, str | Path):
        raise InputError("(python call)", "platform", f"must be a platform name or file, got "
                         f"{type(platform).__name__}", "e.g. platform='dawning_5000a' (waitlab.platforms())")
    return calibration_table(str(platform), timeout=timeout)


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
    "role": "fit target (SMPI's factors fitted to it) or model input (link rendered from it): checks the fit only",
}

#: First line of ``waitlab calibrate``: what its rows are.
CALIBRATION_TITLE = ("fit check, not a validation: every row is a figure the SMPI factors were fitted to (role "
                     "\"fit target\")")
#: First line of ``waitlab calibrate`` on a platform with ``[mpi] smpi_factors = false`` (no factor fitted).
INPUT_TITLE = ("fit check, not a validation: every row is a figure the platform's links were rendered from (role "
               "\"model input\"; smpi_factors = false, no factor fitted)")


def _columns(head: list[str], rows: list[list[str]], left: tuple[int, ...]) -> list[str]:
    """``head`` and ``rows`` as aligned text columns (the ``left`` ones left-justified)."""
    width = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    return [" ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, width, strict=True)))
            for r in [head, *rows]]


def calibration_text(table: pd.DataFrame) -> str:
    """The calibration table in at most 120 columns, each column explained below it (``--json``: all of it).

    The first line says that the rows are fit targets; the platform's sourced figures the fit did not use
    (``table.attrs["held_out"]``, :data:`waitlab.platforms.calibration.HELD_OUT`) follow as held-out checks, or a
    line says there are none."""
    if not len(table):
        return "no MPI-level figure to calibrate against"
    rows = [[str(r["path"]), f"{int(r['size']):,}", str(r["kind"]), f"{r['source_s']:.4g}", f"{r['simulated_s']:.4g}",
             f"{100 * r['rel_error']:+.1f}%", f"{r['default_s']:.4g}", f"{100 * r['default_rel_error']:+.1f}%",
             "ASSUMED" if "assum" in str(r["provenance"]).lower() else "sourced", str(r.get("role", "fit target"))]
            for r in table.to_dict("records")]
    title = CALIBRATION_TITLE if any(r[-1] == "fit target" for r in rows) else INPUT_TITLE
    line = [title, *_columns(list(CALIBRATION_COLUMNS), rows, (0, 2, 8, 9))]
    line += ["", *(f"  {k}: {v}" for k, v in CALIBRATION_COLUMNS.items()),
             "  (--json prints every column, with the source text of each figure)",
             *(f"note: {n}" for n in table.attrs.get("not_measured", ()))]
    held = list(table.attrs.get("held_out", ()))
    if held:
        line += ["", "held-out checks (role \"held-out check\"): sourced figures of this machine the fit did not use,",
                 "the same calibrated pingpong:",
                 *_columns(["path", "size", "kind", "source_s", "simulated_s", "error", "figure"],
                           [[str(h["path"]), f"{int(h['size']):,}", str(h["kind"]), f"{h['source_s']:.4g}",
                             f"{h['simulated_s']:.4g}", f"{100 * h['rel_error']:+.1f}%", str(h["label"])]
                            for h in held], (0, 2, 6)),
                 *textwrap.wrap(f"sources: {'; '.join(dict.fromkeys(str(h['provenance']) for h in held))}", 118,
                                initial_indent="  ", subsequent_indent="  ")]
    else:
        line += ["no held-out check: the platform has no sourced MPI-level figure outside the fit"]
    return "\n".join(line)


def import_otf2(archive: str | Path, out: str | Path, *, platform: str = "dawning_5000a", cpu_ratio: float = 1.0,
                force: bool = False) -> tuple[Path, str]:
    """Convert an OTF2 archive (Score-P's ``traces.otf2``) once into a TI trace folder (``kind = "trace"``);
    returns its index and a scenario TOML that replays it (:mod:`waitlab.experiments.otf2_convert`)."""
    check_bool("force", force)  # force="no" must not replace a trace folder
    if isinstance(cpu_ratio, bool) or not isinstance(cpu_ratio, numbers.Real):  # (the command line gives a float)
        raise InputError("(python call)", "cpu_ratio", f"must be a finite number > 0, got {cpu_ratio!r}",
                         "the traced machine's core speed over the modeled one's, e.g. cpu_ratio=1.0")
    if not isinstance(platform, str):
        raise InputError("(python call)", "platform", f"must be a platform name or file, got "
                         f"{type(platform).__name__}", "e.g. platform='dawning_5000a' (waitlab.platforms())")
    return _import_otf2(path_argument(archive, "archive", "OTF2 archive"), path_argument(out, "out", "trace folder"),
                        platform=platform, cpu_ratio=float(cpu_ratio), force=force)


def recorded_scenario(archive: str | Path, name: str | None = None) -> Scenario:
    """The scenario that reads an OTF2 archive (Score-P's ``traces.otf2``) as it was recorded (``kind =
    "recorded"``: no simulation; :mod:`waitlab.experiments.recorded`): :func:`waitlab.api.run` of it writes the
    results folder of the recorded run (``waitlab analyze``).  Bad archives raise the one-line errors of
    :func:`import_otf2`."""
    return _recorded_scenario(archive, name)
