"""A scenario prepared for SimGrid, and its SMPI stage: the part of :mod:`waitlab.experiments.pipeline` before SMPI's
event table exists.

:func:`prepare` loads and renders the platform once and picks the source; :func:`execute` runs the SMPI stage and
returns its :class:`~waitlab.experiments.sources.Execution`; :func:`waitlab.experiments.pipeline.finish` turns that
into the event table, wait states and summary.  On a program's way nothing here imports pandas, pyarrow or the
analysis models (a replayed source's module does: its replay builds a pandas event table): a ``waitlab run`` from a
shell imports those after its SMPI stage, when first used (docs/performance.md), and an import-linter contract and
``tests/test_light_path.py`` check that this stays so.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from waitlab.errors import InputError
from waitlab.experiments.perturbation import perturbation_config, platform_facts
from waitlab.experiments.physics_limits import buffer_problem, is_platform_path, tracing_problem
from waitlab.experiments.real_params import REAL_KINDS, RECORDED, real_params
from waitlab.experiments.scenario import Scenario, noise_file_digest, params_to_toml
from waitlab.experiments.sources import Execution, Source, source_for
from waitlab.lazy import Deferred
from waitlab.models.ops import OpTable
from waitlab.models.perturb.stage import PerturbationConfig, PlatformFacts
from waitlab.platforms import PlatformModel, RenderedPlatform, load_platform, render_platform
from waitlab.platforms.degraded import degrade_links
from waitlab.platforms.machine import alltoall_settings, machine_settings
from waitlab.platforms.model import read_platform_file
from waitlab.simulator.settings_check import check_settings

if TYPE_CHECKING:
    from waitlab.experiments import recorded as _recorded
else:  # the OTF2 reader imports pandas, which a program run's way to SMPI does not: imported for that kind only
    _recorded = Deferred("waitlab.experiments.recorded")


@dataclass(frozen=True)
class Prepared:
    """A scenario ready to simulate: its platform model and rendering (once), source and perturbation stage.

    A recorded run (``kind = "recorded"``, :mod:`waitlab.experiments.recorded`) has no platform model
    (``machine`` is ``None``) and its ``platform`` says where its ranks ran; its stage reads the archive.
    """

    scenario: Scenario
    machine: PlatformModel | None
    platform: RenderedPlatform
    source: Source
    perturbation: PerturbationConfig | None

    @property
    def recorded(self) -> bool:
        """Whether the run is read as recorded (no platform model, no SMPI stage)."""
        return self.machine is None

    @property
    def model(self) -> PlatformModel:
        """The platform model (a recorded run has none: an error naming the scenario)."""
        if self.machine is None:
            raise InputError(self.scenario.source, "application.kind", "a recorded run has no platform model: "
                             "nothing in it can be simulated", 'replay the trace on a platform with kind = "otf2"')
        return self.machine

    def smpi_config(self) -> dict[str, str]:
        """SimGrid ``--cfg`` settings: the machine model (:func:`waitlab.platforms.machine.machine_settings`:
        calibration, send-order cost, allreduce, solver precision, contention laws), the alltoall choice, then
        the scenario's own (later ones win)."""
        sim = self.scenario.simulation
        machine = machine_settings(self.model, self.platform, contention=sim.contention,
                                   solver_precision=sim.solver_precision, timing_precision=sim.timing_precision)
        return {**machine, **smpi_config(self.scenario)}

    @cached_property
    def facts(self) -> PlatformFacts:
        """What the perturbation models need to know about the platform (built once)."""
        return platform_facts(self.model, self.platform)

    def with_profiles(self, speed_profiles: Mapping[str, str] | None) -> RenderedPlatform:
        """The platform with SimGrid speed profiles (system noise) attached to hosts."""
        if not speed_profiles:
            return self.platform
        return _render(self.scenario, self.model, speed_profiles)


