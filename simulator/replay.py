"""Replay an :class:`~waitlab.models.ops.OpTable` with SMPI and return its event table."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from waitlab.lazy import Deferred
from waitlab.models.ops import CODE, OpTable
from waitlab.simulator.build import replay_binary
from waitlab.simulator.limits import check_replay_limits
from waitlab.simulator.smpi import DeadlockError, name_blocked_calls, run_smpirun
from waitlab.simulator.spill import release_free_memory
from waitlab.simulator.ti_vectors import VectorStore
from waitlab.simulator.trace import write_trace

if TYPE_CHECKING:
    import pyarrow as pa

    from waitlab.simulator import timeline as _timeline
else:  # the event table (pyarrow): imported when first used, after the SMPI stage or while it runs (``on_start``)
    _timeline = Deferred("waitlab.simulator.timeline")


@dataclass(frozen=True)
class Replay:
    """Result of one replay: the event table, SimGrid's output and stage timings."""

    events: pa.Table
    output: str
    stage_seconds: dict[str, float]


def replay_ops(ops: OpTable, platform_xml: Path, hostfile: Path, core_speed: float, *,
               config: Mapping[str, str] | None = None, extra_flags: Sequence[str] = (),
               timeout: float | None = None, what: str = "SMPI replay", work: Path | None = None,
               markers_in_trace: bool = False, vectors: VectorStore | None = None,
               shared_trace: bool = True, on_start: Callable[[], object] | None = None) -> Replay:
    """Write the trace, replay it with waitlab's replay extension and parse the timelines.

    ``work`` keeps the trace and log files (a temporary folder otherwise).  Region markers are left
    out of the trace (their times are the previous action's exit) unless ``markers_in_trace``.
    ``vectors`` holds exact per-peer counts of v-collectives (see :func:`~waitlab.simulator.trace.write_trace`).
    ``shared_trace`` writes one trace file for all ranks (no open file per rank; the same simulated
    times as per-rank files, which ``shared_trace=False`` writes).  ``on_start``: the caller's work while SMPI
    runs (:func:`~waitlab.simulator.smpi.run_smpirun`).
    """
    stages: dict[str, float] = {}
    # Machine limits first (open files, memory maps): a clear message instead of SimGrid's, and no
    # stack guard pages when they would exceed vm.max_map_count (they do not change simulated times).
    settings = {**check_replay_limits(ops.n_ranks, per_rank_files=not shared_trace), **(config or {})}
    binary = replay_binary()
    with tempfile.TemporaryDirectory(prefix="waitlab-replay-") as tmp:
        folder = work or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        rows = _written_rows(ops, markers_in_trace)
        index = write_trace(ops, core_speed, folder / "trace", rows=rows, vectors=vectors, shared=shared_trace)
        actions = (len(ops) if rows is None else len(rows)) + 2 * ops.n_ranks  # and init, finalize per rank
        del rows  # recomputed only to name a deadlock
        stages["write_trace"] = time.perf_counter() - t
        release_free_memory()  # what generation and the trace's text freed goes to SMPI, not to our heap
        log = folder / "events.bin"
        log.unlink(missing_ok=True)
        env = {"WAITLAB_LOG": str(log)}
        if (ops.code == CODE["issend"]).any():  # the replay extension's request bookkeeping for MPI_Issend
            env["WAITLAB_ISSEND"] = "1"
        t = time.perf_counter()
        try:
            res = run_smpirun(binary, ops.n_ranks, platform_xml, hostfile, replay_index=index, config=settings,
                              extra_flags=extra_flags, env=env, timeout=timeout, what=what,
                              cwd=folder, progress_file=folder / "progress", progress_total=actions,
                              on_start=on_start)
        except DeadlockError as exc:  # name the call each blocked rank is in
            written = _written_rows(ops, markers_in_trace)
            raise name_blocked_calls(exc, log, ops if written is None else ops.take(written)) from None
        stages["smpi"] = res.wall_seconds  # until SimGrid ended, not until on_start's work did
        t = time.perf_counter()
        t_enter, t_exit = _timeline.read_log(log, ops)
        events = _timeline.build_events(ops, t_enter, t_exit)
        del t_enter, t_exit
        release_free_memory()  # the intermediates of the event table: ~60 B per event kept by glibc otherwise
        stages["parse"] = time.perf_counter() - t
    return Replay(events, res.output, stages)


def _written_rows(ops: OpTable, markers_in_trace: bool) -> npt.NDArray[np.int64] | None:
    """Rows of ``ops`` the trace holds (``None``: all).  Region markers take no simulated time: they are left out
    of SMPI unless ``markers_in_trace``, and :func:`~waitlab.simulator.timeline.read_log` fills their times in."""
    if markers_in_trace:
        return None
    markers = np.isin(ops.code, [CODE["enter"], CODE["leave"]])
    return np.flatnonzero(~markers) if markers.any() else None
