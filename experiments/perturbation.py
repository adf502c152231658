"""From a scenario's ``[noise]``, ``[instrumentation]`` and ``[tracing]`` sections to the perturbation stage.

The sections are validated by :mod:`waitlab.experiments.schema`; this module
turns them into the models' configuration (:class:`PerturbationConfig`),
reading a noise signature file where one is named, and collects the platform
facts the perturbation models need.

Examples
--------
>>> from waitlab.experiments.scenario import from_mapping
>>> sc = from_mapping({"scenario": {"name": "n", "ranks": 2}, "platform": {"name": "dawning_5000a"},
...                    "application": {"kind": "stencil"},
...                    "noise": {"model": "periodic", "frequency": 1000.0, "duration": 1e-5}})
>>> perturbation_config(sc).noise.model
PeriodicNoise(frequency=1000.0, duration=1e-05, phase='random')
>>> perturbation_config(from_mapping({**sc.resolved(), "noise": {}})) is None
False
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError
from waitlab.experiments.scenario import Scenario
from waitlab.experiments.schema import InstrumentationSection, NoiseSection, TracingSection, validate_section
from waitlab.models.perturb import noise as nz
from waitlab.models.perturb.detours import uncovered_time
from waitlab.models.perturb.instrumentation import Instrumentation
from waitlab.models.perturb.stage import NoiseConfig, PerturbationConfig, PlatformFacts, TracingConfig
from waitlab.platforms import PlatformModel
from waitlab.platforms.machine import TIMING_PRECISION
from waitlab.readers import read_bytes

#: Largest noise signature file read (bytes).
MAX_SIGNATURE_BYTES = 64 << 20
#: Most detours a signature may hold: each becomes two speed changes per host in SimGrid's speed profiles, and
#: the profiles are written, checked and parsed as text (100,000 detours take a few seconds; 2 million took
#: 85 s and ended in a MemoryError), so a larger file is refused before it is parsed.
MAX_SIGNATURE_DETOURS = 100_000


def _count_detours(raw: bytes) -> int:
    """Lines of a signature that hold a detour (not blank, not only a comment); cheap when the file is small."""
    if raw.count(b"\n") < MAX_SIGNATURE_DETOURS:
        return raw.count(b"\n") + 1
    return sum(1 for line in raw.splitlines() if line.split(b"#", 1)[0].strip())


def _signature(sec: NoiseSection, file: str, timing_precision: float) -> nz.SignatureNoise:
    assert sec.file is not None
    path = Path(sec.file)
    if not path.exists():
        raise InputError(file, "noise.file", f"noise file {str(path)!r} does not exist",
                         "check the path (relative paths are relative to the scenario file)")
    if path.is_dir():
        raise InputError(file, "noise.file", f"{str(path)!r} is a folder", "name a noise signature file")
    try:  # a regular file, read with the size limit (a device or FIFO is refused by read_bytes)
        raw = read_bytes(path, "noise signature", MAX_SIGNATURE_BYTES)
        detours = _count_detours(raw)
        if detours > MAX_SIGNATURE_DETOURS:
            raise InputError(str(path), "(file)", f"holds {detours:,} detours; a noise signature holds at most "
                             f"{MAX_SIGNATURE_DETOURS:,} (each becomes two speed changes per host in SimGrid's "
                             "profiles)", "keep the detours that matter (e.g. the longest) or describe the noise "
                             'with model = "periodic" or "poisson"')
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(str(path), "(encoding)", "not UTF-8 text", "save the noise file as UTF-8") from None
    except OSError as exc:
        raise InputError(str(path), "(file)", f"cannot be read: {exc.strerror}", "check the file") from None
    try:
        starts, durs = nz.parse_signature(text, str(path))
    except ValueError as exc:
        where, _, problem = str(exc).partition(": ")
        line = where.replace(str(path), "").strip() or "(content)"
        raise InputError(str(path), line, problem or str(exc), "write one detour per line: START DURATION "
                         "(seconds, starts increasing, no overlap)") from None
    end = float((starts + durs).max()) if starts.size else 0.0
    period = sec.period if sec.period is not None else (end if end > 0 else 1.0)
    if period < end:
        raise InputError(file, "noise.period", f"{period:g} s is shorter than the signature ({end:g} s)",
                         f"use period >= {end:g}")
    _check_free_time(sec, starts, durs, period, file, timing_precision)
    try:
        return nz.SignatureNoise(tuple(starts.tolist()), tuple(durs.tolist()), period, sec.offset)
    except ValueError as exc:
        raise InputError(str(path), "(content)", str(exc), "fix the noise file") from None


def _check_free_time(sec: NoiseSection, starts: npt.NDArray[np.float64], durs: npt.NDArray[np.float64],
                     period: float, file: str, timing_precision: float) -> None:
    """Refuse a signature whose detours leave no time to compute: they cover the whole period (back to back or
    overlapping), or leave less of it than the simulation's timing precision.  SimGrid would replay the host's
    speed profile for ever, and the run would end only at the time limit."""
    free = uncovered_time(starts, durs, period)
    if free >= timing_precision:
        return
    period_is = (f"{period:g} s" if sec.period is not None else
                 f"noise.period absent, so the end of the last detour: {period:g} s")
    if free == 0.0:
        problem = (f"the detours of {sec.file} cover the whole period ({period_is}), so the host would never compute "
                   "and the run would never end")
    else:
        problem = (f"the detours of {sec.file} leave {free:g} s of the period ({period_is}) free, less than the "
                   f"simulation's timing precision ({timing_precision:g} s, simulation.timing_precision), so the "
                   "host would never compute and the run would never end")
    raise InputError(file, "noise.period", problem, f"set noise.period above {period:g} s, e.g. period = "
                     f"{2 * period:g}, or shorten or drop detours in {Path(str(sec.file)).name}")


def _check_resolution(sec: NoiseSection, model: Any, file: str, timing_precision: float) -> None:
    """Refuse detours SimGrid cannot resolve: shorter than its timing precision (``surf/precision``), or with less
    than that between two periodic detours (events closer than the precision are handled together)."""
    p = timing_precision
    fix_p = f"or a finer [simulation] timing_precision (now {p:g} s)"
    if isinstance(model, nz.PeriodicNoise | nz.PoissonNoise) and model.duration < p:
        if model.duration == 0:  # a detour of 0 s is no detour: the run would have no noise, whatever the rate
            raise InputError(file, "noise.duration", f"0 s is shorter than the simulation's timing precision ({p:g} "
                             "s, simulation.timing_precision): a detour of 0 s is no detour, so this noise would "
                             "delay nothing", f'use duration >= {p:g} s, or model = "none" (or remove [noise]) '
                             "for a run without noise")
        raise InputError(file, "noise.duration", f"{model.duration:g} s is shorter than the simulation's timing "
                         f"precision ({p:g} s, simulation.timing_precision): SimGrid handles events closer than that "
                         "together, so the detours would not be simulated as written",
                         f"use duration >= {p:g} s (fewer, longer detours give the same noise fraction), {fix_p}")
    gap = 1.0 / model.frequency - model.duration if isinstance(model, nz.PeriodicNoise) and model.frequency > 0 \
        and model.duration > 0 else p
    if gap < p:
        raise InputError(file, "noise.frequency", f"{model.frequency:g} Hz leaves {gap:g} s between two "
                         f"{model.duration:g} s detours, less than the simulation's timing precision ({p:g} s, "
                         "simulation.timing_precision)", f"use a lower frequency, {fix_p}")
    if isinstance(model, nz.SignatureNoise):
        d = np.asarray(model.duration, float)
        short = d[d < p]  # a detour of 0 s too: it is no detour at all
        if short.size:
            raise InputError(str(sec.file), "(content)", f"{short.size} detour(s) are shorter than the simulation's "
                             f"timing precision ({p:g} s, simulation.timing_precision of {file}), the shortest "
                             f"{short.min():g} s: SimGrid handles events closer than that together",
                             f"drop or lengthen them, {fix_p}")


def noise_config(sec: NoiseSection, file: str, timing_precision: float = TIMING_PRECISION) -> NoiseConfig:
    """The noise model of a validated ``[noise]`` section; ``timing_precision`` is the scenario's
    ``[simulation] timing_precision`` (no detour may be shorter)."""
    model: Any = nz.NoNoise()
    try:
        if sec.model == "periodic":
            assert sec.frequency is not None and sec.duration is not None
            model = nz.PeriodicNoise(sec.frequency, sec.duration, sec.phase)
        elif sec.model == "poisson":
            assert sec.rate is not None and sec.duration is not None
            model = nz.PoissonNoise(sec.rate, sec.duration, sec.law, sec.pareto_shape)
        elif sec.model == "signature":
            model = _signature(sec, file, timing_precision)
    except ValueError as exc:  # a model's own physics check
        raise InputError(file, "noise", str(exc), "see the perturbation page of the docs") from None
    _check_resolution(sec, model, file, timing_precision)
    return NoiseConfig(model=model, scope=sec.scope, jitter=nz.GaussianJitter(sec.jitter_std, sec.jitter_mean),
                       horizon_factor=sec.horizon_factor, nodes=tuple(sec.nodes or ()), precision=timing_precision)


def tracing_config(sec: TracingSection) -> TracingConfig:
    """The buffer and spilling configuration of a validated ``[tracing]`` section."""
    return TracingConfig(**sec.model_dump())


def build_config(noise: NoiseSection | None, instrumentation: InstrumentationSection | None,
                 tracing: TracingSection | None, file: str,
                 timing_precision: float = TIMING_PRECISION) -> PerturbationConfig:
    """The perturbation stage of validated sections (``None`` = section absent); ``timing_precision``: the
    scenario's ``[simulation] timing_precision``."""
    noise_cfg = noise_config(noise, file, timing_precision) if noise is not None else NoiseConfig()
    if instrumentation is not None:
        inst = Instrumentation(**instrumentation.model_dump())
    elif tracing is not None:
        inst = Instrumentation()
    else:
        inst = Instrumentation(events="none")
    tracing_cfg = tracing_config(tracing) if tracing is not None else None
    if tracing_cfg is None and inst.active:
        tracing_cfg = TracingConfig()
    return PerturbationConfig(noise=noise_cfg, instrumentation=inst, tracing=tracing_cfg, source=file)


