"""Real MPI applications in scenarios: ``kind = "program"`` (sources or a binary) and ``kind = "trace"`` (a TI trace).

A ``program`` scenario is built with SimGrid's compiler wrappers, run under SMPI
on the scenario's platform with waitlab's measurement layer, and yields the same
event table, wait states and outputs as a synthetic model.  Perturbations
(instrumentation overhead, noise, swap and flush operations) and counterfactual
operation lists are applied by the layer itself: it executes the injected
operations of the target :class:`~waitlab.models.ops.OpTable` before the
matching MPI call of the running program (see :func:`injection_schedule`).

A ``trace`` scenario replays a time-independent trace (captured by
:func:`capture`, by ``smpirun -trace-ti``, or converted from elsewhere) through
the synthetic pipeline, so it takes perturbations and what-if platforms.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError, SimulationError
from waitlab.models.ops import ACTIONS, CODE, MPI_ACTIONS, OpTable
from waitlab.simulator import programs as prog
from waitlab.simulator.ti_trace import ParsedTrace, VectorStore, parse_ti_trace
from waitlab.simulator.trace import write_trace

if TYPE_CHECKING:
    from waitlab.experiments.run import Perturb, RunResult
    from waitlab.experiments.scenario import Scenario

#: Application kinds handled here.
REAL_KINDS = ("program", "trace")
COMPUTATION = ("none", "measured")
CALLSITE_REGIONS = ("auto", "always", "never")

_PROGRAM_KEYS = ("sources", "binary", "language", "args", "compile_flags", "link_flags", "computation",
                 "callsite_regions", "exit_codes", "description")
_TRACE_KEYS = ("trace", "flops_per_second", "description")


@dataclass(frozen=True)
class ProgramParams:
    """``[application] kind = "program"``: a real MPI program.

    Attributes
    ----------
    sources : tuple of str
        Absolute paths of the C/C++/Fortran sources (given relative to the scenario file).
    binary : str or None
        An existing executable linked with waitlab's layer, instead of ``sources``.
    language : str or None
        ``c``, ``c++`` or ``fortran`` for every source (default: from the suffixes).
    args : tuple of str
        Program arguments; ``{ranks}`` is replaced by the number of ranks.
    compile_flags, link_flags : tuple of str
    computation : str
        ``none`` (deterministic: only ``smpi_execute*`` and injected operations take
        simulated time) or ``measured`` (SMPI benchmarks the real CPU time between MPI
        calls at ``smpi/host-speed`` = the platform's core speed unless set).
    callsite_regions : str
        Wrap compute between MPI calls in regions named after the call sites:
        ``auto`` (outside user regions), ``always``, ``never``.
    exit_codes : tuple of int
        Exit statuses of ``main`` that are not failures.
    digest : str
        Hash of the sources (or binary), so the scenario hash changes with the program.
    """

    sources: tuple[str, ...] = ()
    binary: str | None = None
    language: str | None = None
    args: tuple[str, ...] = ()
    compile_flags: tuple[str, ...] = ()
    link_flags: tuple[str, ...] = ()
    computation: str = "none"
    callsite_regions: str = "auto"
    exit_codes: tuple[int, ...] = (0,)
    digest: str = ""


@dataclass(frozen=True)
class TraceParams:
    """``[application] kind = "trace"``: a time-independent trace to replay.

    Attributes
    ----------
    trace : str
        Absolute path of the index (or single trace file).
    flops_per_second : float or None
        Speed that turns the trace's ``compute`` flops into seconds; by default the
        platform's core speed (flops replay as flops on any platform).
    digest : str
        Sizes and modification times of the trace files (scenario hash).
    """

    trace: str
    flops_per_second: float | None = None
    digest: str = ""


def _strings(value: Any, file: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple) or \
            not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
        raise InputError(file, f"application.{key}", f"must be a list of strings, got {value!r}",
                         f'{key} = ["..."]')
    return tuple(str(v) for v in value)


def _choice(app: Mapping[str, Any], key: str, allowed: tuple[str, ...], file: str, default: str) -> str:
    v = app.get(key, default)
    if v not in allowed:
        raise InputError(file, f"application.{key}", f"must be one of {', '.join(allowed)}, got {v!r}", "")
    return str(v)


def _file_digest(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        st = p.stat()
        h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def params_from_mapping(kind: str, app: Mapping[str, Any], file: str) -> ProgramParams | TraceParams:
    """Validate ``[application]`` of a ``program`` or ``trace`` scenario (``kind`` already removed)."""
    base = Path(file).parent if not file.startswith("<") else Path.cwd()
    if kind == "trace":
        for key in app:
            if key not in _TRACE_KEYS:
                raise InputError(file, f"application.{key}", "unknown key", f"allowed keys: {', '.join(_TRACE_KEYS)}")
        if "trace" not in app or not isinstance(app["trace"], str):
            raise InputError(file, "application.trace", "is required (a string)",
                             'trace = "capture/index.txt" (written by waitlab capture)')
        path = (base / app["trace"]).resolve()
        if not path.is_file():
            raise InputError(file, "application.trace", f"{path} does not exist",
                             "record one with 'waitlab capture SCENARIO -o DIR'")
        fps = app.get("flops_per_second")
        if fps is not None and (isinstance(fps, bool) or not isinstance(fps, int | float) or not fps > 0):
            raise InputError(file, "application.flops_per_second", f"must be a number > 0, got {fps!r}", "")
        from waitlab.simulator.ti_trace import trace_files

        files = trace_files(path)
        return TraceParams(str(path), float(fps) if fps is not None else None, _file_digest([path, *files]))
    if kind != "program":
        raise InputError(file, "application.kind", f"unknown real-application kind {kind!r}", "program or trace")
    for key in app:
        if key not in _PROGRAM_KEYS:
            raise InputError(file, f"application.{key}", "unknown key", f"allowed keys: {', '.join(_PROGRAM_KEYS)}")
    sources = _strings(app.get("sources", []), file, "sources")
    binary = app.get("binary")
    if binary is not None and not isinstance(binary, str):
        raise InputError(file, "application.binary", f"must be a path string, got {binary!r}", "")
    if bool(sources) == (binary is not None):
        raise InputError(file, "application", "give exactly one of sources or binary",
                         'sources = ["main.c"]  (or binary = "path/to/program" linked with waitlab\'s layer)')
    language = app.get("language")
    if language is not None and language not in prog.COMPILERS:
        raise InputError(file, "application.language", f"must be one of {', '.join(prog.COMPILERS)}, got "
                         f"{language!r}", "")
    src_paths = [(base / s).resolve() for s in sources]
    for s in src_paths:
        if not s.is_file():
            raise InputError(file, "application.sources", f"{s} does not exist", "paths are relative to the scenario")
        if language is None:
            prog.language_of(s)
    bin_path = (base / binary).resolve() if binary is not None else None
    if bin_path is not None and not bin_path.is_file():
        raise InputError(file, "application.binary", f"{bin_path} does not exist", "build it with smpicc first")
    exit_codes = app.get("exit_codes", [0])
    if not isinstance(exit_codes, list) or not exit_codes or \
            not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 256 for c in exit_codes):
        raise InputError(file, "application.exit_codes", f"must be a list of statuses 0..255, got {exit_codes!r}",
                         "exit_codes = [0, 1] when main() returns 1 by design (NAS DT)")
    digest = prog.sources_digest(src_paths) if src_paths else _file_digest([bin_path]) if bin_path else ""
    return ProgramParams(
        sources=tuple(str(s) for s in src_paths),
        binary=str(bin_path) if bin_path is not None else None,
        language=language,
        args=_strings(app.get("args", []), file, "args"),
        compile_flags=_strings(app.get("compile_flags", []), file, "compile_flags"),
        link_flags=_strings(app.get("link_flags", []), file, "link_flags"),
        computation=_choice(app, "computation", COMPUTATION, file, "none"),
        callsite_regions=_choice(app, "callsite_regions", CALLSITE_REGIONS, file, "auto"),
        exit_codes=tuple(sorted(set(exit_codes))),
        digest=digest,
    )


# ---------------------------------------------------------------------------------------------------------------
# Programs
# ---------------------------------------------------------------------------------------------------------------

def program_binary(scenario: Scenario) -> Path:
    """The scenario's program, built (and cached) with waitlab's layer."""
    p: ProgramParams = scenario.application
    if p.binary is not None:
        return prog.check_binary(Path(p.binary), scenario.source)
    return prog.build_program([Path(s) for s in p.sources], language=p.language, compile_flags=p.compile_flags,
                              link_flags=p.link_flags, name=scenario.name, origin=scenario.source)


def program_args(scenario: Scenario) -> list[str]:
    """Program arguments with ``{ranks}`` substituted."""
    return [a.replace("{ranks}", str(scenario.ranks)) for a in scenario.application.args]


def program_config(scenario: Scenario, platform: Any) -> dict[str, str]:
    """SimGrid settings of a real run (deterministic unless ``computation = "measured"``)."""
    from waitlab.experiments.run import smpi_config

    cfg = dict(prog.DETERMINISTIC_CONFIG)
    if scenario.application.computation == "measured":
        cfg["smpi/simulate-computation"] = "yes"
        cfg["smpi/host-speed"] = repr(float(platform.core_speed))
    cfg.update(smpi_config(scenario))
    return cfg


def is_anchor(ops: OpTable) -> npt.NDArray[np.bool_]:
    """Rows the running program itself produces: MPI calls and user region markers (not call-site regions)."""
    mpi = ops.mask(MPI_ACTIONS)
    marker = ops.mask(("enter", "leave"))
    if marker.any():
        site_names = np.array([n.startswith(prog.SITE_PREFIX) for n in ops.names] + [False], bool)
        marker &= ~site_names[np.where(ops.name >= 0, ops.name, len(ops.names))]
    return mpi | marker


def _exclusive_rank_cumsum(mask: npt.NDArray[np.bool_], rank: npt.NDArray[np.int32], n_ranks: int
                           ) -> npt.NDArray[np.int64]:
    c = np.cumsum(mask.astype(np.int64))
    counts = np.bincount(rank, minlength=n_ranks)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    base = np.repeat(np.r_[0, c][starts], counts)
    return c - mask.astype(np.int64) - base


@dataclass(frozen=True)
class Schedule:
    """Operations for the layer to inject: rows of the target table, their anchors and phases."""

    rows: npt.NDArray[np.int64]
    anchor: npt.NDArray[np.int64]
    phase: npt.NDArray[np.int32]
    code: npt.NDArray[np.int8]
    value: npt.NDArray[np.float64]
    value2: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.rows.size)


def _interval_first(target: OpTable, interval: npt.NDArray[np.int64], mask: npt.NDArray[np.bool_]
                    ) -> npt.NDArray[np.int64]:
    """Per row: the first row of its (rank, interval) where ``mask`` holds (a large number if none)."""
    n = len(target)
    key = target.rank.astype(np.int64) * (int(interval.max(initial=0)) + 2) + interval
    big = np.int64(n + 1)
    rows = np.flatnonzero(mask)
    first = np.full(n, big, np.int64)
    if rows.size:
        uk, first_idx = np.unique(key[rows], return_index=True)
        pos = np.searchsorted(uk, key)
        pos = np.minimum(pos, uk.size - 1)
        hit = uk[pos] == key
        first[hit] = rows[first_idx[pos[hit]]]
    return first


def injection_schedule(target: OpTable) -> Schedule:
    """What the layer must execute so the running program reproduces ``target``'s local operations.

    Rows of ``overhead``, ``noise``, ``delay``, ``flush``, ``swap`` and ``sleep`` are
    executed as they are; of a ``compute`` row only its injected ``excess`` (the
    program computes the rest itself).  Between two anchors (MPI calls or user
    region markers) the program's own computation happens where the interval's
    first ``compute`` row is: items before it run right after the previous anchor
    returns (phase 1), the others just before the next anchor (phase 0), so the
    measured order is the target's order.
    """
    anchors = is_anchor(target)
    interval = _exclusive_rank_cumsum(anchors, target.rank, target.n_ranks)
    local = target.mask(("overhead", "noise", "delay", "flush", "swap", "sleep"))
    is_compute = target.code == CODE["compute"]
    extra = is_compute & (target.excess > 0)
    rows = np.flatnonzero(local | extra).astype(np.int64)
    first_compute = _interval_first(target, interval, is_compute)
    phase = np.where((np.arange(len(target)) < first_compute) & (first_compute <= len(target)) & ~extra, 1, 0)
    value = np.where(extra[rows], target.excess[rows], target.value[rows])
    return Schedule(rows, interval[rows], phase[rows].astype(np.int32), target.code[rows],
                    value.astype(np.float64), target.value2[rows].astype(np.float64))


def merge_measured(target: OpTable, measured: prog.ProgramRun, schedule: Schedule
                   ) -> tuple[OpTable, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``target``'s rows with the times measured when the program ran with ``schedule`` injected.

    The result has exactly ``target``'s rows (names, steps, causes, excess and
    ledger, so the perturbation and ground-truth layers can map rows), with
    ``compute`` values replaced by the computation measured between the same two
    anchors.  Anchors and injected operations take their measured times; other
    local rows (call-site markers) sit at the time of the row before them.
    """
    m = measured.ops
    t_anchor = is_anchor(target)
    m_anchor = (measured.record >= 0) & ~measured.injected
    ta, ma = np.flatnonzero(t_anchor), np.flatnonzero(m_anchor)
    tc, mc = target.code[ta], m.code[ma]
    if ta.size != ma.size or not np.array_equal(tc, mc) or not np.array_equal(target.rank[ta], m.rank[ma]):
        n = min(ta.size, ma.size)
        diff = np.flatnonzero((tc[:n] != mc[:n]) | (target.rank[ta[:n]] != m.rank[ma[:n]]))
        i = int(diff[0]) if diff.size else n
        where = (f"rank {m.rank[ma[i]]} call {m.seq[ma[i]]}: {ACTIONS[mc[i]]} instead of {ACTIONS[tc[i]]}"
                 if i < n else f"{ma.size} calls instead of {ta.size}")
        raise SimulationError("the program made other MPI calls than the run it should reproduce "
                              f"({where}); perturbing a real program needs one whose MPI calls do not depend on "
                              "timing (computation = \"none\")")
    inj = np.flatnonzero(measured.injected)
    if inj.size != len(schedule):
        raise SimulationError(f"the measurement layer executed {inj.size} injected operations of {len(schedule)}")
    n = len(target)
    nan = np.full(n, np.nan)
    t_enter, t_exit = nan.copy(), nan.copy()
    t_enter[ta], t_exit[ta] = measured.t_enter[ma], measured.t_exit[ma]
    src = schedule.rows
    t_enter[src], t_exit[src] = measured.t_enter[inj], measured.t_exit[inj]
    # the program's own computation of each interval -> the interval's compute rows
    t_int = _exclusive_rank_cumsum(t_anchor, target.rank, target.n_ranks)
    m_int = _exclusive_rank_cumsum(m_anchor, m.rank, m.n_ranks)
    stride = int(max(t_int.max(initial=0), m_int.max(initial=0))) + 2
    m_gap = np.flatnonzero((m.code == CODE["compute"]) & ~measured.injected)
    gap_key = m.rank[m_gap].astype(np.int64) * stride + m_int[m_gap]
    t_comp = np.flatnonzero(target.code == CODE["compute"])
    comp_key = target.rank[t_comp].astype(np.int64) * stride + t_int[t_comp]
    value = target.value.astype(np.float64).copy()
    if t_comp.size:
        order = np.argsort(gap_key, kind="stable")
        gk = gap_key[order]
        pos = np.minimum(np.searchsorted(gk, comp_key), max(gk.size - 1, 0))
        has_gap = (gk.size > 0) & (gk[pos] == comp_key) if gk.size else np.zeros(t_comp.size, bool)
        g_rows = m_gap[order[pos]] if gk.size else np.zeros(t_comp.size, np.int64)
        uk, counts = np.unique(comp_key, return_counts=True)
        single = counts[np.searchsorted(uk, comp_key)] == 1
        for j, row in enumerate(t_comp.tolist()):
            g0 = g1 = np.nan
            if has_gap[j]:
                g0, g1 = measured.t_enter[g_rows[j]], measured.t_exit[g_rows[j]]
            if not single[j] and has_gap[j]:  # several compute rows share the interval's computation
                same = t_comp[comp_key == comp_key[j]]
                w = np.maximum(target.value[same] - target.excess[same], 0.0)
                share = w / w.sum() if w.sum() > 0 else np.full(same.size, 1.0 / same.size)
                k = int(np.flatnonzero(same == row)[0])
                c0 = g0 + (g1 - g0) * float(share[:k].sum())
                g0, g1 = c0, c0 + (g1 - g0) * float(share[k])
            if np.isnan(t_enter[row]):  # no injected excess
                t_enter[row], t_exit[row] = g0, g1
            elif has_gap[j]:  # program computation, then the injected excess
                t_enter[row] = g0
            value[row] = (t_exit[row] - t_enter[row]) if not np.isnan(t_exit[row]) else 0.0
    # rows still without times (call-site markers, compute without measured computation): the previous exit
    known = ~np.isnan(t_exit)
    rank_first = np.r_[True, target.rank[1:] != target.rank[:-1]] if n else np.zeros(0, bool)
    # forward fill within ranks: last known row at or before each row, restarting per rank
    seg_start = np.maximum.accumulate(np.where(rank_first, np.arange(n), 0)) if n else np.zeros(0, np.int64)
    last = np.maximum.accumulate(np.where(known, np.arange(n), -1)) if n else np.zeros(0, np.int64)
    last = np.where(last >= seg_start, last, -1)
    fill = np.where(last >= 0, t_exit[np.maximum(last, 0)], _rank_start_time(measured, target.rank))
    t_enter = np.where(known, t_enter, fill)
    t_exit = np.where(known, t_exit, fill)
    value = np.where((target.code == CODE["compute"]) & ~known, 0.0, value)
    out = target.replace_columns(value=value)
    return out, t_enter.astype(np.float64), t_exit.astype(np.float64)


def _rank_start_time(measured: prog.ProgramRun, rank: npt.NDArray[np.int32]) -> npt.NDArray[np.float64]:
    """Per row: the time its rank left MPI_Init (the start of its first row)."""
    m = measured.ops
    first = np.r_[True, m.rank[1:] != m.rank[:-1]] if len(m) else np.zeros(0, bool)
    start = np.zeros(m.n_ranks)
    start[m.rank[first]] = measured.t_enter[first]
    return start[rank]


@dataclass(frozen=True)
class Measured:
    """One run of a real program: the layer's view, and the operations and times to report."""

    run: prog.ProgramRun
    ops: OpTable
    t_enter: npt.NDArray[np.float64]
    t_exit: npt.NDArray[np.float64]
    output: str
    wall_seconds: float


def run_real_program(scenario: Scenario, platform: Any, work: Path, target: OpTable | None = None,
                     extra_flags: Sequence[str] = ()) -> Measured:
    """Run the scenario's program once; with ``target``, inject its local operations.

    Without ``target`` the operations are the measured ones; with it, they are
    ``target``'s rows with measured times (:func:`merge_measured`).
    """
    p: ProgramParams = scenario.application
    binary = program_binary(scenario)
    xml, hostfile = platform.write(work)
    schedule_dir = None
    sched = None
    if target is not None:
        if target.n_ranks != scenario.ranks:
            raise InputError(scenario.source, "scenario.ranks", f"the operations have {target.n_ranks} ranks",
                             "use the ranks of the run they come from")
        sched = injection_schedule(target)
        schedule_dir = work / "schedule"
        prog.write_schedule(schedule_dir, scenario.ranks, sched.anchor, target.rank[sched.rows],
                            sched.code, sched.value, sched.value2, sched.phase)
    out_dir = work / "records"
    res = prog.run_program(binary, scenario.ranks, xml, hostfile, out_dir, args=program_args(scenario),
                           config=program_config(scenario, platform), schedule_dir=schedule_dir,
                           extra_flags=extra_flags, timeout=scenario.simulation.timeout, exit_codes=p.exit_codes,
                           cwd=work, what=f"program of scenario '{scenario.name}' ({scenario.source})")
    records = prog.read_records(out_dir, scenario.ranks)
    run = prog.records_to_ops(records, binary, callsite_regions=p.callsite_regions)
    ops, t_enter, t_exit = run.ops, run.t_enter, run.t_exit
    if target is not None and sched is not None:
        ops, t_enter, t_exit = merge_measured(target, run, sched)
    return Measured(run, ops, t_enter, t_exit, res.output, res.wall_seconds)


# ---------------------------------------------------------------------------------------------------------------
# Traces
# ---------------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=8)
def _parse_cached(path: str, digest: str, fps: float, n_ranks: int) -> ParsedTrace:
    return parse_ti_trace(Path(path), flops_per_second=fps, n_ranks=n_ranks)


def load_trace(scenario: Scenario, core_speed: float) -> ParsedTrace:
    """The scenario's trace as operations (cached by path, file digest and speed)."""
    p: TraceParams = scenario.application
    fps = p.flops_per_second or core_speed
    return _parse_cached(p.trace, p.digest, float(fps), scenario.ranks)


def real_ops(scenario: Scenario) -> OpTable:
    """Base operations of a real-application scenario (for :func:`waitlab.experiments.run.generate_ops`).

    A trace is parsed; a program is run once on the scenario's platform.
    """
    from waitlab.experiments.run import render

    platform = render(scenario)
    if scenario.application_kind == "trace":
        return load_trace(scenario, platform.core_speed).ops
    cached = _BASE_OPS.get(_base_key(scenario))
    if cached is not None:
        return cached
    with tempfile.TemporaryDirectory(prefix="waitlab-prog-") as tmp:
        ops = run_real_program(scenario, platform, Path(tmp)).ops
    _remember_base(scenario, ops)
    return ops


def simulate_real(scenario: Scenario, ops: OpTable | None = None, *, perturb: Perturb | None = None,
                  paje_file: Path | None = None, keep_dir: Path | None = None,
                  speed_profiles: Mapping[str, str] | None = None) -> RunResult:
    """:func:`waitlab.experiments.run.simulate` for ``program`` and ``trace`` scenarios.

    Parameters are those of ``simulate``.  For a program, ``ops`` (a counterfactual
    or perturbed operation list of an earlier run of the same program) or
    ``perturb`` make the layer inject the local operations of the target list into
    the running program; speed profiles (noise) apply to its hosts as to a replay.
    """
    from waitlab.experiments.run import render

    stages: dict[str, float] = {}
    t = time.perf_counter()
    platform = render(scenario, speed_profiles) if speed_profiles else render(scenario)
    flags = ["-trace", "-trace-file", str(paje_file)] if paje_file is not None else []
    with tempfile.TemporaryDirectory(prefix="waitlab-") as tmp:
        work = keep_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if scenario.application_kind == "trace":
            return _simulate_trace(scenario, platform, work, ops, perturb, flags, stages, t)
        t_build = time.perf_counter()
        program_binary(scenario)
        stages["build"] = time.perf_counter() - t_build
        target = ops
        if perturb is not None:
            if target is None:
                target = _BASE_OPS.get(_base_key(scenario))
            if target is None:
                t_base = time.perf_counter()
                target = run_real_program(scenario, platform, work / "base").ops
                stages["smpi_base"] = time.perf_counter() - t_base
            target = perturb(scenario, target, platform)
        stages["generate"] = time.perf_counter() - t - stages["build"] - stages.get("smpi_base", 0.0)
        t = time.perf_counter()
        m = run_real_program(scenario, platform, work, target, extra_flags=flags)
        stages["smpi"] = time.perf_counter() - t
        if ops is None and perturb is None:
            _remember_base(scenario, m.ops)
        return _finish(scenario, platform, m.ops, m.t_enter, m.t_exit, stages, m.output,
                       {"program": str(program_binary(scenario)),
                        "computation": scenario.application.computation})


#: Operations of the last unperturbed runs (a perturbed run starts from them instead of running twice).
_BASE_OPS: dict[str, OpTable] = {}


def _base_key(scenario: Scenario) -> str:
    return f"{scenario.hash()}:{program_binary(scenario)}"


def _remember_base(scenario: Scenario, ops: OpTable) -> None:
    while len(_BASE_OPS) >= 4:
        _BASE_OPS.pop(next(iter(_BASE_OPS)))
    _BASE_OPS[_base_key(scenario)] = ops


def _simulate_trace(scenario: Scenario, platform: Any, work: Path, ops: OpTable | None, perturb: Perturb | None,
                    flags: list[str], stages: dict[str, float], t: float) -> RunResult:
    from waitlab.experiments.run import finish, smpi_config
    from waitlab.simulator.replay import replay_ops

    parsed = load_trace(scenario, platform.core_speed)
    if ops is None:
        ops = parsed.ops
    if perturb is not None:
        ops = perturb(scenario, ops, platform)
    stages["generate"] = time.perf_counter() - t
    xml, hostfile = platform.write(work)
    rep = replay_ops(ops, xml, hostfile, platform.core_speed, config=smpi_config(scenario), extra_flags=flags,
                     timeout=scenario.simulation.timeout, work=work, vectors=parsed.vectors,
                     what=f"SMPI replay of scenario '{scenario.name}' ({scenario.source})")
    stages.update(rep.stage_seconds)
    p: TraceParams = scenario.application
    return finish(scenario, platform, ops, rep.events, stages, rep.output,
                  extra_meta={"trace": p.trace, "flops_per_second": parsed.flops_per_second})


def _finish(scenario: Scenario, platform: Any, ops: OpTable, t_enter: npt.NDArray[np.float64],
            t_exit: npt.NDArray[np.float64], stages: dict[str, float], output: str,
            extra_meta: dict[str, Any]) -> RunResult:
    from waitlab.experiments.run import finish
    from waitlab.simulator.timeline import build_events

    t = time.perf_counter()
    events = build_events(ops, t_enter, t_exit)
    stages["parse"] = time.perf_counter() - t
    return finish(scenario, platform, ops, events, stages, output,
                  smpi_settings=program_config(scenario, platform), extra_meta=extra_meta)


# ---------------------------------------------------------------------------------------------------------------
# Capture
# ---------------------------------------------------------------------------------------------------------------

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
    from waitlab.experiments.run import render, results_folder

    if scenario.application_kind != "program":
        raise InputError(scenario.source, "application.kind", "only a program can be captured",
                         'use kind = "program"')
    if via not in CAPTURE_VIA:
        raise InputError("(command line)", "--via", f"must be one of {', '.join(CAPTURE_VIA)}, got {via!r}", "")
    platform = render(scenario)
    with results_folder(Path(out), force) as partial, tempfile.TemporaryDirectory(prefix="waitlab-capture-") as tmp:
        work = Path(tmp)
        header = (f"waitlab capture of scenario '{scenario.name}' ({scenario.source}), {scenario.ranks} ranks on "
                  f"{platform.name}; compute in flops at {float(platform.core_speed)!r} flop/s")
        if via == "layer":
            m = run_real_program(scenario, platform, work)
            index = write_trace(m.ops, platform.core_speed, partial, vectors=m.run.vectors, header=header,
                                relative=True)
            n_ops = len(m.ops)
        else:
            ti = (partial / "trace.txt").resolve()
            flags = ["-trace-ti", "-trace-file", str(ti)]
            m = run_real_program(scenario, platform, work, extra_flags=flags)
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


__all__ = ["REAL_KINDS", "ProgramParams", "TraceParams", "VectorStore", "capture", "injection_schedule",
           "merge_measured", "params_from_mapping", "real_ops", "simulate_real"]
