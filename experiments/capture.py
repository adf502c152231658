"""``waitlab capture``: record a real MPI program once as a time-independent trace that replays.

The program runs through the same source as ``waitlab run`` (:class:`~waitlab.experiments.sources.ProgramSource`)
and its measured operations are written by the one TI writer (:func:`~waitlab.simulator.trace.write_trace`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from waitlab.errors import InputError, SimulationError
from waitlab.experiments.pipeline import prepare
from waitlab.experiments.programs import program_args, program_binary, run_real_program
from waitlab.experiments.results import results_folder
from waitlab.experiments.scenario import Scenario
from waitlab.simulator.ti_trace import parse_ti_trace
from waitlab.simulator.trace import write_trace

CAPTURE_VIA = ("layer", "smpi")


def capture(scenario: Scenario, out: Path, *, via: str = "layer", force: bool = False) -> Path:
    """Record the scenario's program once as a time-independent trace; return the index path.

    ``via="layer"`` writes waitlab's measurement as a TI trace (user and call-site
    regions as ``enter``/``leave`` lines, exact per-peer counts, compute in flops
    of the platform's core speed).  ``via="smpi"`` uses SMPI's own tracer
    (``smpirun -trace-ti``): stock TI actions only, no regions.  The folder also
    gets ``capture.json`` (what was recorded, on which platform).  The folder is
    assembled aside and renamed into place only when complete.
    """
    if scenario.application_kind != "program":
        raise InputError(scenario.source, "application.kind", "only a program can be captured",
                         'use kind = "program"')
    if via not in CAPTURE_VIA:
        raise InputError("(command line)", "--via", f"must be one of {', '.join(CAPTURE_VIA)}, got {via!r}", "")
    prep = prepare(scenario)
    platform, settings = prep.platform, prep.smpi_config()
    with results_folder(Path(out), force, kind="capture") as partial, \
            tempfile.TemporaryDirectory(prefix="waitlab-capture-") as tmp:
        work = Path(tmp)
        header = (f"waitlab capture of scenario '{scenario.name}' ({scenario.source}), {scenario.ranks} ranks on "
                  f"{platform.name}; compute in flops at {float(platform.core_speed)!r} flop/s")
        if via == "layer":
            m = run_real_program(scenario, platform, work, settings)
            index = write_trace(m.ops, platform.core_speed, partial, vectors=m.run.vectors, header=header,
                                relative=True)
            n_ops = len(m.ops)
        else:
            ti = (partial / "trace.txt").resolve()
            flags = ["-trace-ti", "-trace-file", str(ti)]
            m = run_real_program(scenario, platform, work, settings, extra_flags=flags)
            index = _relativize_index(ti)
            n_ops = len(parse_ti_trace(index, flops_per_second=float(platform.core_speed),
                                       n_ranks=scenario.ranks).ops)
        meta = {
            "scenario": scenario.name, "scenario_file": scenario.source, "scenario_hash": scenario.hash(),
            "via": via, "ranks": scenario.ranks, "platform": platform.name,
            "flops_per_second": float(platform.core_speed), "index": index.name, "operations": n_ops,
            "program": str(program_binary(scenario)), "args": program_args(scenario),
            "makespan": float(m.t_exit.max()) if m.t_exit.size else 0.0, "smpirun_wall_seconds": m.wall_seconds,
        }  # fmt: skip
        (partial / "capture.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    out = Path(out)
    return out / index.name


def _relativize_index(index: Path) -> Path:
    """Rewrite an index written by SMPI with paths relative to its folder (a movable trace folder)."""
    if not index.is_file():
        raise SimulationError(f"SMPI wrote no TI trace index at {index}")
    lines = []
    for line in index.read_text().splitlines():
        p = Path(line.strip())
        if line.strip() and p.is_absolute():
            try:
                line = str(p.relative_to(index.parent))
            except ValueError:
                pass
        lines.append(line)
    index.write_text("\n".join(lines) + "\n")
    return index


def trace_scenario_text(index: Path, scenario: Scenario) -> str:
    """A scenario TOML that replays a captured trace on the same platform."""
    return (f'[scenario]\nname = "{scenario.name}-replay"\nranks = {scenario.ranks}\n\n'
            f'[platform]\nname = "{scenario.platform.name}"\n\n'
            f'[application]\nkind = "trace"\ntrace = "{index}"\n')
