"""The replayed sources of a run's operations: a synthetic model, a captured TI trace, an OTF2 trace of a real run
(:mod:`waitlab.experiments.sources` has the protocol and the program source).  Each simulates its operations with
waitlab's replay extension, whose event table is a pandas table (pandas is imported while SMPI runs; a trace's
check and the OTF2 reader, which use it before, are imported by those kinds only).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from waitlab.errors import InputError
from waitlab.experiments.physics_limits import largest_node_memory
from waitlab.experiments.real_params import Otf2Params, TraceParams
from waitlab.experiments.scenario import Scenario
from waitlab.experiments.sources import Execution, Source, compute_speed, replay_what
from waitlab.lazy import Deferred
from waitlab.models.apps.registry import generate
from waitlab.models.ops import OpTable
from waitlab.models.otf2_ops import Otf2Unreplayable, records_to_ops
from waitlab.models.vocabulary import BYTES_ACTIONS
from waitlab.platforms import RenderedPlatform
from waitlab.platforms.machine import replay_settings
from waitlab.simulator.replay import replay_ops
from waitlab.simulator.spill import spill_ops
from waitlab.simulator.ti_trace import ParsedTrace, parse_ti_trace

if TYPE_CHECKING:
    from waitlab.models.analysis import trace_check as _trace_check
    from waitlab.simulator import otf2_import as _otf2_import
else:  # they import pandas: the kinds that read a trace use them before SMPI, a synthetic model does not
    _trace_check = Deferred("waitlab.models.analysis.trace_check")
    _otf2_import = Deferred("waitlab.simulator.otf2_import")


@dataclass(frozen=True)
class SyntheticSource:
    """An application model of :mod:`waitlab.models.apps` (pure: operations in, no SMPI needed to make them)."""

    scenario: Scenario
    kind: str = "synthetic"

    def operations(self, platform: RenderedPlatform, settings: Mapping[str, str], work: Path) -> OpTable:
        return generate(self.scenario.application, self.scenario.ranks, self.scenario.seed)

    def execute(self, ops: OpTable | None, platform: RenderedPlatform, settings: Mapping[str, str], work: Path,
                flags: Sequence[str], on_start: Callable[[], object] | None = None) -> Execution:
        sc = self.scenario
        t = time.perf_counter()
        if ops is None:  # a large table lives memory-mapped from here on (simulator/spill.py)
            ops = spill_ops(self.operations(platform, settings, work), work)
        gen = time.perf_counter() - t
        xml, hostfile = platform.write(work)
        rep = replay_ops(ops, xml, hostfile, compute_speed(sc, platform), config=replay_settings(settings),
                         extra_flags=list(flags), timeout=sc.simulation.timeout, work=work, what=replay_what(sc),
                         on_start=on_start)
        return Execution(ops, rep.events, rep.output, dict(settings), {"generate": gen, **rep.stage_seconds})


def _refuse_mismatch(path: str, ops: OpTable, fix: str) -> None:
    """Refuse a trace whose collectives, message pairs or waits do not match, before SMPI (which would crash or hang
    on them): the error names the first mismatch and ``fix``."""
    problem = _trace_check.first_mismatch(ops)
    if problem is not None:
        raise InputError(path, f"({problem[0]})", problem[1], fix)


@lru_cache(maxsize=8)
def _parse_cached(path: str, digest: str, fps: float, n_ranks: int) -> ParsedTrace:
    parsed = parse_ti_trace(Path(path), flops_per_second=fps, n_ranks=n_ranks)
    ops = parsed.ops
    moved = ops.value[ops.mask(BYTES_ACTIONS)]
    if moved.size and moved.max() > largest_node_memory():
        i = int(np.flatnonzero(ops.mask(BYTES_ACTIONS) & (ops.value == moved.max()))[0])
        raise InputError(path, f"rank {int(ops.rank[i])}, operation {int(ops.seq[i])}", f"a message of "
                         f"{moved.max():g} bytes is larger than the memory of any platform's node "
                         f"({largest_node_memory():g} bytes)", "check the counts and datatypes of the trace")
    _refuse_mismatch(path, ops, "fix the trace (or capture it again); waitlab checks collectives, message pairs and "
                     "deadlocks before replaying")
    return parsed


@dataclass(frozen=True)
class TraceSource:
    """A time-independent trace (captured by ``waitlab capture``, ``smpirun -trace-ti`` or converted)."""

    scenario: Scenario
    kind: str = "trace"

    def parsed(self, platform: RenderedPlatform) -> ParsedTrace:
        """The trace as operations (cached by path, file digest and speed)."""
        p: TraceParams = self.scenario.application
        fps = p.flops_per_second or platform.core_speed
        return _parse_cached(p.trace, p.digest, float(fps), self.scenario.ranks)

    def operations(self, platform: RenderedPlatform, settings: Mapping[str, str], work: Path) -> OpTable:
        return self.parsed(platform).ops

    def execute(self, ops: OpTable | None, platform: RenderedPlatform, settings: Mapping[str, str], work: Path,
                flags: Sequence[str], on_start: Callable[[], object] | None = None) -> Execution:
        sc = self.scenario
        t = time.perf_counter()
        parsed = self.parsed(platform)
        ops = parsed.ops if ops is None else ops
        gen = time.perf_counter() - t
        xml, hostfile = platform.write(work)
        rep = replay_ops(ops, xml, hostfile, platform.core_speed, config=replay_settings(settings),
                         extra_flags=list(flags),
                         timeout=sc.simulation.timeout, work=work, vectors=parsed.vectors, what=replay_what(sc),
                         on_start=on_start)
        meta = {"trace": sc.application.trace, "flops_per_second": parsed.flops_per_second}
        return Execution(ops, rep.events, rep.output, dict(settings), {"generate": gen, **rep.stage_seconds}, meta)


@lru_cache(maxsize=4)
def _otf2_ops_cached(path: str, digest: str, cpu_ratio: float, n_ranks: int) -> OpTable:
    try:
        ops = records_to_ops(_otf2_import.read_otf2(path), cpu_ratio)
    except Otf2Unreplayable as exc:
        raise InputError(path, exc.where, exc.what, exc.fix) from None
    if ops.n_ranks != n_ranks:
        raise InputError(path, "(locations)", f"holds {ops.n_ranks} MPI ranks but the scenario has "
                         f"ranks = {n_ranks}", f"set [scenario] ranks = {ops.n_ranks}")
    _refuse_mismatch(path, ops, "the archive is inconsistent (truncated, or a communicator or message is missing): "
                     "record the run again")
    return ops


@dataclass(frozen=True)
class Otf2Source:
    """An OTF2 trace of a real run (e.g. Score-P's): its MPI calls replayed, the time between them as compute
    scaled by ``cpu_ratio`` (:mod:`waitlab.models.otf2_ops`)."""

    scenario: Scenario
    kind: str = "otf2"

    def operations(self, platform: RenderedPlatform, settings: Mapping[str, str], work: Path) -> OpTable:
        p: Otf2Params = self.scenario.application
        return _otf2_ops_cached(p.trace, p.digest, float(p.cpu_ratio), self.scenario.ranks)

    def execute(self, ops: OpTable | None, platform: RenderedPlatform, settings: Mapping[str, str], work: Path,
                flags: Sequence[str], on_start: Callable[[], object] | None = None) -> Execution:
        sc = self.scenario
        t = time.perf_counter()
        ops = self.operations(platform, settings, work) if ops is None else ops
        gen = time.perf_counter() - t
        xml, hostfile = platform.write(work)
        rep = replay_ops(ops, xml, hostfile, platform.core_speed, config=replay_settings(settings),
                         extra_flags=list(flags),
                         timeout=sc.simulation.timeout, work=work, what=replay_what(sc),
                         on_start=on_start)
        meta = {"trace": sc.application.trace, "cpu_ratio": sc.application.cpu_ratio}
        return Execution(ops, rep.events, rep.output, dict(settings), {"import": gen, **rep.stage_seconds}, meta)


def replayed_source(scenario: Scenario) -> Source:
    """The source of a scenario whose operations are replayed: ``trace``, ``otf2`` or a synthetic model."""
    if scenario.application_kind == "trace":
        return TraceSource(scenario)
    if scenario.application_kind == "otf2":
        return Otf2Source(scenario)
    return SyntheticSource(scenario)
