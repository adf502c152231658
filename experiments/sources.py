"""Where a run's operations come from: a synthetic model, a captured TI trace, an OTF2 trace of a real run
(e.g. Score-P's), or a real MPI program.

Every source answers two questions the pipeline asks (:class:`Source`):

* :meth:`Source.operations`: the unperturbed operation table, with region names,
  call paths (nested regions) and the cause ledger;
* :meth:`Source.execute`: simulate an operation table (its own, perturbed, or
  with causes removed) on the rendered platform with SMPI, and return the event
  table.

A synthetic model and a trace are replayed by waitlab's replay extension; a
program runs under SMPI with waitlab's measurement layer, which executes the
local operations of the target table that the program itself does not contain
(perturbations, counterfactual changes).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.physics_limits import largest_node_memory
from waitlab.experiments.programs import program_binary, program_config, run_real_program
from waitlab.experiments.real_params import Otf2Params, ProgramParams, TraceParams
from waitlab.experiments.scenario import Scenario
from waitlab.models.analysis.trace_check import first_mismatch
from waitlab.models.apps.registry import generate
from waitlab.models.ops import OpTable
from waitlab.models.otf2_ops import Otf2Unreplayable, records_to_ops
from waitlab.models.vocabulary import BYTES_ACTIONS
from waitlab.platforms import RenderedPlatform
from waitlab.platforms.machine import replay_settings
from waitlab.simulator.otf2_import import read_otf2
from waitlab.simulator.replay import replay_ops
from waitlab.simulator.spill import spill_ops
from waitlab.simulator.ti_trace import ParsedTrace, parse_ti_trace
from waitlab.simulator.timeline import build_events


@dataclass(frozen=True)
class Execution:
    """One SMPI run of an operation table: the operations as run, their event table, and what SMPI said.

    A real program's run leaves its event table to the pipeline (``events`` is ``None``): ``times`` holds each
    operation's enter and exit times, from which :func:`waitlab.experiments.pipeline.finish` builds it
    (:func:`waitlab.simulator.timeline.build_events`) while its operation table is encoded for the results folder.
    """

    ops: OpTable
    events: pd.DataFrame | None
    output: str
    smpi_config: dict[str, str]
    stage_seconds: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: files a real program wrote into its working folder (relative path -> content)
    files: dict[str, bytes] = field(default_factory=dict)
    #: what re-runs a real program's run with stock SimGrid (file name -> content; ``program/rerun/``)
    rerun: dict[str, bytes] = field(default_factory=dict)
    #: each operation's enter and exit times when ``events`` is ``None``
    times: tuple[np.ndarray, np.ndarray] | None = None

    def event_table(self) -> pd.DataFrame:
        """The event table: ``events``, or the one built from ``times``."""
        if self.events is not None:
            return self.events
        if self.times is None:
            raise ValueError("an execution without events has the operations' times")
        return build_events(self.ops, *self.times)


class Source(Protocol):
    """What the pipeline needs from the origin of a run's operations."""

    @property
    def kind(self) -> str:
        """``synthetic``, ``trace``, ``otf2`` or ``program``."""
        ...

    def operations(self, platform: RenderedPlatform, settings: Mapping[str, str], work: Path) -> OpTable:
        """The unperturbed operations (regions, call paths and ledger included)."""
        ...

    def execute(self, ops: OpTable | None, platform: RenderedPlatform, settings: Mapping[str, str], work: Path,
                flags: Sequence[str]) -> Execution:
        """Simulate ``ops`` (``None``: the source's own operations) on ``platform`` with SMPI."""
        ...


def compute_speed(scenario: Scenario, platform: RenderedPlatform) -> float:
    """Flop/s that converts the application's compute seconds into flops.

    By default the platform's own core speed, so a compute of X seconds takes exactly X seconds on any
    platform.  With ``[simulation] reference_core_speed`` the seconds are those of that reference core,
    and a faster or slower platform computes proportionally faster or slower (what-if on another machine).
    """
    ref = scenario.simulation.reference_core_speed
    return float(ref) if ref is not None else float(platform.core_speed)


def _what(scenario: Scenario) -> str:
    return f"SMPI replay of scenario '{scenario.name}' ({scenario.source})"


