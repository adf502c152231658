"""Real MPI applications in scenarios: ``kind = "program"`` (sources or a binary) and ``kind = "trace"`` (a TI trace).

A ``program`` scenario is built with SimGrid's compiler wrappers, run under SMPI
on the scenario's platform with waitlab's measurement layer, and yields the same
event table, wait states and outputs as a synthetic model.  Perturbations
(instrumentation overhead, noise, swap and flush operations) and counterfactual
operation lists are applied by the layer itself: it executes the injected
operations of the target :class:`~waitlab.models.ops.OpTable` before the
matching MPI call of the running program (see :func:`injection_schedule`).

The sources of :mod:`waitlab.experiments.sources` call :func:`run_real_program`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError, SimulationError
from waitlab.experiments.real_params import ProgramParams
from waitlab.experiments.scenario import Scenario
from waitlab.models.ops import ACTIONS, CODE, MPI_ACTIONS, OpTable
from waitlab.platforms.machine import computation_measured, program_settings
from waitlab.platforms.render import RenderedPlatform
from waitlab.simulator import programs as prog
from waitlab.simulator.smpi import plugin_environment


def program_binary(scenario: Scenario) -> Path:
    """The scenario's program, built (and cached) with waitlab's layer."""
    p: ProgramParams = scenario.application
    if p.binary is not None:
        return prog.check_binary(Path(p.binary), scenario.source)
    flags = (*p.compile_flags, *COUNTED_FLAGS) if p.computation == "counted" else p.compile_flags
    return prog.build_program([Path(s) for s in p.sources], language=p.language, compile_flags=flags,
                              link_flags=p.link_flags, name=scenario.name, origin=scenario.source)


#: computation = "counted": the compiler calls ``__sanitizer_cov_trace_pc`` at every basic block of the program's own
#: code (GCC's and Clang's coverage instrumentation); the measurement layer counts the calls.
COUNTED_FLAGS = ("-fsanitize-coverage=trace-pc",)


def program_env(scenario: Scenario, platform: RenderedPlatform) -> dict[str, str]:
    """Environment of the measurement layer: the platform's, and with ``computation = "counted"``
    ``WAITLAB_COUNTED`` (flops charged per executed basic block)."""
    p: ProgramParams = scenario.application
    env = dict(platform.program_env)
    if p.computation == "counted" and p.flops_per_block is not None:
        env["WAITLAB_COUNTED"] = repr(float(p.flops_per_block))
    return env


def program_args(scenario: Scenario) -> list[str]:
    """Program arguments with ``{ranks}`` substituted."""
    return [a.replace("{ranks}", str(scenario.ranks)) for a in scenario.application.args]


def program_config(scenario: Scenario, platform: RenderedPlatform, settings: Mapping[str, str]) -> dict[str, str]:
    """SimGrid settings of a real run (deterministic unless ``computation = "measured"``), then ``settings``."""
    cfg = program_settings(scenario.application.computation, platform.core_speed)
    cfg.update(settings)
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
    #: files the program wrote into its working folder (relative path -> content), inputs excluded
    files: dict[str, bytes] = field(default_factory=dict)
    #: what re-runs it with stock SimGrid (``simulator.program_run.rerun_files``): file name -> content
    rerun: dict[str, bytes] = field(default_factory=dict)


def run_real_program(scenario: Scenario, platform: RenderedPlatform, work: Path, settings: Mapping[str, str],
                     target: OpTable | None = None, extra_flags: Sequence[str] = (),
                     binary: Path | None = None, on_start: Callable[[], object] | None = None) -> Measured:
    """Run the scenario's program once; with ``target``, inject its local operations.

    Without ``target`` the operations are the measured ones; with it, they are
    ``target``'s rows with measured times (:func:`merge_measured`).  ``settings`` are the
    scenario's SimGrid settings (after the deterministic defaults of a program run).  ``binary``: the program
    as :func:`program_binary` gave it already (else it is looked up again: its build cache hashes every header).
    ``on_start``: the caller's work while SMPI runs (:func:`waitlab.simulator.smpi.run_smpirun`).
    """
    p: ProgramParams = scenario.application
    binary = binary if binary is not None else program_binary(scenario)
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
    cwd = program_workdir(work / "program", p.inputs)
    cfg = program_config(scenario, platform, settings)
    res = prog.run_program(binary, scenario.ranks, xml, hostfile, out_dir, args=program_args(scenario),
                           config=cfg, schedule_dir=schedule_dir,
                           extra_flags=extra_flags, timeout=scenario.simulation.timeout, exit_codes=p.exit_codes,
                           cwd=cwd, what=f"program of scenario '{scenario.name}' ({scenario.source})",
                           env=program_env(scenario, platform), measured=computation_measured(cfg),
                           program=p.sources[0] if p.sources else str(p.binary), on_start=on_start)
    records = prog.read_records(out_dir, scenario.ranks, program=p.sources[0] if p.sources else str(p.binary))
    run = prog.records_to_ops(records, binary, callsite_regions=p.callsite_regions)
    ops, t_enter, t_exit = run.ops, run.t_enter, run.t_exit
    if target is not None and sched is not None:
        ops, t_enter, t_exit = merge_measured(target, run, sched)
    env = {**prog.layer_env(program_env(scenario, platform), schedule_dir, computation_measured(cfg)),
           **plugin_environment(cfg)}
    rerun = prog.rerun_files(res.command, binary, xml, hostfile, env, schedule_dir, [Path(f) for f in p.inputs])
    return Measured(run, ops, t_enter, t_exit, res.output, res.wall_seconds, written_files(cwd, p.inputs), rerun)


#: Largest total size of the files a program writes that are kept in the results folder.
MAX_KEPT_BYTES = 64 << 20


def program_workdir(folder: Path, inputs: Sequence[str]) -> Path:
    """A fresh working folder for the program, with its input files copied in."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for f in inputs:
        shutil.copy2(f, folder / Path(f).name)
    return folder


def written_files(folder: Path, inputs: Sequence[str]) -> dict[str, bytes]:
    """What the program left in its working folder (input files it did not change excluded), in name order.

    Files are kept in name order while they fit in :data:`MAX_KEPT_BYTES` in all; a file that does not fit is
    replaced by a note and uses none of the budget, so a smaller file after it is still kept (whether a file is kept
    depends on the sizes of the files before it in name order, never on their names alone)."""
    given = {Path(f).name: Path(f) for f in inputs}
    out: dict[str, bytes] = {}
    total = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        size = path.stat().st_size
        if rel in given and given[rel].stat().st_size == size and given[rel].read_bytes() == path.read_bytes():
            continue
        if total + size > MAX_KEPT_BYTES:  # not read: a file that is not kept costs neither memory nor budget
            out[rel] = (f"not kept: {size} bytes, more than the {MAX_KEPT_BYTES - total} bytes left of the "
                        f"{MAX_KEPT_BYTES >> 20} MiB of files waitlab keeps\n").encode()
            continue
        data = path.read_bytes()
        total += len(data)
        out[rel] = data
    return out