def smpi_config(scenario: Scenario) -> dict[str, str]:
    """SimGrid ``--cfg`` settings of a scenario itself: its alltoall choice and its ``[simulation] config``."""
    cfg: dict[str, str] = {}
    algorithm = scenario.simulation.alltoall
    if algorithm == "default":  # the application may name an SMPI algorithm itself (fft's alltoall_algorithm)
        algorithm = getattr(scenario.application, "alltoall_algorithm", "default")
    if algorithm != "default":
        cfg.update(alltoall_settings(algorithm))
    cfg.update(dict(scenario.simulation.config_pairs()))
    return cfg


def _render(scenario: Scenario, model: PlatformModel,
            speed_profiles: Mapping[str, str] | None = None) -> RenderedPlatform:
    pl = scenario.platform
    try:
        rendered = render_platform(model, scenario.ranks, ranks_per_node=pl.ranks_per_node, nodes=pl.nodes,
                                   split_cores=pl.split_cores, speed_profiles=speed_profiles,
                                   placement=pl.placement_rule())
        return degrade_links(rendered, model, link_factors(scenario), scenario.source)
    except InputError as exc:  # a placement or layout that does not fit: name the scenario file and its key
        if exc.field.startswith("platform.") and exc.file == "platform":
            raise InputError(scenario.source, exc.field, exc.problem, exc.fix) from None
        if exc.file == model.name and exc.field in ("ranks_per_node", "nodes", "n_ranks"):
            key = {"ranks_per_node": "platform.ranks_per_node", "n_ranks": "scenario.ranks",
                   "nodes": "platform.nodes" if pl.nodes is not None else "scenario.ranks"}[exc.field]
            raise InputError(scenario.source, key, exc.problem, exc.fix) from None
        raise


def link_factors(scenario: Scenario) -> dict[int, float]:
    """Node -> bandwidth factor of the scenario's degraded links (``[[platform.degraded_link]]``)."""
    return {d.node: d.bandwidth_factor for d in scenario.platform.degraded_link or ()}


def without_links(scenario: Scenario, nodes: Iterable[int]) -> Scenario:
    """``scenario`` with the degraded links of ``nodes`` restored (a counterfactual of cause kind ``link``)."""
    drop = set(nodes)
    keep = tuple(d for d in scenario.platform.degraded_link or () if d.node not in drop)
    return replace(scenario, platform=scenario.platform.model_copy(update={"degraded_link": keep or None}))


def prepare(scenario: Scenario) -> Prepared:
    """Load and render the platform once, pick the source, build the perturbation stage.

    A platform file is parsed from the bytes the scenario read when it was loaded (:class:`~waitlab.experiments
    .scenario.InputFiles`), never read again: the prepared scenario, whose hash the run records, holds exactly the
    bytes simulated.  A noise signature file, read here by the perturbation stage, must still be the one the
    scenario's hash names (:func:`check_noise_file`).
    """
    if scenario.application_kind == RECORDED:  # read, not simulated: where the ranks ran, no platform model
        source = _recorded.RecordedSource(scenario)
        return Prepared(scenario, None, _recorded.recorded_platform(source.recording()), source, None)
    check_settings(dict(scenario.simulation.config_pairs()), scenario.source)  # before the run, in one line
    scenario, model = platform_model(scenario)
    rendered = _render(scenario, model)
    problem = buffer_problem(scenario.application, rendered.node_of_rank, model.node.memory, model.name)
    if problem is not None:  # a collective's buffers beyond a node's memory: SMPI's replay would abort
        raise InputError(scenario.source, *problem)
    problem = tracing_problem(scenario.tracing, model.node.memory, model.name)
    if problem is not None:  # trace memory or buffer larger than a node: it would never fill
        raise InputError(scenario.source, *problem)
    perturbation = perturbation_config(scenario)
    check_noise_file(scenario)
    return Prepared(scenario, model, rendered, source_for(scenario), perturbation)