@dataclass(frozen=True)
class SyntheticSource:
    """An application model of :mod:`waitlab.models.apps` (pure: operations in, no SMPI needed to make them)."""

    scenario: Scenario
    kind: str = "synthetic"

    def operations(self, platform: RenderedPlatform, settings: Mapping[str, str], work: Path) -> OpTable:
        return generate(self.scenario.application, self.scenario.ranks, self.scenario.seed)

    def execute(self, ops: OpTable | None, platform: RenderedPlatform, settings: Mapping[str, str], work: Path,
                flags: Sequence[str]) -> Execution:
        sc = self.scenario
        t = time.perf_counter()
        if ops is None:  # a large table lives memory-mapped from here on (simulator/spill.py)
            ops = spill_ops(self.operations(platform, settings, work), work)
        gen = time.perf_counter() - t
        xml, hostfile = platform.write(work)
        rep = replay_ops(ops, xml, hostfile, compute_speed(sc, platform), config=replay_settings(settings),
                         extra_flags=list(flags), timeout=sc.simulation.timeout, work=work, what=_what(sc))
        return Execution(ops, rep.events, rep.output, dict(settings), {"generate": gen, **rep.stage_seconds})


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
    problem = first_mismatch(ops)  # before SMPI: SimGrid would crash or hang on these
    if problem is not None:
        raise InputError(path, f"({problem[0]})", problem[1], "fix the trace (or capture it again); waitlab checks "
                         "collectives, message pairs and deadlocks before replaying")
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
                flags: Sequence[str]) -> Execution:
        sc = self.scenario
        t = time.perf_counter()
        parsed = self.parsed(platform)
        ops = parsed.ops if ops is None else ops
        gen = time.perf_counter() - t
        xml, hostfile = platform.write(work)
        rep = replay_ops(ops, xml, hostfile, platform.core_speed, config=replay_settings(settings),
                         extra_flags=list(flags),
                         timeout=sc.simulation.timeout, work=work, vectors=parsed.vectors, what=_what(sc))
        meta = {"trace": sc.application.trace, "flops_per_second": parsed.flops_per_second}
        return Execution(ops, rep.events, rep.output, dict(settings), {"generate": gen, **rep.stage_seconds}, meta)


@lru_cache(maxsize=4)
def _otf2_ops_cached(path: str, digest: str, cpu_ratio: float, n_ranks: int) -> OpTable:
    try:
        ops = records_to_ops(read_otf2(path), cpu_ratio)
    except Otf2Unreplayable as exc:
        raise InputError(path, exc.where, exc.what, exc.fix) from None
    if ops.n_ranks != n_ranks:
        raise InputError(path, "(locations)", f"holds {ops.n_ranks} MPI ranks but the scenario has "
                         f"ranks = {n_ranks}", f"set [scenario] ranks = {ops.n_ranks}")
    problem = first_mismatch(ops)  # before SMPI: SimGrid would crash or hang on these
    if problem is not None:
        raise InputError(path, f"({problem[0]})", problem[1], "the archive is inconsistent (truncated, or a "
                         "communicator or message is missing): record the run again")
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
                flags: Sequence[str]) -> Execution:
        sc = self.scenario
        t = time.perf_counter()
        ops = self.operations(platform, settings, work) if ops is None else ops
        gen = time.perf_counter() - t
        xml, hostfile = platform.write(work)
        rep = replay_ops(ops, xml, hostfile, platform.core_speed, config=replay_settings(settings),
                         extra_flags=list(flags),
                         timeout=sc.simulation.timeout, work=work, what=_what(sc))
        meta = {"trace": sc.application.trace, "cpu_ratio": sc.application.cpu_ratio}
        return Execution(ops, rep.events, rep.output, dict(settings), {"import": gen, **rep.stage_seconds}, meta)


#: Measured operations of the last unperturbed program runs, by scenario hash (a perturbed run starts from them).
_PROGRAM_OPS: dict[str, OpTable] = {}


@dataclass(frozen=True)
class ProgramSource:
    """A real C/C++/Fortran MPI program, run under SMPI with waitlab's measurement layer."""

    scenario: Scenario
    kind: str = "program"

    def operations(self, platform: RenderedPlatform, settings: Mapping[str, str], work: Path) -> OpTable:
        cached = _PROGRAM_OPS.get(self.scenario.hash())
        if cached is not None:
            return cached
        return self.execute(None, platform, settings, work / "base", ()).ops

    def execute(self, ops: OpTable | None, platform: RenderedPlatform, settings: Mapping[str, str], work: Path,
                flags: Sequence[str]) -> Execution:
        sc = self.scenario
        t = time.perf_counter()
        binary = program_binary(sc)
        built = time.perf_counter() - t
        t = time.perf_counter()
        m = run_real_program(sc, platform, work, settings, target=ops, extra_flags=flags)
        smpi = time.perf_counter() - t
        if ops is None:
            while len(_PROGRAM_OPS) >= 4:
                _PROGRAM_OPS.pop(next(iter(_PROGRAM_OPS)))
            _PROGRAM_OPS[sc.hash()] = m.ops
        p: ProgramParams = sc.application
        return Execution(m.ops, None, m.output, program_config(sc, platform, settings),
                         {"build": built, "smpi": smpi},
                         {"program": str(binary), "computation": p.computation}, m.files, m.rerun,
                         (m.t_enter, m.t_exit))


def source_for(scenario: Scenario) -> Source:
    """The source of a scenario's operations, by its application kind."""
    if scenario.application_kind == "program":
        return ProgramSource(scenario)
    if scenario.application_kind == "trace":
        return TraceSource(scenario)
    if scenario.application_kind == "otf2":
        return Otf2Source(scenario)
    return SyntheticSource(scenario)
