"""Simulate one scenario: application model -> TI trace -> SMPI replay -> event table -> wait states.

:func:`simulate` keeps everything in memory (its scratch folder is temporary)
and is what counterfactual re-runs use.  :func:`run_scenario` also writes the
results folder, atomically: results are assembled in a hidden sibling folder
and renamed into place only when complete, so an interrupted or failed run
never leaves a folder that looks finished.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab import __version__
from waitlab.errors import InputError
from waitlab.experiments.scenario import Scenario
from waitlab.models.analysis.summary import summarize
from waitlab.models.analysis.waitstates import wait_states
from waitlab.models.apps.alltoall import smpi_config as smpi_alltoall_setting
from waitlab.models.ops import CAUSE_KINDS, OpTable
from waitlab.simulator.build import simgrid_version
from waitlab.simulator.replay import replay_ops
from waitlab.simulator.timeline import SCHEMA_VERSION

#: Optional hook that perturbs the operations (noise, instrumentation, tracing); set by the perturbation layer.
Perturb = Callable[[Scenario, OpTable, Any], OpTable]


@dataclass(frozen=True)
class RunResult:
    """Everything one simulation produced."""

    scenario: Scenario
    ops: OpTable
    events: pd.DataFrame
    waits: pd.DataFrame
    summary: dict[str, Any]
    metadata: dict[str, Any]
    stage_seconds: dict[str, float] = field(default_factory=dict)
    smpi_output: str = ""

    def ledger(self) -> pd.DataFrame:
        """The cause ledger as a table (rank, region, step, seconds, kind)."""
        led = self.ops.ledger
        names = [*self.ops.names, ""]
        return pd.DataFrame({
            "rank": led.rank, "region": [names[i] for i in led.region.tolist()], "step": led.step,
            "seconds": led.seconds, "kind": [CAUSE_KINDS[k] for k in led.kind.tolist()],
        })  # fmt: skip


def generate_ops(scenario: Scenario) -> OpTable:
    """The application model's operations for a scenario (before perturbation)."""
    if scenario.application_kind in ("program", "trace"):  # real MPI applications
        from waitlab.experiments.programs import real_ops

        return real_ops(scenario)
    from waitlab.models.apps.registry import generate

    return generate(scenario.application, scenario.ranks, scenario.seed)


def render(scenario: Scenario, speed_profiles: Mapping[str, str] | None = None) -> Any:
    """Render the scenario's platform (a :class:`waitlab.platforms.RenderedPlatform`).

    ``speed_profiles`` (host -> SimGrid speed profile body) attaches noise to hosts.
    """
    from waitlab.platforms import load_platform, render_platform

    model = load_platform(scenario.platform.name)
    return render_platform(model, scenario.ranks, ranks_per_node=scenario.platform.ranks_per_node,
                           nodes=scenario.platform.nodes, split_cores=scenario.platform.split_cores,
                           speed_profiles=speed_profiles)


#: SimGrid settings applied to every replay unless the scenario overrides them.  SimGrid 3.32's LMM solver
#: aborts ("Cannot saturate more a constraint that has no active element") when rounding error in a heavily
#: shared link exceeds the default absolute precision 1e-5 (e.g. 256-rank basic_linear alltoall across two
#: leaf switches); 1e-4 completes those runs with identical times on every case we compared (docs/performance.md).
DEFAULT_SMPI_CONFIG: dict[str, str] = {"maxmin/precision": "1e-4"}


def smpi_config(scenario: Scenario) -> dict[str, str]:
    """SimGrid ``--cfg`` settings for the scenario."""
    cfg: dict[str, str] = dict(DEFAULT_SMPI_CONFIG)
    algorithm = scenario.simulation.alltoall
    if algorithm == "default":  # the application may name an SMPI algorithm itself (fft's alltoall_algorithm)
        algorithm = getattr(scenario.application, "alltoall_algorithm", "default")
    setting = smpi_alltoall_setting(algorithm) if algorithm != "default" else None
    if setting is not None:
        key, value = setting.split(":", 1)
        cfg[key] = value
    cfg.update(dict(scenario.simulation.config))
    return cfg


