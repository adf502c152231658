"""THE run pipeline: scenario -> source -> perturbation stage -> platform -> SMPI -> events -> wait states.

Every command (run, sweep, diagnose and its counterfactual re-runs, check-c,
capture, reproduce) goes through :func:`prepare` and :func:`simulate_ops`; none
assembles its own path.  :func:`run` is what ``waitlab run`` does: one SMPI run
for an unperturbed scenario; for a perturbed one, the unperturbed run, the
perturbation stage (jitter, instrumentation, buffers, spilling) on its
operations, the measured run with the noise's speed profiles, the noise that
delayed work booked into the ledger, condition C and the wait distortion.

The part up to the end of an SMPI stage (:func:`prepare`, the stage itself) is :mod:`waitlab.experiments.stage`,
which imports no pandas, and neither does this module when imported: the analysis a run needs after its stage
(pyarrow, the event table, wait states, summary) is imported while its first SMPI stage runs (:data:`AFTER_STAGE`),
so a command's imports and SimGrid's simulation overlap instead of adding up.  An unperturbed run's tables are Arrow
tables and it never imports pandas; a perturbed run's study (condition C, its report) does.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from waitlab.errors import InputError
from waitlab.experiments.physics_limits import makespan_problem
from waitlab.experiments.report.notebook import run_html, summary_html
from waitlab.experiments.run_folder import PICTURE_MODULES
from waitlab.experiments.scenario import Scenario
from waitlab.experiments.sources import Execution
from waitlab.experiments.stage import Prepared as Prepared
from waitlab.experiments.stage import execute, link_factors
from waitlab.experiments.stage import prepare as prepare
from waitlab.experiments.stage import smpi_config as smpi_config
from waitlab.experiments.stage import without_links as without_links
from waitlab.lazy import Deferred
from waitlab.models.ops import CODE, OpTable
from waitlab.models.perturb import noise_hits as nh
from waitlab.models.perturb.link import link_ledger
from waitlab.models.perturb.stage import (
    SPILL_KINDS,
    NoiseSetup,
    noise_ledger,
    noise_setup,
    perturb_ops,
    with_ledger_rows,
)
from waitlab.platforms.machine import contention_record
from waitlab.platforms.smpi_factors import calibrate, eager_threshold
from waitlab.simulator.build import simgrid_version
from waitlab.simulator.smpi import laws_acted
from waitlab.simulator.spill import release_free_memory
from waitlab.version import __version__

if TYPE_CHECKING:
    import pandas as pd

    from waitlab.experiments.report import perturbation_report as _report
    from waitlab.experiments.report.perturbation_report import PerturbationResult
    from waitlab.models import columns as _columns
    from waitlab.models.analysis import metrics as _metrics
    from waitlab.models.analysis import summary as _summary
    from waitlab.models.analysis import waitstates as _waitstates
    from waitlab.models.columns import Table
    from waitlab.models.perturb import condition_c as _condition_c
    from waitlab.platforms import placement_table as _placement
    from waitlab.simulator import timeline as _timeline
else:  # the analysis: imported while the first SMPI stage runs (import_after_stage)
    _columns = Deferred("waitlab.models.columns")
    _report = Deferred("waitlab.experiments.report.perturbation_report")
    _metrics = Deferred("waitlab.models.analysis.metrics")
    _summary = Deferred("waitlab.models.analysis.summary")
    _waitstates = Deferred("waitlab.models.analysis.waitstates")
    _condition_c = Deferred("waitlab.models.perturb.condition_c")
    _placement = Deferred("waitlab.platforms.placement_table")
    _timeline = Deferred("waitlab.simulator.timeline")

#: What a run needs after its SMPI stage, imported while the stage runs (:func:`import_after_stage`): the analysis
#: above (pyarrow, not pandas: a run's tables are Arrow tables) and the results folder's writer with its page.  A
#: perturbed run's condition C and report (pandas code) are imported when first used.
AFTER_STAGE = (*(m.__name__ for m in (_columns, _timeline, _waitstates, _summary, _placement, _metrics)),
               "waitlab.experiments.results", PICTURE_MODULES["report.html"])


def import_after_stage() -> None:
    """Import :data:`AFTER_STAGE` (quick once done): :func:`simulate_ops` calls it as soon as SMPI runs."""
    for name in AFTER_STAGE:
        importlib.import_module(name)


@dataclass(frozen=True)
class RunResult:
    """Everything one SMPI run produced.

    Its tables are held as they were made (:data:`waitlab.models.columns.Table`: Arrow tables in a run, so a command
    that only writes them never imports pandas); :attr:`events`, :attr:`waits`, :attr:`budget` and
    :attr:`placement` are their pandas DataFrames, made on first use.
    """

    scenario: Scenario
    ops: OpTable
    event_table: Table
    wait_table: Table
    summary: dict[str, Any]
    metadata: dict[str, Any]
    stage_seconds: dict[str, float] = field(default_factory=dict)
    smpi_output: str = ""
    placement_table: Table | None = None  # rank -> node, supernode, host (platforms.placement_table)
    #: files a real program wrote into its working folder (relative path -> content)
    files: dict[str, bytes] = field(default_factory=dict)
    #: what re-runs a real program's run with stock SimGrid (file name -> content), kept in ``program/rerun/``
    rerun: dict[str, bytes] = field(default_factory=dict)
    #: the per-rank budget of the events and waits (:func:`~waitlab.models.analysis.summary.rank_budget`)
    budget_table: Table | None = field(default=None, repr=False, compare=False)

    @cached_property
    def events(self) -> pd.DataFrame:
        """The event table (docs/event_table.md) as a pandas DataFrame."""
        return _columns.frame(self.event_table)

    @cached_property
    def waits(self) -> pd.DataFrame:
        """The wait states as a pandas DataFrame."""
        return _columns.frame(self.wait_table)

    @cached_property
    def budget(self) -> pd.DataFrame | None:
        """The per-rank time budget as a pandas DataFrame (None when not made)."""
        return None if self.budget_table is None else _columns.frame(self.budget_table)

    @cached_property
    def placement(self) -> pd.DataFrame | None:
        """rank -> node, supernode, host as a pandas DataFrame (None when not recorded)."""
        return None if self.placement_table is None else _columns.frame(self.placement_table)

    def ledger(self) -> pd.DataFrame:
        """The cause ledger as a table (rank, region, step, seconds, kind)."""
        return _metrics.ledger_frame(self.ops)

    def __repr__(self) -> str:  # one line, not the tables (a dataclass's repr prints them: 100 KB at 32 ranks)
        s, w = self.summary, self.wait_table
        wait = float(_columns.values(w, "wait").sum()) if _columns.has(w, "wait") else 0.0
        return (f"RunResult(scenario {self.scenario.name!r}: {s.get('ranks', self.scenario.ranks)} ranks on "
                f"{self.scenario.platform.name}, makespan {float(s.get('makespan', float('nan'))):.6g} s, "
                f"{len(self.event_table):,} events, {len(w):,} wait states, total wait {wait:.6g} s)")

    def _repr_html_(self) -> str:  # a notebook shows the summary, as for a Run
        return summary_html(f"run of {self.scenario.name}", self.summary, self.metadata)


def with_link_ledger(prep: Prepared, res: RunResult) -> RunResult:
    """``res`` with the ledger rows of its degraded links (:func:`waitlab.models.perturb.link.link_ledger`)."""
    factors = link_factors(prep.scenario)
    if not factors:
        return res
    bandwidth = calibrate(prep.model).inter_node.bandwidth  # what the node's link was rendered with
    return replace(res, ops=link_ledger(res.ops, prep.platform.node_of_rank, factors, bandwidth))


def simulate_ops(prep: Prepared, ops: OpTable | None = None, *, speed_profiles: Mapping[str, str] | None = None,
                 paje_file: Path | None = None, keep_dir: Path | None = None) -> RunResult:
    """Simulate ``ops`` (``None``: the source's own operations) with SMPI; the one path to SimGrid.

    Parameters
    ----------
    prep : Prepared
    ops : OpTable, optional
        Operations to simulate instead of the source's (perturbed or counterfactual).
    speed_profiles : mapping of str to str, optional
        SimGrid speed profiles per host (system noise).
    paje_file : Path, optional
        Also record SMPI's own Paje trace there.
    keep_dir : Path, optional
        Keep the trace, platform and log files there instead of a temporary folder.
    """
    return finish(prep, execute(prep, ops, speed_profiles=speed_profiles, paje_file=paje_file, keep_dir=keep_dir,
                                on_start=import_after_stage))


def finish(prep: Prepared, ex: Execution) -> RunResult:
    """Wait states, summary and run metadata of a simulated event table: the common end of every run."""
    stages = dict(ex.stage_seconds)
    sc = prep.scenario
    metadata = {
        "schema_version": _timeline.SCHEMA_VERSION, "waitlab_version": __version__,
        "simgrid_version": simgrid_version(),
        "platform": prep.platform.name, "nodes": prep.platform.n_nodes,
        "ranks_per_node": prep.platform.ranks_per_node, "ranks": sc.ranks, "seed": sc.seed, "scenario": sc.name,
        "scenario_hash": sc.hash(), "smpi_config": ex.smpi_config, "application_kind": sc.application_kind,
        "source": prep.source.kind, "placement": sc.platform.placement,
        "contention": None if prep.recorded else  # a recorded run: no platform model
        {**contention_record(prep.model, sc.simulation.contention), "acted": laws_acted(ex.output)},
        "supernodes_used": len(set(n // prep.platform.leaf_size for n in prep.platform.node_of_rank)), **ex.metadata,
    }  # fmt: skip
    events = ex.events
    if events is None:  # a real program's run: its event table is built here, from each operation's times
        if ex.times is None:
            raise ValueError("an execution without events has the operations' times")
        t = time.perf_counter()
        events = _timeline.build_events(ex.ops, *ex.times)
        stages["parse"] = time.perf_counter() - t
    makespan = float(_columns.values(events, "exit").max()) if len(events) else 0.0
    problem = makespan_problem(sc, makespan, None if prep.recorded else prep.platform.core_speed)
    if problem is not None:  # longer than the simulated time waitlab resolves: refused, nothing written
        raise InputError(sc.source, *problem)
    t = time.perf_counter()
    threshold = ex.eager_threshold if ex.eager_threshold is not None else eager_threshold(ex.smpi_config)
    waits = _waitstates.wait_states(events, threshold)
    stages["wait_states"] = time.perf_counter() - t
    budget = _summary.rank_budget(events, waits, ex.ops.n_ranks)  # ranks without an event too
    summary = _summary.summarize(events, waits, budget)
    plat = prep.platform
    placement = _placement.placement_table(plat.node_of_rank, plat.host_of_rank, plat.leaf_size, arrow=True)
    release_free_memory()  # the wait states' intermediates, before the results folder is written
    return RunResult(sc, ex.ops, events, waits, summary, metadata, stages, ex.output, placement, ex.files,
                     ex.rerun, budget)


@dataclass(frozen=True)
class Run:
    """What ``waitlab run`` produced: the run (the measured one when perturbed) and the perturbation study."""

    result: RunResult
    perturbation: PerturbationResult | None = None

    def _repr_html_(self) -> str:  # a notebook shows the summary
        return run_html(self)

    @property
    def noise_horizon(self) -> float | None:
        """Horizon the noise detours were drawn up to (needed to redraw them for counterfactuals)."""
        return self.perturbation.noise.horizon if self.perturbation is not None else None


def noise_for(prep: Prepared, horizon: float) -> NoiseSetup:
    """The noise detours of a perturbed scenario, drawn deterministically from its seed up to ``horizon``."""
    assert prep.perturbation is not None
    sc = prep.scenario
    return noise_setup(prep.perturbation.noise, prep.facts, sc.seed, horizon, sc.source)


def simulate(scenario: Scenario, ops: OpTable | None = None, *,
             speed_profiles: Mapping[str, str] | None = None) -> RunResult:
    """One SMPI run of ``scenario`` (or of ``ops`` on its platform): :func:`prepare` + :func:`simulate_ops`."""
    return simulate_ops(prepare(scenario), ops, speed_profiles=speed_profiles)


def run(scenario: Scenario, *, paje_file: Path | None = None, base: RunResult | None = None,
        ops: OpTable | None = None, prep: Prepared | None = None) -> Run:
    """Simulate a scenario as ``waitlab run`` does (see the module doc).

    ``base`` is the unperturbed run of the same operations when already simulated (studies that compare
    several perturbations of one run pass it to save the unperturbed SMPI run); ``ops`` replaces the
    source's operations (a hand-built case); ``prep`` is the scenario already prepared (:func:`prepare`).
    """
    prep = prep if prep is not None else prepare(scenario)
    cfg = prep.perturbation
    if cfg is None:
        return Run(with_link_ledger(prep, simulate_ops(prep, ops, paje_file=paje_file)))
    stages: dict[str, float] = {}
    t = time.perf_counter()
    if base is None:
        base = simulate_ops(prep, ops)
    stages["unperturbed_run"] = time.perf_counter() - t
    horizon = max(cfg.noise.horizon_factor * max(float(base.summary["makespan"]), 1e-3), 1e-3)
    setup = noise_for(prep, horizon)
    p = perturb_ops(base.ops, cfg, prep.facts, scenario.seed)
    t = time.perf_counter()
    measured = simulate_ops(prep, p.ops, speed_profiles=setup.speed_profiles or None, paje_file=paje_file)
    stages["measured_run"] = time.perf_counter() - t
    ev = measured.events
    hits = nh.NoiseHits(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    detour = np.zeros(len(ev))  # seconds of detour inside every event row: noise, not tracer overhead (condition C)
    if setup.active:  # noise that delayed work -> ledger
        rows = _report.event_op_rows(ev, measured.ops)
        t_enter = np.zeros(len(measured.ops))
        t_exit = np.zeros(len(measured.ops))
        t_enter[rows] = ev["enter"].to_numpy()
        t_exit[rows] = ev["exit"].to_numpy()
        leaves = measured.ops.code == CODE["leave"]
        t_enter[leaves] = t_exit[leaves] = np.nan
        led, hits = noise_ledger(measured.ops, t_enter, t_exit, setup, prep.facts.core_speed)
        measured = replace(measured, ops=with_ledger_rows(measured.ops, led))
        if len(hits):  # the detours' time is the noise's, not the work it stalled: the budget books it so
            detour = _summary.detour_seconds(len(ev), rows, hits.row, hits.seconds)
            budget = _summary.rank_budget(ev, measured.waits, measured.ops.n_ranks, detour)
            measured = replace(measured, budget_table=budget,
                               summary=_summary.summarize(ev, measured.waits, budget))
    measured = with_link_ledger(prep, measured)
    cc = _condition_c.check_condition_c(ev, noise=detour)
    cc_spill = _condition_c.check_condition_c(ev, kinds=SPILL_KINDS, noise=detour)
    mkeys = _condition_c.original_keys(ev, p.origin_seq(base.ops)[_report.event_op_rows(ev, measured.ops)])
    dist = _condition_c.wait_distortion(measured.waits, mkeys, base.waits, _condition_c.original_keys(base.events))
    report = _report.perturbation_report(scenario.name, cfg, base, measured, p, setup, hits, cc, cc_spill, dist)
    measured = replace(measured, stage_seconds={**measured.stage_seconds, **stages,
                                                **{f"perturb_{k}": v for k, v in p.seconds.items()}},
                       metadata={**measured.metadata, "noise_horizon": horizon})
    pres = _report.PerturbationResult(cfg, base, measured, p, setup, hits, cc, cc_spill, dist, report)
    return Run(measured, pres)


def rerun(scenario: Scenario, ops: OpTable, speed_profiles: Mapping[str, str] | None) -> dict[str, Any]:
    """Wait metrics of ``scenario`` with operations ``ops`` (a counterfactual re-run; picklable for executors)."""
    res = simulate_ops(prepare(scenario), ops, speed_profiles=speed_profiles)
    return _metrics.wait_metrics(res.events, res.waits)