def platform_model(scenario: Scenario) -> tuple[Scenario, PlatformModel]:
    """The scenario's platform model, parsed from the platform file's bytes the scenario holds; a scenario that
    holds none (the file could not be read when it was loaded) reads the file once now and is returned with those
    bytes, so that its hash names them."""
    name = scenario.platform.name
    if not is_platform_path(name):
        return scenario, load_platform(name)
    raw = scenario.platform_bytes()
    if raw is None:
        raw = read_platform_file(name)
        scenario = scenario.with_platform_bytes(raw)
    return scenario, load_platform(name, content=raw)


#: What a run whose input files changed while it read them says to do.
_AGAIN = ("run it again once the files are saved (a sweep: run the sweep again; it runs the points whose scenario "
          "changed)")


def check_noise_file(scenario: Scenario) -> None:
    """Refuse a run whose noise signature file is no longer the one its scenario read when loaded (its hash names
    that one; the perturbation stage has just read the file)."""
    noise = scenario.noise
    if noise is None or noise.file is None:
        return
    if noise_file_digest(noise.file) != scenario.noise_digest():
        raise InputError(noise.file, "(file)", "changed after the scenario was loaded: the run would simulate a "
                         "noise signature other than the one its scenario hash names", _AGAIN)


def check_application_files(scenario: Scenario) -> None:
    """Refuse a run whose application files (a program's sources, the headers beside them and in its ``-I``
    folders, its inputs; a trace's files) changed since its scenario was loaded: the result would not be what its
    scenario hash names.  Called once a stage has read them (built the program, replayed the trace)."""
    digest = getattr(scenario.application, "digest", "")
    if scenario.application_kind not in REAL_KINDS or not digest:
        return
    base = Path(scenario.source).parent if not scenario.source.startswith("<") else Path.cwd()
    try:
        now = real_params(scenario.application_kind, params_to_toml(scenario.application), scenario.source,
                          base).digest
    except InputError as exc:  # a file gone or unreadable now
        now = f"unreadable: {exc}"
    if now != digest:
        raise InputError(scenario.source, "application", "its files (sources, headers, inputs or trace files) "
                         "changed while the run read them: the result would not be what its scenario hash names",
                         _AGAIN)


def execute(prep: Prepared, ops: OpTable | None = None, *, speed_profiles: Mapping[str, str] | None = None,
            paje_file: Path | None = None, keep_dir: Path | None = None,
            on_start: Callable[[], object] | None = None) -> Execution:
    """The SMPI stage of ``ops`` (``None``: the source's own operations): the parameters of
    :func:`waitlab.experiments.pipeline.simulate_ops`, which finishes what this returns; ``on_start`` is called
    once as soon as SMPI runs (the pipeline imports what it needs after the stage then)."""
    if prep.recorded:  # no SMPI stage: the archive's operations and times (nothing to keep, no scratch)
        ex = prep.source.execute(ops, prep.platform, {}, keep_dir or Path(tempfile.gettempdir()), [])
    else:
        ex = _execute(prep, ops, speed_profiles, paje_file, keep_dir, on_start)
    check_application_files(prep.scenario)
    return ex


def _execute(prep: Prepared, ops: OpTable | None, speed_profiles: Mapping[str, str] | None, paje_file: Path | None,
             keep_dir: Path | None, on_start: Callable[[], object] | None) -> Execution:
    platform = prep.with_profiles(speed_profiles)
    flags = ["-trace", "-trace-file", str(Path(paje_file).resolve())] if paje_file is not None else []
    if keep_dir is not None:  # the caller keeps the trace, platform and log files: no scratch
        keep_dir.mkdir(parents=True, exist_ok=True)
        return prep.source.execute(ops, platform, prep.smpi_config(), keep_dir, flags, on_start)
    scratch = Path(tempfile.mkdtemp(prefix="waitlab-"))
    try:
        return prep.source.execute(ops, platform, prep.smpi_config(), scratch, flags, on_start)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
