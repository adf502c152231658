"""Where a run's operations come from: a synthetic model, a captured TI trace, an OTF2 trace of a real run
(e.g. Score-P's), or a real MPI program.

Every source answers two questions the pipeline asks (:class:`Source`):

* :meth:`Source.operations`: the unperturbed operation table, with region names,
  call paths (nested regions) and the cause ledger;
* :meth:`Source.execute`: simulate an operation table (its own, perturbed, or
  with causes removed) on the rendered platform with SMPI, and return the event
  table.

A synthetic model and a trace are replayed by waitlab's replay extension
(:mod:`waitlab.experiments.replay_sources`); a
program runs under SMPI with waitlab's measurement layer, which executes the
local operations of the target table that the program itself does not contain
(perturbations, counterfactual changes).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from waitlab.experiments.programs import program_binary, program_config, run_real_program
from waitlab.experiments.real_params import ProgramParams
from waitlab.experiments.scenario import Scenario
from waitlab.lazy import Deferred
from waitlab.models.ops import OpTable
from waitlab.platforms import RenderedPlatform
from waitlab.simulator.program_run import exit_statuses

if TYPE_CHECKING:
    from waitlab.experiments import recorded as _recorded
    from waitlab.experiments import replay_sources as _replay_sources
    from waitlab.models.columns import Table
else:  # the replayed kinds build the replay's event table (pyarrow), which a program run imports while its SMPI stage
    # goes on (waitlab.experiments.stage): imported for those kinds only, when first used
    _replay_sources = Deferred("waitlab.experiments.replay_sources")
    _recorded = Deferred("waitlab.experiments.recorded")  # it imports this module (Execution)


@dataclass(frozen=True)
class Execution:
    """One SMPI run of an operation table: the operations as run, their event table, and what SMPI said.

    A real program's run leaves its event table to the pipeline (``events`` is ``None``): ``times`` holds each
    operation's enter and exit times, from which :func:`waitlab.experiments.pipeline.finish` builds it
    (:func:`waitlab.simulator.timeline.build_events`) while its operation table is encoded for the results folder.
    This module imports no pyarrow (a program run's way to its SMPI stage, :mod:`waitlab.experiments.stage`): the
    table's type is named for type checkers only.
    """

    ops: OpTable
    events: Table | None
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
    #: messages of fewer bytes never wait for their receive (``None``: the threshold SMPI ran with,
    #: :func:`waitlab.models.analysis.waitstates.eager_threshold`; a recorded run's timestamps decide: 0)
    eager_threshold: int | None = None


class Source(Protocol):
    """What the pipeline needs from the origin of a run's operations."""

    @property
    def kind(self) -> str:
        """``synthetic``, ``trace``, ``otf2``, ``program`` or ``recorded``."""
        ...

    def operations(self, platform: RenderedPlatform, settings: Mapping[str, str], work: Path) -> OpTable:
        """The unperturbed operations (regions, call paths and ledger included)."""
        ...

    def execute(self, ops: OpTable | None, platform: RenderedPlatform, settings: Mapping[str, str], work: Path,
                flags: Sequence[str], on_start: Callable[[], object] | None = None) -> Execution:
        """Simulate ``ops`` (``None``: the source's own operations) on ``platform`` with SMPI; ``on_start`` is called
        once as soon as SMPI runs (:func:`waitlab.simulator.smpi.run_smpirun`)."""
        ...


def compute_speed(scenario: Scenario, platform: RenderedPlatform) -> float:
    """Flop/s that converts the application's compute seconds into flops.

    By default the platform's own core speed, so a compute of X seconds takes exactly X seconds on any
    platform.  With ``[simulation] reference_core_speed`` the seconds are those of that reference core,
    and a faster or slower platform computes proportionally faster or slower (what-if on another machine).
    """
    ref = scenario.simulation.reference_core_speed
    return float(ref) if ref is not None else float(platform.core_speed)


def replay_what(scenario: Scenario) -> str:
    """How a replay of ``scenario`` is named in SimGrid's errors."""
    return f"SMPI replay of scenario '{scenario.name}' ({scenario.source})"


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
                flags: Sequence[str], on_start: Callable[[], object] | None = None) -> Execution:
        sc = self.scenario
        t = time.perf_counter()
        binary = program_binary(sc)
        built = time.perf_counter() - t
        m = run_real_program(sc, platform, work, settings, target=ops, extra_flags=flags, binary=binary,
                             on_start=on_start)
        if ops is None:
            while len(_PROGRAM_OPS) >= 4:
                _PROGRAM_OPS.pop(next(iter(_PROGRAM_OPS)))
            _PROGRAM_OPS[sc.hash()] = m.ops
        p: ProgramParams = sc.application
        statuses = exit_statuses(m.output)  # accepted by [application] exit_codes: said in the results
        return Execution(m.ops, None, m.output, program_config(sc, platform, settings),
                         {"build": built, "smpi": m.wall_seconds},
                         {"program": str(binary), "computation": p.computation,
                          **({"exit_statuses": {str(r): c for r, c in sorted(statuses.items())}} if statuses else {})},
                         m.files, m.rerun, (m.t_enter, m.t_exit))


def source_for(scenario: Scenario) -> Source:
    """The source of a scenario's operations, by its application kind."""
    if scenario.application_kind == "program":
        return ProgramSource(scenario)
    if scenario.application_kind == "recorded":
        return _recorded.RecordedSource(scenario)
    return _replay_sources.replayed_source(scenario)
