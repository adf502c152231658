"""``waitlab capture``: record a real MPI program once as a time-independent trace that replays.

The program runs through the same source as ``waitlab run`` (:class:`~waitlab.experiments.sources.ProgramSource`)
and its measured operations are written by the one TI writer (:func:`~waitlab.simulator.trace.write_trace`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tomli_w

from waitlab.errors import InputError, SimulationError
from waitlab.experiments.pipeline import prepare, simulate
from waitlab.experiments.programs import Measured, program_args, program_binary, run_real_program
from waitlab.experiments.run_folder import results_folder
from waitlab.experiments.scenario import Scenario, from_mapping
from waitlab.models.analysis.waitstates import wait_states
from waitlab.models.columns import frame
from waitlab.models.ops import OpTable
from waitlab.models.vocabulary import RMA_ACTIONS
from waitlab.platforms.smpi_factors import eager_threshold
from waitlab.readers import read_json
from waitlab.simulator.nbc_capture import read_nbc_posts, with_nbc_posts
from waitlab.simulator.replayable import check_replayable, replayable_ops
from waitlab.simulator.ti_trace import parse_ti_trace
from waitlab.simulator.timeline import build_events
from waitlab.simulator.trace import write_trace

CAPTURE_VIA = ("layer", "smpi")
#: The scenario that replays a trace folder, written into it by ``waitlab capture`` and ``waitlab import-otf2``.
REPLAY_NAME = "replay.toml"


def capture(scenario: Scenario, out: Path, *, via: str = "layer", force: bool = False, check: bool = True) -> Path:
    """Record the scenario's program once as a time-independent trace; return the index path.

    ``via="layer"`` writes waitlab's measurement as a TI trace (user and call-site
    regions as ``enter``/``leave`` lines, exact per-peer counts, compute in flops
    of the platform's core speed).  ``via="smpi"`` uses SMPI's own tracer
    (``smpirun -trace-ti``): stock TI actions only, no regions.  The folder also
    gets ``capture.json`` (what was recorded, on which platform) and ``replay.toml``, the scenario that replays the
    trace (:func:`trace_scenario_text`).  The folder is assembled aside and renamed into place only when complete.

    With ``check`` (the default), the trace is replayed at once and compared with the live run
    (:func:`replay_check`): the end time and the waits of every pattern must agree within
    :data:`CHECK_TOLERANCE`, else :class:`~waitlab.errors.SimulationError` says where they differ and no folder is
    left.  A trace that SimGrid cannot replay is never reported as a capture.
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
            check_replayable(m.ops, scenario.source)
            _check_rma_protocol(m.ops, scenario, platform.program_env.get("WAITLAB_RMA_PROTOCOL", "smpi"))
            # nonblocking collectives: their posts go back into the trace, so the replay overlaps as the run did
            ops = with_nbc_posts(m.ops, m.t_enter, m.t_exit, read_nbc_posts(work / "records", scenario.ranks))
            index = write_trace(replayable_ops(ops), platform.core_speed, partial, vectors=m.run.vectors,
                                header=header, relative=True)
            n_ops = len(m.ops)
            with _said_of_capture(scenario, partial, out, 'run the program itself (kind = "program") for its figures; '
                                  "the trace is waitlab's own writing, so please report this as a waitlab problem"):
                verdict = replay_check(scenario, index, m) if check else None
        else:
            ti = (partial / "trace.txt").resolve()
            flags = ["-trace-ti", "-trace-file", str(ti)]
            m = run_real_program(scenario, platform, work, settings, extra_flags=flags)
            index = _relativize_index(ti)
            with _said_of_capture(scenario, partial, out):
                n_ops = len(parse_ti_trace(index, flops_per_second=float(platform.core_speed),
                                           n_ranks=scenario.ranks).ops)
            # SMPI's tracer loses what its actions cannot say (a collective's sub-communicator: replayed on every
            # rank), so its trace is checked against the live run like the layer's
            verdict = replay_check(scenario, index, m, "capture with --via layer (the default), ") if check else None
        meta = {
            "scenario": scenario.name, "scenario_file": scenario.source, "scenario_hash": scenario.hash(),
            "via": via, "ranks": scenario.ranks, "platform": platform.name,
            "flops_per_second": float(platform.core_speed), "index": index.name, "operations": n_ops,
            "program": str(program_binary(scenario)), "args": program_args(scenario),
            "makespan": float(m.t_exit.max()) if m.t_exit.size else 0.0, "smpirun_wall_seconds": m.wall_seconds,
            "replay_check": verdict,
            # the placement the program ran on: the printed replay scenario keeps it (trace_scenario_text)
            "placement": {"nodes": platform.n_nodes, "ranks_per_node": platform.ranks_per_node,
                          "rule": scenario.platform.placement, "node_of_rank": [int(k) for k in platform.node_of_rank]},
        }  # fmt: skip
        (partial / "capture.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        final = (Path(out) / index.name).resolve()  # where the index is once the folder is renamed into place
        (partial / REPLAY_NAME).write_text(_replay_text(final, scenario, meta["placement"]))
    out = Path(out)
    return out / index.name


@contextmanager
def _said_of_capture(scenario: Scenario, partial: Path, out: Path, fix: str = "") -> Iterator[None]:
    """Say a problem found in the trace being assembled (in the hidden folder ``partial``, removed on failure) of what
    the user gave: the scenario, the capture folder ``out`` it was for and the file's place in it.  ``fix`` replaces
    the problem's own fix (a trace waitlab wrote: not the user's to edit); else it is kept (SMPI's trace: e.g. one-sided
    calls, whose fix is to run the program)."""
    try:
        yield
    except InputError as exc:
        try:
            rel = Path(exc.file).resolve().relative_to(Path(partial).resolve())
        except ValueError:
            raise exc from None
        raise InputError(scenario.source, "application (capture)",
                         f"the capture of scenario '{scenario.name}' was not kept (for {out}): its trace's {rel}, "
                         f"{exc.field}: {exc.problem}", fix or exc.fix) from None


def _check_rma_protocol(ops: OpTable, scenario: Scenario, protocol: str) -> None:
    """Refuse a one-sided program measured under a library protocol the replay does not send (docs/rma.md)."""
    if protocol != "smpi" and ops.mask(RMA_ACTIONS).any():
        raise InputError(scenario.source, "platform.mpi.rma_protocol",
                         f"the program uses one-sided MPI and the platform's one-sided protocol is {protocol!r}, whose "
                         "messages the measurement layer adds but waitlab's replay does not send",
                         'capture on a platform with rma_protocol = "smpi" (e.g. dawning_5000a), or run the program '
                         'itself (kind = "program")')


#: Relative difference (end time, total wait of each pattern) a capture's replay may show against the live run.
CHECK_TOLERANCE = 1e-3


def replay_check(scenario: Scenario, index: Path, live: Measured, other_fix: str = "") -> dict[str, Any]:
    """Replay a captured trace through the pipeline and compare it with the live run ``live``.

    Returns the figures compared (``makespan`` and per-pattern ``waits``, live and replayed); raises
    :class:`~waitlab.errors.SimulationError` naming every figure that differs by more than
    :data:`CHECK_TOLERANCE` (relative, or 1e-9 s absolute), or when SimGrid cannot replay the trace.
    ``other_fix`` is a further way out the message offers (``"capture with --via layer (the default), "``).
    """
    data = scenario.resolved()
    data["application"] = {"kind": "trace", "trace": str(Path(index).resolve())}
    data["scenario"] = {**data["scenario"], "name": f"{scenario.name}-replay"}
    for sec in ("noise", "instrumentation", "tracing"):
        data.pop(sec, None)
    try:
        rep = simulate(from_mapping(data, scenario.source))
    except SimulationError as exc:
        raise SimulationError(f"the capture of scenario '{scenario.name}' was not kept: SimGrid cannot replay it. "
                              f"{exc}") from None
    events = frame(build_events(live.ops, live.t_enter, live.t_exit))
    waits = wait_states(events, eager_threshold(rep.metadata["smpi_config"]))  # the settings both ran with
    got = {"makespan": (float(live.t_exit.max()) if live.t_exit.size else 0.0,
                        float(rep.events["exit"].max()) if len(rep.events) else 0.0)}
    live_w = waits.groupby("pattern", observed=True)["wait"].sum()
    rep_w = rep.waits.groupby("pattern", observed=True)["wait"].sum()
    for pattern in sorted(set(live_w.index.astype(str)) | set(rep_w.index.astype(str))):
        got[f"wait {pattern}"] = (float(live_w.get(pattern, 0.0)), float(rep_w.get(pattern, 0.0)))
    bad = [f"{k}: live {a:.9g} s, replay {b:.9g} s" for k, (a, b) in got.items()
           if abs(a - b) > max(CHECK_TOLERANCE * max(abs(a), abs(b)), 1e-9)]
    if bad:
        raise SimulationError(f"the capture of scenario '{scenario.name}' was not kept: its replay differs from the "
                              f"live run ({'; '.join(bad)}). Run the program itself (kind = \"program\") for exact "
                              f"figures, {other_fix}or capture with check=False (--no-check) to keep the trace anyway")
    return {"tolerance": CHECK_TOLERANCE, "live": {k: a for k, (a, _) in got.items()},
            "replay": {k: b for k, (_, b) in got.items()}}


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
    """A scenario TOML that replays a captured trace on the same platform, placement and SMPI settings.

    The ``[platform]`` and ``[simulation]`` tables are the captured scenario's (resolved), with the node and
    rank-per-node counts the capture ran on (``capture.json`` beside the index): 16 ranks captured on 4 nodes
    replay on 4 nodes.  :func:`capture` writes it into the trace folder as :data:`REPLAY_NAME`.
    """
    meta_path = Path(index).parent / "capture.json"
    meta = read_json(meta_path, "capture.json", 1 << 20, "capture the program again") if meta_path.is_file() else {}
    return _replay_text(index, scenario, meta.get("placement") if isinstance(meta, dict) else None)


def _replay_text(index: Path, scenario: Scenario, placed: object) -> str:
    """:func:`trace_scenario_text` with the placement the capture ran on (``capture.json``'s ``placement``)."""
    data = scenario.resolved()
    platform = dict(data["platform"])
    if isinstance(placed, dict) and platform.get("placement", "block") in ("block", "cyclic"):
        platform["nodes"] = int(placed["nodes"])
        platform["ranks_per_node"] = int(placed["ranks_per_node"])
    out = {"scenario": {"name": f"{scenario.name}-replay", "ranks": scenario.ranks, "seed": scenario.seed},
           "platform": platform, "simulation": data["simulation"],
           "application": {"kind": "trace", "trace": str(index)}}
    return tomli_w.dumps(out)
