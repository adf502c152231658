"""Memory, disk and time a run will take, estimated before it starts (issues 10 and 15).

``estimate(prepared)`` counts the run's events without simulating (the application model is pure;
beyond :data:`EXACT_UP_TO` ranks it generates the scenario at 1,024 ranks and scales linearly in
ranks, which holds for the BSP applications: each rank's operations do not depend on the rank
count, except for v-collectives' per-peer counts) and turns them into bytes and seconds with the
per-rank and per-event costs below, measured on SimGrid 3.32 (benchmarks/bench_scale.py,
docs/performance.md).  They are estimates: the time model is near-linear in the ranks with waitlab's
default binomial allreduce and quadratic with SimGrid's linear reduce (docs/performance.md, "Scale").
With small messages sent eagerly (``smpi/async-small-thresh``) it uses its own near-linear fit, checked on
the full machine (163,840 ranks x 20 steps: 78 min predicted, 62.7 min measured).  Applications measured to cost
SMPI far more than their events (:data:`MEASURED_STEP_LAWS`: the 2-D stencil on Sunway TaihuLight, each step
after the first ~ ranks^1.71) add a power law fitted to measured runs.  Gaps: without that
setting, beyond 16,384 ranks SimGrid 3.32's list of detached sends takes over (a 163,840-rank step did
not finish in 27 minutes), which the time model does not capture; and SMPI's memory on the full Sunway
platform is about 2.5 times the linear model's (16.5 GB measured for one step, 18.8 GB for 20).

``Estimate.check(budget)`` raises one clear error when the run would not fit the machine
(memory available, free space of the scratch folder) or a time budget.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from waitlab.errors import EnvironmentProblem, WaitlabError
from waitlab.experiments.estimate_history import learned_factor, read_history, record_run
from waitlab.experiments.sources import source_for
from waitlab.experiments.stage import Prepared
from waitlab.platforms.machine import EAGER_TRANSFER_KEY, TREE_ALLREDUCE
from waitlab.simulator.spill import SPILL_MIN_OPS

MiB = 1 << 20
#: Rank counts up to which the events are counted exactly (the operations are generated in full).
EXACT_UP_TO = 16_384
#: SMPI process: fixed part and per rank (actor, stack, mailboxes, requests; 33 MiB + 23–27.5 KiB per
#: rank measured with stock smpireplaymain on Dawning up to 16,384 ranks, +4 KiB per rank without guard
#: pages).  Gap: SMPI's memory grows faster than the ranks on the full Sunway platform (411 MiB at 16,384
#: ranks, 1,807 MiB at 65,536, 16.5 GB at 163,840 for one LARED-S-like step), which this linear model misses.
SMPI_BASE_BYTES = 33 * MiB
SMPI_RANK_BYTES = 32 * 1024
#: Replay extension's log, held in memory until the end: one 24-byte record per replayed action.
SMPI_EVENT_BYTES = 24
#: waitlab's Python process: imports, then per operation (the estimate's "events").  Its peak comes after
#: SMPI has exited (the event table, wait states, results folder) or before it started (generation): 184 B
#: per operation at 16,384 x 20 (234 B per event-table row, resident pages of the memory-mapped operation
#: table included) and 188 B for the full machine x 20 steps (17.1 GB for 91.3 M operations).  While SMPI
#: runs it holds the operation table (61 B per operation) and little else; from SPILL_MIN_OPS operations on
#: that table is memory-mapped from disk (simulator/spill.py) and the process holds 9-10 B per operation
#: (0.90 GB at the full machine).  Measured by benchmarks/bench_memory.py and the full-machine run
#: (docs/performance.md, "waitlab's own cost at scale").
PYTHON_BASE_BYTES = 150 * MiB
PYTHON_EVENT_BYTES = 190
PYTHON_DURING_SMPI_EVENT_BYTES = 75
PYTHON_DURING_SMPI_SPILLED_EVENT_BYTES = 10
#: Scratch files per event: trace line (~40 B) + log record (24 B); results folder (Parquet) ~12 B.  A spilled
#: operation table (simulator/spill.py) adds its columns, 61 B per operation (OpTable.COLUMNS), in unlinked files of
#: the scratch folder.
SCRATCH_EVENT_BYTES = 76
SCRATCH_SPILLED_OP_BYTES = 61
#: Replay time with waitlab's default binomial allreduce: per event, plus per event and rank; fitted to
#: waitlab's SMPI stage of the LARED-S-like scenario, 20 steps on a quiet machine: 33.1 s for 1,792,000
#: events at 4,096 ranks, 186.6 s for 7,188,480 events at 16,384 ranks (docs/performance.md, "Scale").
SMPI_SECONDS_PER_EVENT = 1.6e-5
SMPI_SECONDS_PER_EVENT_RANK_TREE = 6.1e-10
#: The same with small messages sent eagerly (EAGER_TRANSFER_KEY set): fitted to the stock replay of LARED-S on
#: Dawning x 20 steps, 30.1 s for 1.79 M events at 4,096 ranks and 137.2 s for 7.19 M at 16,384; checked on the
#: full machine x 20 steps (Sunway, waitlab's SMPI stage 3,506 s for 91.3 M operations: predicted 4,300 s, +23%).
SMPI_SECONDS_PER_EVENT_EAGER = 1.6e-5
SMPI_SECONDS_PER_EVENT_RANK_EAGER = 1.9e-10
#: With any other allreduce (SimGrid's linear reduce: quadratic in the ranks), per event times ranks;
#: fitted to 19.5 s for 445,440 events at 4,096 ranks, stock replay.
SMPI_SECONDS_PER_EVENT_RANK = 1.07e-8
#: waitlab's own cost per event (generation, trace, parsing, waits, results folder): 3.3-3.7 us measured
#: at 4,096 and 16,384 ranks x 20 steps.
WAITLAB_SECONDS_PER_EVENT = 4e-6


@dataclass(frozen=True)
class StepLaw:
    """SMPI seconds of each step after the first, fitted to measured runs (not a machine model: an estimate).

    ``seconds(ranks) = at_4096 * (ranks / 4096) ** exponent``, from ``min_ranks`` ranks on.
    """

    at_4096: float
    exponent: float
    min_ranks: int
    source: str

    def seconds(self, ranks: int) -> float:
        return self.at_4096 * (ranks / 4096) ** self.exponent if ranks >= self.min_ranks else 0.0


#: Applications whose SMPI cost grows faster than their events, by (application kind, platform): fitted from
#: measurement (benchmarks/bench_estimate.py; docs/performance.md, "The estimate before a large run").  The 2-D
#: stencil on Sunway TaihuLight: its first step costs what the event model says within 3-4x (its 64 KiB halo
#: messages start together and end together), each later step starts its halos staggered by the allreduce before
#: it, and every start and end re-solves the sharing of all the flows in flight.  CPU seconds of the SMPI process,
#: 2 steps minus 1 step: 21.8 s at 2,048 ranks, 90.9 s at 4,096, 280.1 s at 8,192 (290.0 s minus 9.9 s for the
#: first step, interpolated between 4.7 s at 4,096 and 20.8 s at 16,384), 783.4 s at 16,384 (804.2 - 20.8); least
#: squares of log seconds on log ranks: 79.8 s at 4,096 and exponent 1.71 (24.4, 79.8, 261 and 854 s at the four
#: sizes; the local exponent falls from 2.06 to 1.48, so the law is high by ~10% at 16,384 ranks and more beyond).
#: A 3-step run at 2,048 ranks (43.6 s, 20.8 s per later step) supports one term per step after the first.  1,024
#: ranks (one supernode) cost 2.1 s, below the law, so it applies from 2,048 ranks on.
MEASURED_STEP_LAWS: dict[tuple[str, str], StepLaw] = {
    ("stencil", "sunway_taihulight"): StepLaw(79.8, 1.71, 2048, "fitted to measured stencil runs on "
                                              "sunway_taihulight: each step after the first ~ ranks^1.71"),
}


@dataclass(frozen=True)
class Estimate:
    """What a run is expected to need.

    ``memory_bytes`` is the larger of SMPI's peak plus what the Python process holds meanwhile
    (``python_during_smpi_bytes``) and the Python process's own peak (``python_memory_bytes``).
    """

    ranks: int
    events: int
    exact_events: bool
    smpi_memory_bytes: int
    python_memory_bytes: int
    scratch_bytes: int
    seconds: float
    python_during_smpi_bytes: int = 0
    #: the time model's SMPI seconds (before any correction learned from measured runs)
    replay_seconds: float = 0.0
    #: how the SMPI time was corrected from measured runs (:mod:`waitlab.experiments.estimate_history`)
    learned: str = ""

    @property
    def memory_bytes(self) -> int:
        return max(self.smpi_memory_bytes + self.python_during_smpi_bytes, self.python_memory_bytes)

    def describe(self) -> str:
        """One line for the user: ranks, events, memory, scratch, predicted time."""
        approx = "" if self.exact_events else "about "
        return (f"{self.ranks:,} ranks, {approx}{self.events:,} events: memory ~{_gib(self.memory_bytes)} "
                f"(SMPI {_gib(self.smpi_memory_bytes)} with waitlab {_gib(self.python_during_smpi_bytes)} beside it, "
                f"then waitlab {_gib(self.python_memory_bytes)}), "
                f"scratch ~{_gib(self.scratch_bytes)}, predicted {_duration(self.seconds)}"
                + (f" ({self.learned})" if self.learned else ""))

    def problems(self, budget: Budget | None = None) -> list[str]:
        """What does not fit ``budget`` (this machine's when ``None``), one sentence each."""
        b = budget or Budget.of_machine()
        out = []
        if b.memory_bytes is not None and self.memory_bytes > b.memory_bytes:
            out.append(f"needs ~{_gib(self.memory_bytes)} of memory, {_gib(b.memory_bytes)} available "
                       "(fewer ranks or steps, or a machine with more memory)")
        if b.scratch_bytes is not None and self.scratch_bytes > b.scratch_bytes:
            out.append(f"needs ~{_gib(self.scratch_bytes)} of scratch space, {_gib(b.scratch_bytes)} free in "
                       f"{b.scratch_dir} (set TMPDIR to a larger disk)")
        if b.seconds is not None and self.seconds > b.seconds:
            out.append(f"predicted to take {_duration(self.seconds)}, over the limit of {_duration(b.seconds)} "
                       "(raise [simulation] timeout or simulate fewer ranks or steps)")
        return out

    def check(self, budget: Budget | None = None) -> Estimate:
        """Raise :class:`EnvironmentProblem` naming every budget the run exceeds; else return ``self``."""
        problems = self.problems(budget)
        if problems:
            raise EnvironmentProblem(f"this run would not fit: {self.describe()}; it " + "; it ".join(problems))
        return self


@dataclass(frozen=True)
class Budget:
    """Limits to check an estimate against (``None``: no limit)."""

    memory_bytes: int | None = None
    scratch_bytes: int | None = None
    seconds: float | None = None
    scratch_dir: Path = Path("/tmp")

    @classmethod
    def of_machine(cls, scratch_dir: Path | None = None, seconds: float | None = None) -> Budget:
        """Memory available now (``MemAvailable``) and free space where temporary files go."""
        folder = Path(scratch_dir or os.environ.get("TMPDIR") or "/tmp")
        return cls(memory_available(), shutil.disk_usage(folder).free if folder.exists() else None, seconds, folder)


def memory_available() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes (``None`` when unreadable)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def count_events(prep: Prepared) -> tuple[int, bool]:
    """Replayed actions of the scenario (operations + init/finalize per rank) and whether counted exactly.

    The source's own operations: perturbations (noise, instrumentation) add events not counted here.
    """
    sc = prep.scenario
    ranks = sc.ranks
    if ranks <= EXACT_UP_TO:
        return _ops_of(prep) + 2 * ranks, True
    small = 1024
    try:
        small_sc = sc.with_values({"scenario.ranks": small})
        probe = Prepared(small_sc, prep.model, prep.platform, source_for(small_sc), prep.perturbation)
        per_rank = _ops_of(probe) / small
    except WaitlabError:  # a scenario that cannot shrink (imbalance ranks beyond 1,024) is counted in full
        return _ops_of(prep) + 2 * ranks, True
    return round(per_rank * ranks) + 2 * ranks, False


def _ops_of(prep: Prepared) -> int:
    return len(prep.source.operations(prep.platform, prep.smpi_config(), Path(os.devnull)))


def estimate(prep: Prepared) -> Estimate:
    """Memory, scratch space and wall time a run of ``prep`` should take (see the module docstring)."""
    ranks = prep.scenario.ranks
    events, exact = count_events(prep)
    smpi = SMPI_BASE_BYTES + SMPI_RANK_BYTES * ranks + SMPI_EVENT_BYTES * events
    python = PYTHON_BASE_BYTES + PYTHON_EVENT_BYTES * events
    spilled = events - 2 * ranks >= SPILL_MIN_OPS  # operations: the events without init and finalize
    during = PYTHON_BASE_BYTES + events * (PYTHON_DURING_SMPI_SPILLED_EVENT_BYTES if spilled
                                           else PYTHON_DURING_SMPI_EVENT_BYTES)
    cfg = prep.smpi_config()
    tree = all(cfg.get(k) == v for k, v in TREE_ALLREDUCE.items())
    if tree and EAGER_TRANSFER_KEY in cfg:
        replay = events * (SMPI_SECONDS_PER_EVENT_EAGER + SMPI_SECONDS_PER_EVENT_RANK_EAGER * ranks)
    elif tree:
        replay = events * (SMPI_SECONDS_PER_EVENT + SMPI_SECONDS_PER_EVENT_RANK_TREE * ranks)
    else:
        replay = SMPI_SECONDS_PER_EVENT_RANK * events * ranks
    law = MEASURED_STEP_LAWS.get((prep.scenario.application_kind, prep.scenario.platform.name))
    if law is not None:  # each step after the first, as measured
        replay += law.seconds(ranks) * max(int(getattr(prep.scenario.application, "steps", 1)) - 1, 0)
    seconds = replay + WAITLAB_SECONDS_PER_EVENT * events
    scratch = SCRATCH_EVENT_BYTES * events + (SCRATCH_SPILLED_OP_BYTES * (events - 2 * ranks) if spilled else 0)
    return Estimate(ranks, events, exact, smpi, python, scratch, seconds, during, replay)


def learn(est: Estimate, prep: Prepared, records: list[dict[str, Any]] | None = None) -> Estimate:
    """``est`` with its SMPI time scaled by what runs of the same application on the same platform measured
    (``records``: default the history in waitlab's cache, :func:`waitlab.experiments.estimate_history.read_history`).
    """
    factor, note = learned_factor(read_history() if records is None else records,
                                  prep.scenario.application_kind, prep.scenario.platform.name, est.ranks)
    if not note:
        return est
    return replace(est, seconds=est.seconds + (factor - 1) * est.replay_seconds, learned=note)


def remember(est: Estimate | None, prep: Prepared, smpi_seconds: float | None) -> None:
    """Keep a measured run for later estimates (runs that were estimated, with a measured SMPI stage)."""
    if est is None or not smpi_seconds or est.replay_seconds <= 0:
        return
    record_run(prep.scenario.application_kind, prep.scenario.platform.name, est.ranks, est.events,
               est.replay_seconds, smpi_seconds)


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= (1 << 30) else f"{n / MiB:.0f} MiB"


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


#: Runs of at least this many ranks are estimated before they start (smaller ones fit any machine here).
PREFLIGHT_RANKS = 4096


def preflight(prep: Prepared, *, say: Callable[[str], None] | None = None, check: bool = True
              ) -> Estimate | None:
    """Before a large run (:data:`PREFLIGHT_RANKS` ranks or more, of a synthetic model or a trace): estimate it,
    tell the user (``say``) and, with ``check``, refuse it when it will not fit this machine.

    Programs are not estimated: counting their operations means running them.
    """
    if prep.scenario.ranks < PREFLIGHT_RANKS or prep.scenario.application_kind == "program":
        return None
    est = learn(estimate(prep), prep)
    if say is not None:
        say(f"estimate: {est.describe()}")
        if prep.scenario.ranks > EXACT_UP_TO and EAGER_TRANSFER_KEY not in prep.smpi_config():
            say(f"hint: beyond {EXACT_UP_TO:,} ranks SimGrid 3.32 spends its time on small messages that wait for "
                f'their receive; [simulation.config] "{EAGER_TRANSFER_KEY}" = "<the eager threshold>" sends them at '
                "once (the eager protocol; docs/performance.md, \"The full machine\")")
    if not check:
        return est
    est.check()
    # the time limit of an SMPI run ([simulation] timeout) is a budget too: a stage predicted past it would be stopped
    smpi_seconds, limit = est.seconds - WAITLAB_SECONDS_PER_EVENT * est.events, prep.scenario.simulation.timeout
    if smpi_seconds > limit:
        raise EnvironmentProblem(f"this run would not fit: {est.describe()}; its SMPI stage is predicted to take "
                                 f"{_duration(smpi_seconds)}, over [simulation] timeout = {limit:g} s (raise "
                                 "[simulation] timeout, or simulate fewer ranks or steps; --no-resource-check runs it "
                                 "anyway)")
    return est