def simulate(scenario: Scenario, ops: OpTable | None = None, *, perturb: Perturb | None = None,
             paje_file: Path | None = None, keep_dir: Path | None = None,
             speed_profiles: Mapping[str, str] | None = None) -> RunResult:
    """Simulate ``scenario`` (or the given operations on its platform) with SMPI.

    Parameters
    ----------
    scenario : Scenario
    ops : OpTable, optional
        Operations to replay instead of the application model's (counterfactual re-runs).
    perturb : callable, optional
        Applied to the operations before writing the trace.
    paje_file : Path, optional
        Also record SMPI's own Paje trace there.
    keep_dir : Path, optional
        Write the trace and platform files there instead of a temporary folder.
    speed_profiles : mapping of str to str, optional
        SimGrid speed profiles per host (system noise, see :mod:`waitlab.models.perturb.noise`).
    """
    if scenario.application_kind in ("program", "trace"):  # real MPI applications
        from waitlab.experiments.programs import simulate_real

        return simulate_real(scenario, ops, perturb=perturb, paje_file=paje_file, keep_dir=keep_dir,
                             speed_profiles=speed_profiles)
    stages: dict[str, float] = {}
    t = time.perf_counter()
    platform = render(scenario, speed_profiles)
    if ops is None:
        ops = generate_ops(scenario)
    if perturb is not None:
        ops = perturb(scenario, ops, platform)
    stages["generate"] = time.perf_counter() - t
    with tempfile.TemporaryDirectory(prefix="waitlab-") as tmp:
        work = keep_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        xml, hostfile = platform.write(work)
        flags = ["-trace", "-trace-file", str(paje_file)] if paje_file is not None else []
        rep = replay_ops(ops, xml, hostfile, compute_speed(scenario, platform),
                         config={**platform.smpi_config, **smpi_config(scenario)}, extra_flags=flags,
                         timeout=scenario.simulation.timeout, work=work,
                         what=f"SMPI replay of scenario '{scenario.name}' ({scenario.source})")
    stages.update(rep.stage_seconds)
    return finish(scenario, platform, ops, rep.events, stages, rep.output)


def compute_speed(scenario: Scenario, platform: Any) -> float:
    """Flop/s that converts the application's compute seconds into flops.

    By default the platform's own core speed, so a compute of X seconds takes exactly X seconds on any
    platform.  With ``[simulation] reference_core_speed`` the seconds are those of that reference core,
    and a faster or slower platform computes proportionally faster or slower (what-if on another machine).
    """
    ref = scenario.simulation.reference_core_speed
    return float(ref) if ref is not None else float(platform.core_speed)


def finish(scenario: Scenario, platform: Any, ops: OpTable, events: pd.DataFrame, stages: dict[str, float],
           output: str, *, smpi_settings: dict[str, str] | None = None,
           extra_meta: dict[str, Any] | None = None) -> RunResult:
    """Wait states, summary and run metadata of a simulated event table: the common end of every run."""
    t = time.perf_counter()
    waits = wait_states(events)
    stages["wait_states"] = time.perf_counter() - t
    summary = summarize(events, waits)
    metadata = {
        "schema_version": SCHEMA_VERSION,
        "waitlab_version": __version__,
        "simgrid_version": simgrid_version(),
        "platform": platform.name,
        "nodes": platform.n_nodes,
        "ranks_per_node": platform.ranks_per_node,
        "ranks": scenario.ranks,
        "seed": scenario.seed,
        "scenario": scenario.name,
        "scenario_hash": scenario.hash(),
        "smpi_config": smpi_settings if smpi_settings is not None else smpi_config(scenario),
        "application_kind": scenario.application_kind,
        **(extra_meta or {}),
    }
    return RunResult(scenario, ops, events, waits, summary, metadata, stages, output)


@contextmanager
def results_folder(out: Path, force: bool = False) -> Iterator[Path]:
    """Yield a hidden sibling folder to fill; rename it to ``out`` only if the block completes.

    A failure or interruption removes it, so no folder is ever left that looks complete.
    """
    out = Path(out)
    if out.exists() and not force:
        raise InputError(str(out), "(output folder)", "already exists", "pass --force to replace it, or use -o NEW")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f".{out.name}.partial-{os.getpid()}"
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir()
    try:
        yield partial
        if out.exists():
            shutil.rmtree(out)
        os.replace(partial, out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def run_scenario(scenario: Scenario, out: Path, *, force: bool = False, png: bool = True,
                 perturb: Perturb | None = None) -> RunResult:
    """Simulate and write the results folder ``out`` (see docs/outputs.md)."""
    from waitlab.experiments.outputs import write_outputs

    with results_folder(out, force) as partial:
        paje = partial / "smpi.paje" if scenario.simulation.paje else None
        result = simulate(scenario, perturb=perturb, paje_file=paje)
        write_outputs(result, partial, png=png)
    return result