def perturbation_config(scenario: Scenario) -> PerturbationConfig | None:
    """The perturbation stage of a scenario, or ``None`` when it has no perturbation section."""
    if not scenario.perturbed:
        return None
    return build_config(scenario.noise, scenario.instrumentation, scenario.tracing, scenario.source,
                        scenario.simulation.timing_precision)


def parse_perturbation(tables: Mapping[str, Any], file: str = "<scenario>") -> PerturbationConfig:
    """Validate ``[noise]``, ``[instrumentation]`` and ``[tracing]`` tables (as in a scenario) into the stage.

    >>> parse_perturbation({"tracing": {"policy": "per_rank"}}).tracing.policy
    'per_rank'
    """
    secs: dict[str, Any] = {}
    for name in ("noise", "instrumentation", "tracing"):
        if name in tables:
            secs[name] = validate_section(name, tables[name], file)
    noise = secs.get("noise")
    if isinstance(noise, NoiseSection) and noise.file is not None and not Path(noise.file).is_absolute():
        base = Path(file).parent if not file.startswith("<") else Path.cwd()
        secs["noise"] = noise.model_copy(update={"file": str(base / noise.file)})
    return build_config(secs.get("noise"), secs.get("instrumentation"), secs.get("tracing"), file)


def platform_facts(model: PlatformModel, platform: Any) -> PlatformFacts:
    """What the perturbation models need from the platform model and its rendering."""
    return PlatformFacts(
        n_ranks=len(platform.host_of_rank), ranks_per_node=int(platform.ranks_per_node),
        core_speed=float(platform.core_speed), host_of_rank=tuple(platform.host_of_rank),
        node_of_rank=np.asarray(platform.node_of_rank, np.int64), node_memory=float(model.trace_buffer_memory),
        disk_bandwidth=float(model.disk.bandwidth), disk_latency=float(model.disk.latency),
    )  # fmt: skip
