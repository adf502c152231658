"""Perturbation layer: ``[noise]``, ``[instrumentation]``, ``[tracing]`` -> perturbed run and its report.

:func:`parse_perturbation` validates the three optional scenario sections
into a :class:`PerturbationConfig` (every mistake is one
:class:`~waitlab.errors.InputError` naming the file and key).
:func:`perturb_ops` applies jitter, instrumentation records, swap and the
spilling policy to an operation table (pure numpy);
:func:`noise_setup` turns the noise model into SimGrid speed profiles for the
rendered platform.  :func:`run_perturbed` simulates the scenario twice -- the
unperturbed run and the perturbed ("measured") one -- adds the noise that
delayed work to the cause ledger, checks condition C and computes how every
wait moved; :func:`write_perturbation_outputs` writes it next to the results.

Seeds: the noise draws use ``numpy.random.default_rng([seed, 0x6E6F6973])``
(the scenario seed and the stream tag "nois"), the jitter ``[seed, 0x6A697474]``,
so adding or removing an application's random draws never changes the noise.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from waitlab.errors import InputError
from waitlab.experiments.scenario import Scenario
from waitlab.models.ops import CAUSE_KINDS, CODE, Ledger, OpTable
from waitlab.models.perturb import noise as nz
from waitlab.models.perturb.condition_c import (
    ConditionCReport,
    check_condition_c,
    distortion_summary,
    original_keys,
    wait_distortion,
)
from waitlab.models.perturb.insertion import Insertions, apply_insertions, concat, key
from waitlab.models.perturb.instrumentation import (
    SUB_JITTER,
    Instrumentation,
    Records,
    collective_points,
    select_records,
    step_points,
)
from waitlab.models.perturb.tracebuffer import (
    POLICIES,
    BufferSpec,
    BufferState,
    Flushes,
    SpillSummary,
    Stream,
    SyncPoints,
    TauTooShort,
    buffer_state,
    largest_safe_every,
    make_policy,
    summarize_spill,
    tracing_insertions,
)

NOISE_MODELS = ("none", "periodic", "poisson", "signature")
NOISE_SCOPES = ("node", "core")
SYNC_KINDS = ("collectives", "steps")

#: Event kinds the spilling policy is responsible for (condition C of the spill alone).
SPILL_KINDS = ("swap", "flush", "delay")

_NOISE_STREAM = 0x6E6F6973
_JITTER_STREAM = 0x6A697474


# --------------------------------------------------------------------------------------------------
# configuration


@dataclass(frozen=True)
class NoiseConfig:
    """Validated ``[noise]``: the detour model, its scope, and compute jitter."""

    model: Any = field(default_factory=nz.NoNoise)
    scope: str = "node"
    jitter: nz.GaussianJitter = field(default_factory=lambda: nz.GaussianJitter(0.0))
    horizon_factor: float = 4.0

    @property
    def has_detours(self) -> bool:
        """Whether the model can produce any detour."""
        m = self.model
        if isinstance(m, nz.PeriodicNoise):
            return m.frequency > 0 and m.duration > 0
        if isinstance(m, nz.PoissonNoise):
            return m.rate > 0 and m.duration > 0
        if isinstance(m, nz.SignatureNoise):
            return bool(np.asarray(m.duration).sum() > 0)
        return False


@dataclass(frozen=True)
class TracingConfig:
    """Validated ``[tracing]``: memory, disk and the spilling policy (``None`` = platform default)."""

    policy: str = "keep"
    memory: float | None = None
    buffer_bytes: float | None = None
    swap_factor: float = 74.8
    disk_bandwidth: float | None = None
    disk_latency: float | None = None
    writeback_cost: float = 0.0
    tau: float = 1.0
    every: int | str = 1
    sync: str = "collectives"
    fill_level: float = 0.8
    safety: float = 1.5
    window: int = 0


@dataclass(frozen=True)
class PerturbationConfig:
    """Everything the three sections ask for."""

    noise: NoiseConfig = field(default_factory=NoiseConfig)
    instrumentation: Instrumentation = field(default_factory=lambda: Instrumentation(events="none"))
    tracing: TracingConfig | None = None
    source: str = "<scenario>"

    @property
    def active(self) -> bool:
        """Whether anything perturbs the run."""
        return self.noise.has_detours or self.noise.jitter.active or self.instrumentation.active

    def describe(self) -> dict[str, Any]:
        """Plain-data description for reports."""
        def plain(x: Any) -> Any:
            if dataclasses.is_dataclass(x) and not isinstance(x, type):
                d = {"type": type(x).__name__, **{f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}}
                if isinstance(x, nz.SignatureNoise):
                    d["start"] = f"{len(x.start)} detours"
                    d["duration"] = float(np.sum(x.duration))
                return d
            if isinstance(x, tuple):
                return list(x)
            return x

        return {"noise": plain(self.noise), "instrumentation": plain(self.instrumentation),
                "tracing": plain(self.tracing) if self.tracing else None}


def _table(data: Mapping[str, Any], section: str, file: str) -> Mapping[str, Any]:
    t = data.get(section, {})
    if not isinstance(t, Mapping):
        raise InputError(file, section, "must be a table", f"write it as [{section}]")
    return t


def _no_unknown(t: Mapping[str, Any], allowed: tuple[str, ...], file: str, section: str) -> None:
    for k in t:
        if k not in allowed:
            raise InputError(file, f"{section}.{k}", "unknown key", f"allowed keys: {', '.join(allowed)}")


def _num(t: Mapping[str, Any], k: str, default: Any, file: str, section: str, *, lo: float | None = 0.0,
         lo_open: bool = False, hi: float | None = None, integer: bool = False, fix: str = "") -> Any:
    if k not in t:
        return default
    v = t[k]
    if isinstance(v, bool) or not isinstance(v, int | float) or (integer and not isinstance(v, int)):
        raise InputError(file, f"{section}.{k}", f"must be {'an integer' if integer else 'a number'}, got {v!r}",
                         fix or f"write {k} = 1")
    if not math.isfinite(v):
        raise InputError(file, f"{section}.{k}", f"must be finite, got {v!r}", fix or "use a finite number")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise InputError(file, f"{section}.{k}", f"must be {'>' if lo_open else '>='} {lo:g}, got {v!r}",
                         fix or f"use a value {'above' if lo_open else 'of at least'} {lo:g}")
    if hi is not None and v > hi:
        raise InputError(file, f"{section}.{k}", f"must be <= {hi:g}, got {v!r}", fix or f"use at most {hi:g}")
    return int(v) if integer else float(v)


def _choice(t: Mapping[str, Any], k: str, default: str, allowed: tuple[str, ...], file: str, section: str) -> str:
    if k not in t:
        return default
    v = t[k]
    if not isinstance(v, str) or v not in allowed:
        raise InputError(file, f"{section}.{k}", f"unknown value {v!r}", f"use one of: {', '.join(allowed)}")
    return v


def _phase(t: Mapping[str, Any], k: str, file: str, section: str) -> str | float:
    if k not in t:
        return "random"
    v = t[k]
    if isinstance(v, str):
        if v not in ("random", "shared"):
            raise InputError(file, f"{section}.{k}", f"unknown value {v!r}",
                             'use "random" (per host), "shared" (one draw for all hosts) or seconds')
        return v
    return float(_num(t, k, 0.0, file, section))


NOISE_KEYS = ("model", "scope", "frequency", "duration", "phase", "rate", "law", "pareto_shape", "file", "period",
              "offset", "jitter_std", "jitter_mean", "horizon_factor")
INSTRUMENTATION_KEYS = ("events", "only", "record_bytes", "payload", "fixed_cost", "copy_cost", "where")
TRACING_KEYS = ("policy", "memory", "buffer_bytes", "swap_factor", "disk_bandwidth", "disk_latency",
                "writeback_cost", "tau", "every", "sync", "fill_level", "safety", "window")


def parse_noise(t: Mapping[str, Any], file: str) -> NoiseConfig:
    """Validate a ``[noise]`` table (see docs/perturbation.md for every key)."""
    sec = "noise"
    _no_unknown(t, NOISE_KEYS, file, sec)
    model_name = _choice(t, "model", "none", NOISE_MODELS, file, sec)
    scope = _choice(t, "scope", "node", NOISE_SCOPES, file, sec)
    used = {"model", "scope", "jitter_std", "jitter_mean", "horizon_factor"}
    model: Any = nz.NoNoise()
    try:
        if model_name == "periodic":
            used |= {"frequency", "duration", "phase"}
            freq = _num(t, "frequency", None, file, sec, fix="set frequency = 1000.0 (detours per second)")
            dur = _num(t, "duration", None, file, sec, fix="set duration = 2.5e-05 (seconds per detour)")
            if freq is None or dur is None:
                missing = "frequency" if freq is None else "duration"
                raise InputError(file, f"{sec}.{missing}", "is required for model = \"periodic\"",
                                 f"add {missing} = ... to [noise]")
            if freq > 0 and dur * freq >= 1:
                raise InputError(file, f"{sec}.duration", f"a {dur:g} s detour every {1 / freq:g} s leaves no "
                                 "time to compute", "make duration shorter than 1 / frequency")
            model = nz.PeriodicNoise(freq, dur, _phase(t, "phase", file, sec))
        elif model_name == "poisson":
            used |= {"rate", "duration", "law", "pareto_shape"}
            rate = _num(t, "rate", None, file, sec, fix="set rate = 100.0 (arrivals per second)")
            dur = _num(t, "duration", None, file, sec, fix="set duration = 1e-04 (mean seconds per detour)")
            if rate is None or dur is None:
                missing = "rate" if rate is None else "duration"
                raise InputError(file, f"{sec}.{missing}", "is required for model = \"poisson\"",
                                 f"add {missing} = ... to [noise]")
            law = _choice(t, "law", "constant", nz.DURATION_LAWS, file, sec)
            shape = _num(t, "pareto_shape", 2.5, file, sec, lo=1.0, lo_open=True,
                         fix="use pareto_shape > 1 (the mean must be finite)")
            if rate * dur >= 1:
                raise InputError(file, f"{sec}.rate", f"rate x duration = {rate * dur:g}: the host would always be "
                                 "in a detour", "make rate x duration < 1")
            model = nz.PoissonNoise(rate, dur, law, shape)
        elif model_name == "signature":
            used |= {"file", "period", "offset"}
            model = _signature(t, file)
    except ValueError as exc:  # a model's own check (should be caught above)
        raise InputError(file, sec, str(exc), "see docs/perturbation.md") from None
    stray = [k for k in t if k not in used]
    if stray:
        raise InputError(file, f"{sec}.{stray[0]}", f"is not used by model = {model_name!r}",
                         "remove it, or choose the model that uses it")
    std = _num(t, "jitter_std", 0.0, file, sec, fix="use a relative standard deviation >= 0, e.g. 0.05")
    mean = _num(t, "jitter_mean", 0.0, file, sec, lo=None)
    hf = _num(t, "horizon_factor", 4.0, file, sec, lo=1.0, fix="use horizon_factor >= 1")
    return NoiseConfig(model=model, scope=scope, jitter=nz.GaussianJitter(std, mean), horizon_factor=hf)


def _signature(t: Mapping[str, Any], file: str) -> nz.SignatureNoise:
    sec = "noise"
    if "file" not in t or not isinstance(t["file"], str):
        raise InputError(file, f"{sec}.file", "is required for model = \"signature\" (a path to a noise file)",
                         'add file = "noise.txt" with lines "START DURATION" in seconds')
    path = Path(t["file"])
    if not path.is_absolute():
        path = Path(file).parent / path
    if not path.exists():
        raise InputError(file, f"{sec}.file", f"noise file {str(path)!r} does not exist", "check the path "
                         "(relative paths are relative to the scenario file)")
    try:
        starts, durs = nz.parse_signature(path.read_text(encoding="utf-8"), str(path))
    except UnicodeDecodeError:
        raise InputError(str(path), "(encoding)", "not UTF-8 text", "save the noise file as UTF-8") from None
    except ValueError as exc:
        msg = str(exc)
        where, _, problem = msg.partition(": ")
        line = where.replace(str(path), "").strip() or "(content)"
        raise InputError(str(path), line, problem, "write one detour per line: START DURATION (seconds, "
                         "starts increasing, no overlap)") from None
    end = float((starts + durs).max())
    period = _num(t, "period", None, file, sec, lo=0.0, lo_open=True, fix="use a period > 0 seconds")
    if period is None:
        period = end if end > 0 else 1.0
    if period < end:
        raise InputError(file, f"{sec}.period", f"{period:g} s is shorter than the signature ({end:g} s)",
                         f"use period >= {end:g}")
    offset = _phase(t, "offset", file, sec)
    try:
        return nz.SignatureNoise(tuple(starts.tolist()), tuple(durs.tolist()), period, offset)
    except ValueError as exc:
        raise InputError(file, sec, str(exc), "fix the noise file") from None


def parse_instrumentation(t: Mapping[str, Any], file: str) -> Instrumentation:
    """Validate an ``[instrumentation]`` table."""
    sec = "instrumentation"
    _no_unknown(t, INSTRUMENTATION_KEYS, file, sec)
    events = _choice(t, "events", "mpi", ("none", "mpi", "regions", "all"), file, sec)
    only: tuple[str, ...] = ()
    if "only" in t:
        v = t["only"]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise InputError(file, f"{sec}.only", f"must be a list of action or region names, got {v!r}",
                             'e.g. only = ["recv"]')
        only = tuple(v)
    return Instrumentation(
        events=events, only=only,
        record_bytes=_num(t, "record_bytes", 64, file, sec, integer=True, fix="bytes per record, e.g. 64"),
        payload=_num(t, "payload", 0.0, file, sec, hi=1.0, fix="a fraction in [0, 1] of the message bytes"),
        fixed_cost=_num(t, "fixed_cost", 0.0, file, sec, fix="seconds per record, e.g. 1e-06"),
        copy_cost=_num(t, "copy_cost", 0.0, file, sec, fix="seconds per byte copied, e.g. 1e-09"),
        where=_choice(t, "where", "after", ("after", "before", "both"), file, sec),
    )  # fmt: skip


def parse_tracing(t: Mapping[str, Any], file: str) -> TracingConfig:
    """Validate a ``[tracing]`` table."""
    sec = "tracing"
    _no_unknown(t, TRACING_KEYS, file, sec)
    if "policy" in t and t["policy"] not in POLICIES:
        raise InputError(file, f"{sec}.policy", f"unknown spilling policy {t['policy']!r}",
                         f"use one of: {', '.join(POLICIES)}")
    policy = str(t.get("policy", "keep"))
    every: int | str = 1
    if "every" in t:
        if t["every"] == "auto":
            every = "auto"
        else:
            every = _num(t, "every", 1, file, sec, lo=1.0, integer=True,
                         fix='an integer >= 1 (f after every N-th point) or "auto"')
    return TracingConfig(
        policy=policy,
        memory=_num(t, "memory", None, file, sec, lo=0.0, lo_open=True, fix="bytes per node, e.g. 2013265920"),
        buffer_bytes=_num(t, "buffer_bytes", None, file, sec, lo=0.0, lo_open=True, fix="bytes per rank"),
        swap_factor=_num(t, "swap_factor", 74.8, file, sec, lo=1.0, fix="use swap_factor >= 1 (seed 003: 74.8)"),
        disk_bandwidth=_num(t, "disk_bandwidth", None, file, sec, lo=0.0, lo_open=True,
                            fix="bytes per second per node"),
        disk_latency=_num(t, "disk_latency", None, file, sec, fix="seconds per flush, >= 0"),
        writeback_cost=_num(t, "writeback_cost", 0.0, file, sec, fix="seconds per flushed byte, >= 0"),
        tau=_num(t, "tau", 1.0, file, sec, lo=0.0, lo_open=True, fix="seconds, > 0 (seed 003: 1.0)"),
        every=every,
        sync=_choice(t, "sync", "collectives", SYNC_KINDS, file, sec),
        fill_level=_num(t, "fill_level", 0.8, file, sec, lo=0.0, lo_open=True, hi=1.0,
                        fix="a fraction in (0, 1]"),
        safety=_num(t, "safety", 1.5, file, sec, lo=1.0, fix="use safety >= 1"),
        window=_num(t, "window", 0, file, sec, integer=True, fix="an integer >= 0 (0 = all intervals)"),
    )  # fmt: skip


def parse_perturbation(extra: Mapping[str, Any], file: str = "<scenario>") -> PerturbationConfig:
    """Validate the ``[noise]``, ``[instrumentation]`` and ``[tracing]`` tables of a scenario.

    Examples
    --------
    >>> cfg = parse_perturbation({"noise": {"model": "periodic", "frequency": 1000.0, "duration": 1e-5}})
    >>> cfg.noise.model
    PeriodicNoise(frequency=1000.0, duration=1e-05, phase='random')
    >>> try:
    ...     parse_perturbation({"noise": {"model": "poisson", "rate": -1.0, "duration": 1e-5}}, "s.toml")
    ... except InputError as e:
    ...     print(e)
    s.toml: noise.rate: must be >= 0, got -1.0 (fix: set rate = 100.0 (arrivals per second))
    """
    noise = parse_noise(_table(extra, "noise", file), file) if "noise" in extra else NoiseConfig()
    if "instrumentation" in extra:
        inst = parse_instrumentation(_table(extra, "instrumentation", file), file)
    elif "tracing" in extra:
        inst = Instrumentation()
    else:
        inst = Instrumentation(events="none")
    tracing = parse_tracing(_table(extra, "tracing", file), file) if "tracing" in extra else None
    if tracing is None and inst.active:
        tracing = TracingConfig()
    return PerturbationConfig(noise=noise, instrumentation=inst, tracing=tracing, source=file)


def has_perturbation(scenario: Scenario) -> bool:
    """Whether a scenario has any of the perturbation sections."""
    return any(k in scenario.extra for k in ("noise", "instrumentation", "tracing"))


# --------------------------------------------------------------------------------------------------
# platform facts


@dataclass(frozen=True)
class PlatformFacts:
    """What the perturbation models need to know about the rendered platform."""

    n_ranks: int
    ranks_per_node: int
    core_speed: float
    host_of_rank: tuple[str, ...]
    node_of_rank: npt.NDArray[np.int64]
    node_memory: float
    disk_bandwidth: float
    disk_latency: float

    @staticmethod
    def of(scenario: Scenario, platform: Any) -> PlatformFacts:
        """From a :class:`waitlab.platforms.RenderedPlatform` and the scenario's platform model."""
        from waitlab.platforms import load_platform

        model = load_platform(scenario.platform.name)
        return PlatformFacts(
            n_ranks=len(platform.host_of_rank), ranks_per_node=int(platform.ranks_per_node),
            core_speed=float(platform.core_speed), host_of_rank=tuple(platform.host_of_rank),
            node_of_rank=np.asarray(platform.node_of_rank, np.int64), node_memory=float(model.trace_buffer_memory),
            disk_bandwidth=float(model.disk.bandwidth), disk_latency=float(model.disk.latency),
        )  # fmt: skip


def buffer_spec(cfg: TracingConfig, facts: PlatformFacts, file: str = "<scenario>") -> BufferSpec:
    """Per-rank memory, buffer and disk share from ``[tracing]`` and the platform."""
    rpn = max(facts.ranks_per_node, 1)
    memory = (cfg.memory if cfg.memory is not None else facts.node_memory) / rpn
    bw = (cfg.disk_bandwidth if cfg.disk_bandwidth is not None else facts.disk_bandwidth) / rpn
    lat = cfg.disk_latency if cfg.disk_latency is not None else facts.disk_latency
    buf = cfg.buffer_bytes if cfg.buffer_bytes is not None else memory
    try:
        return BufferSpec(memory=memory, buffer_bytes=buf, flush_rate=bw, flush_latency=lat,
                          swap_factor=cfg.swap_factor, writeback_cost=cfg.writeback_cost)
    except ValueError as exc:
        raise InputError(file, "tracing", str(exc), "check memory, buffer_bytes and disk_bandwidth") from None


# --------------------------------------------------------------------------------------------------
# operations


@dataclass(frozen=True)
class PerturbedOps:
    """The perturbed operations and what the tracer did."""

    ops: OpTable
    origin: npt.NDArray[np.int64]
    records: Records
    flushes: Flushes
    state: BufferState | None
    spill: SpillSummary | None
    spec: BufferSpec | None
    seconds: dict[str, float]

    def origin_seq(self, base: OpTable) -> npt.NDArray[np.int64]:
        """Original ``seq`` of every row of the perturbed table (-1 for inserted rows)."""
        return np.where(self.origin >= 0, base.seq[np.maximum(self.origin, 0)], -1).astype(np.int64)


def enclosing_region(ops: OpTable) -> npt.NDArray[np.int32]:
    """Region (index into ``ops.names``) of every operation: its own name, else the innermost open region."""
    from waitlab.simulator.timeline import _regions

    _, _, enclosing = _regions(ops)
    inner = np.where(enclosing >= 0, ops.name[np.maximum(enclosing, 0)], -1)
    return np.where(ops.name >= 0, ops.name, inner).astype(np.int32)


def sync_points(ops: OpTable) -> tuple[SyncPoints, SyncPoints]:
    """Collective and end-of-step synchronisation points of ``ops``."""
    r, k, p = collective_points(ops)
    coll = SyncPoints(ops.n_ranks, r, k, p, "collectives")
    r, k, p = step_points(ops)
    # keep only steps every rank has (a f call needs equal counts)
    if k.size:
        counts = np.bincount(k)
        full = np.flatnonzero(counts == ops.n_ranks)
        keep = np.isin(k, full)
        r, k, p = r[keep], k[keep], p[keep]
        k = np.searchsorted(full, k).astype(np.int64)
    steps = SyncPoints(ops.n_ranks, r, k, p, "steps")
    return coll, steps


def perturb_ops(ops: OpTable, cfg: PerturbationConfig, facts: PlatformFacts, seed: int) -> PerturbedOps:
    """Apply jitter, instrumentation, swap and the spilling policy to ``ops``.

    Raises
    ------
    InputError
        For a ``tau`` shorter than a flush, a policy that needs collectives the
        application does not have, or ``only`` names that do not exist.
    """
    file = cfg.source
    times: dict[str, float] = {}
    t = time.perf_counter()
    parts: list[Insertions] = []
    jit = cfg.noise.jitter
    if jit.active:
        rows, extra = jit.extra(ops, np.random.default_rng([seed, _JITTER_STREAM]))
        parts.append(Insertions.make(rank=ops.rank[rows], key=key(ops.seq[rows].astype(np.int64) + 1, SUB_JITTER),
                                     action="noise", value=extra, kind="noise", ref_row=rows))
    times["jitter"] = time.perf_counter() - t
    t = time.perf_counter()
    try:
        records = select_records(ops, cfg.instrumentation)
    except ValueError as exc:
        raise InputError(file, "instrumentation.only", str(exc), "use MPI action names such as recv, or region "
                         "names of the application") from None
    times["instrumentation"] = time.perf_counter() - t
    flushes, state, spill, spec = Flushes.empty(), None, None, None
    t = time.perf_counter()
    if len(records) and cfg.tracing is not None:
        tr = cfg.tracing
        spec = buffer_spec(tr, facts, file)
        stream = Stream.build(ops.n_ranks, records.rank, records.pos, records.bytes)
        try:
            coll, steps = sync_points(ops)
        except ValueError as exc:
            raise InputError(file, "tracing.policy", f"cannot place synchronised flushes: {exc}",
                             "use policy = \"per_rank\" or \"keep\"") from None
        pts = coll if tr.sync == "collectives" else steps
        if tr.policy in ("vampir_sync", "padded_sync", "predictive_sync") and coll.n_points == 0:
            raise InputError(file, "tracing.policy", f"policy {tr.policy!r} flushes at collectives, but the "
                             "application has none", 'use policy = "per_rank", or "swapout_f" with sync = "steps"')
        if tr.policy == "swapout_f" and pts.n_points == 0:
            raise InputError(file, "tracing.sync", f"the application has no {tr.sync} to place f after",
                             'use sync = "steps"' if tr.sync == "collectives" else "use another policy")
        every = tr.every
        if every == "auto":
            every = largest_safe_every(stream, pts, spec.buffer_bytes)
        policy = make_policy(tr.policy, tau=tr.tau, every=int(every), sync=tr.sync, fill_level=tr.fill_level,
                             safety=tr.safety, window=tr.window)
        try:
            flushes = policy.plan(stream, spec, coll, steps)
        except TauTooShort as exc:
            raise InputError(file, "tracing.tau", f"tau = {exc.tau:g} s is shorter than a flush: rank {exc.rank} "
                             f"writes {exc.nbytes:.0f} bytes at {tr.sync[:-1]} point {exc.point} in "
                             f"{exc.seconds:.6g} s", f"use tau >= {exc.seconds:.6g}, or flush more often "
                             "(smaller every)") from None
        state = buffer_state(stream, flushes, spec)
        spill = summarize_spill(tr.policy, stream, flushes, state, spec)
        parts.append(tracing_insertions(ops, records, cfg.instrumentation, spec, flushes, state))
    elif len(records):
        parts.append(Insertions.make(rank=records.rank, key=records.pos, action="overhead",
                                     value=cfg.instrumentation.cost(records.bytes), kind="overhead",
                                     ref_row=records.row))
    times["spill"] = time.perf_counter() - t
    t = time.perf_counter()
    ins = concat(parts)
    if len(ins):
        new, origin = apply_insertions(ops, ins, enclosing_region(ops))
    else:
        new, origin = ops, np.arange(len(ops), dtype=np.int64)
    times["insert"] = time.perf_counter() - t
    return PerturbedOps(new, origin, records, flushes, state, spill, spec, times)


# --------------------------------------------------------------------------------------------------
# noise profiles


@dataclass(frozen=True)
class NoiseSetup:
    """Detour pattern, its hosts and the SimGrid speed profiles of one run."""

    pattern: nz.NoisePattern
    pattern_host_of_rank: npt.NDArray[np.int64]
    speed_profiles: dict[str, str]
    horizon: float

    @property
    def active(self) -> bool:
        """Whether any host gets a profile."""
        return bool(self.speed_profiles)


def noise_setup(cfg: NoiseConfig, facts: PlatformFacts, seed: int, horizon: float,
                file: str = "<scenario>") -> NoiseSetup:
    """Draw the detours and render one speed profile per host that runs ranks.

    ``scope = "node"``: one pattern per node, on every host of the node (all
    its cores stall together).  ``scope = "core"``: one pattern per rank,
    which needs one host per rank (``split_cores = true`` or one rank per node).
    """
    n = facts.n_ranks
    if cfg.scope == "core":
        if len(set(facts.host_of_rank)) != n:
            raise InputError(file, "noise.scope", "per-core noise needs one SimGrid host per rank, but several "
                             "ranks share a multi-core host", "set split_cores = true in [platform] (or "
                             "ranks_per_node = 1), or use scope = \"node\"")
        phost = np.arange(n, dtype=np.int64)
        n_hosts = n
    else:
        phost = facts.node_of_rank.astype(np.int64)
        n_hosts = int(phost.max()) + 1 if n else 0
    if not cfg.has_detours:
        return NoiseSetup(nz.empty_pattern(n_hosts), phost, {}, horizon)
    rng = np.random.default_rng([seed, _NOISE_STREAM])
    pattern = cfg.model.pattern(n_hosts, rng, horizon)
    profiles: dict[str, str] = {}
    host_pattern: dict[str, int] = {}
    for r in range(n):
        host_pattern.setdefault(facts.host_of_rank[r], int(phost[r]))
    texts: dict[int, str] = {}
    for host, ph in host_pattern.items():
        if ph not in texts:
            texts[ph] = nz.profile_text(pattern, ph)
        if texts[ph]:
            profiles[host] = texts[ph]
    return NoiseSetup(pattern, phost, profiles, horizon)


def noise_ledger(ops: OpTable, t_enter: npt.NDArray[np.float64], t_exit: npt.NDArray[np.float64],
                 setup: NoiseSetup, core_speed: float) -> tuple[Ledger, nz.NoiseHits]:
    """Ledger rows (kind noise) for every detour that delayed work in a finished run."""
    rows, a, b = nz.cpu_intervals(ops, t_enter, t_exit, core_speed, setup.pattern, setup.pattern_host_of_rank)
    hits = nz.noise_hits(setup.pattern, setup.pattern_host_of_rank, ops.rank[rows].astype(np.int64), rows, a, b)
    region = enclosing_region(ops)
    led = Ledger(rank=hits.rank.astype(np.int32), region=region[hits.row].astype(np.int32),
                 step=ops.step[hits.row].astype(np.int32), seconds=hits.seconds,
                 kind=np.full(len(hits), CAUSE_KINDS.index("noise"), np.int8))
    return led, hits


def with_ledger_rows(ops: OpTable, extra: Ledger) -> OpTable:
    """``ops`` with ``extra`` appended to its ledger (rows no operation points to)."""
    led = ops.ledger
    merged = Ledger(**{f.name: np.concatenate((getattr(led, f.name), getattr(extra, f.name)))
                       for f in dataclasses.fields(Ledger)})
    return dataclasses.replace(ops, ledger=merged)


# --------------------------------------------------------------------------------------------------
# the two runs and the report


@dataclass(frozen=True)
class PerturbationResult:
    """Unperturbed and measured runs of one scenario, and how they differ."""

    config: PerturbationConfig
    unperturbed: Any  # RunResult
    measured: Any  # RunResult
    perturbed: PerturbedOps
    noise: NoiseSetup
    noise_hits: nz.NoiseHits
    condition_c: ConditionCReport
    condition_c_spill: ConditionCReport
    distortion: pd.DataFrame
    report: dict[str, Any]


def perturbation_hooks(scenario: Scenario, horizon: float = 1.0) -> tuple[Any, dict[str, str], PerturbationConfig]:
    """``(perturb, speed_profiles, config)`` for :func:`waitlab.experiments.run.simulate`.

    Use them to re-simulate a perturbed scenario (e.g. counterfactual runs):
    ``simulate(scenario, perturb=perturb, speed_profiles=profiles)``.
    """
    from waitlab.experiments.run import render

    cfg = parse_perturbation(scenario.extra, scenario.source)
    facts = PlatformFacts.of(scenario, render(scenario))
    setup = noise_setup(cfg.noise, facts, scenario.seed, horizon, scenario.source)

    def perturb(sc: Scenario, ops: OpTable, platform: Any) -> OpTable:
        return perturb_ops(ops, cfg, PlatformFacts.of(sc, platform), sc.seed).ops

    return perturb, setup.speed_profiles, cfg


def run_perturbed(scenario: Scenario, *, ops: OpTable | None = None, base: Any | None = None,
                  paje_file: Path | None = None) -> PerturbationResult:
    """Simulate ``scenario`` without and with its perturbations; compare them.

    Parameters
    ----------
    scenario : Scenario
        With ``[noise]``, ``[instrumentation]`` and/or ``[tracing]`` in ``extra``.
    ops : OpTable, optional
        Operations to perturb instead of the application model's.
    base : RunResult, optional
        The unperturbed run if already available (its ``ops`` are then the ones perturbed).
    """
    from waitlab.experiments.run import render, simulate

    cfg = parse_perturbation(scenario.extra, scenario.source)
    stages: dict[str, float] = {}
    t = time.perf_counter()
    if base is None:
        base = simulate(scenario, ops=ops)
    stages["unperturbed_run"] = time.perf_counter() - t
    makespan0 = float(base.summary["makespan"])
    facts = PlatformFacts.of(scenario, render(scenario))
    t = time.perf_counter()
    horizon = max(cfg.noise.horizon_factor * max(makespan0, 1e-3), 1e-3)
    setup = noise_setup(cfg.noise, facts, scenario.seed, horizon, scenario.source)
    stages["noise_profiles"] = time.perf_counter() - t
    holder: dict[str, PerturbedOps] = {}

    def perturb(sc: Scenario, ops: OpTable, platform: Any) -> OpTable:
        p = perturb_ops(ops, cfg, PlatformFacts.of(sc, platform), sc.seed)
        holder["p"] = p
        return p.ops

    t = time.perf_counter()
    measured = simulate(scenario, ops=base.ops, perturb=perturb, speed_profiles=setup.speed_profiles or None,
                        paje_file=paje_file)
    stages["measured_run"] = time.perf_counter() - t
    p = holder["p"]
    # noise that delayed work -> ledger
    t = time.perf_counter()
    ev = measured.events
    hits = nz.NoiseHits(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    if setup.active:
        rows = _event_op_rows(ev, measured.ops)
        t_enter = np.zeros(len(measured.ops))
        t_exit = np.zeros(len(measured.ops))
        t_enter[rows] = ev["enter"].to_numpy()
        t_exit[rows] = ev["exit"].to_numpy()
        leaves = measured.ops.code == CODE["leave"]
        t_enter[leaves] = t_exit[leaves] = np.nan
        led, hits = noise_ledger(measured.ops, t_enter, t_exit, setup, facts.core_speed)
        measured = dataclasses.replace(measured, ops=with_ledger_rows(measured.ops, led))
    stages["noise_ledger"] = time.perf_counter() - t
    # condition C and distortion
    t = time.perf_counter()
    cc = check_condition_c(ev)
    cc_spill = check_condition_c(ev, kinds=SPILL_KINDS)
    stages["condition_c"] = time.perf_counter() - t
    t = time.perf_counter()
    origin_seq_ops = p.origin_seq(base.ops)
    ev_rows = _event_op_rows(ev, measured.ops)
    mkeys = original_keys(ev, origin_seq_ops[ev_rows])
    bkeys = original_keys(base.events)
    dist = wait_distortion(measured.waits, mkeys, base.waits, bkeys)
    stages["distortion"] = time.perf_counter() - t
    stages.update({f"perturb_{k}": v for k, v in p.seconds.items()})
    report = _report(scenario, cfg, base, measured, p, setup, hits, cc, cc_spill, dist, stages)
    return PerturbationResult(cfg, base, measured, p, setup, hits, cc, cc_spill, dist, report)


def _event_op_rows(events: pd.DataFrame, ops: OpTable) -> npt.NDArray[np.int64]:
    """Row of the operation table behind every event row ((rank, seq) -> row)."""
    counts = ops.per_rank_counts()
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return (starts[events["rank"].to_numpy()] + events["seq"].to_numpy()).astype(np.int64)


def _report(scenario: Scenario, cfg: PerturbationConfig, base: Any, measured: Any, p: PerturbedOps,
            setup: NoiseSetup, hits: nz.NoiseHits, cc: ConditionCReport, cc_spill: ConditionCReport,
            dist: pd.DataFrame, stages: dict[str, float]) -> dict[str, Any]:
    m0, m1 = float(base.summary["makespan"]), float(measured.summary["makespan"])
    led = measured.ops.ledger
    injected = {k: float(led.seconds[(led.kind == i)].sum()) for i, k in enumerate(CAUSE_KINDS)
                if k != "imbalance"}
    pattern = setup.pattern
    per_host = pattern.fraction()
    return {
        "scenario": scenario.name,
        "config": cfg.describe(),
        "makespan": {"unperturbed": m0, "measured": m1, "difference": m1 - m0,
                     "slowdown": (m1 / m0) if m0 > 0 else float("nan")},
        "total_wait": {"unperturbed": float(base.waits["wait"].sum()), "measured": float(measured.waits["wait"].sum())},
        "injected_seconds": injected,
        "noise": {
            "model": nz.describe(cfg.noise.model), "scope": cfg.noise.scope,
            "hosts_with_profiles": len(setup.speed_profiles),
            "detour_fraction": float(per_host.mean()) if per_host.size else 0.0,
            "hits": len(hits), "delayed_work_seconds": hits.total(),
            "jitter_std": cfg.noise.jitter.std, "jitter_mean": cfg.noise.jitter.mean,
        },
        "instrumentation": {"records": len(p.records), "record_bytes": float(p.records.bytes.sum())},
        "spill": dataclasses.asdict(p.spill) if p.spill is not None else None,
        "buffer": dataclasses.asdict(p.spec) if p.spec is not None else None,
        "condition_c": cc.as_dict(),
        "condition_c_spill": cc_spill.as_dict(),
        "distortion": distortion_summary(dist),
        "stage_seconds": stages,
    }  # fmt: skip


def report_text(rep: dict[str, Any]) -> str:
    """The perturbation report for humans (``perturbation.txt``)."""
    mk = rep["makespan"]
    lines = [
        f"perturbation report for scenario {rep['scenario']}",
        f"makespan: unperturbed {mk['unperturbed']:.6f} s, measured {mk['measured']:.6f} s "
        f"(+{mk['difference']:.6f} s, x{mk['slowdown']:.4f})",
        f"total wait: unperturbed {rep['total_wait']['unperturbed']:.6f} s, measured "
        f"{rep['total_wait']['measured']:.6f} s",
        "injected: " + ", ".join(f"{k} {v:.6f} s" for k, v in rep["injected_seconds"].items()),
    ]
    nzr = rep["noise"]
    if nzr["hosts_with_profiles"] or nzr["jitter_std"] or nzr["jitter_mean"]:
        lines.append(f"noise: {nzr['model']} per {nzr['scope']}, {nzr['hits']} detour hits delayed "
                     f"{nzr['delayed_work_seconds']:.6f} s of work (detours take {100 * nzr['detour_fraction']:.3f}% "
                     "of the time)")
    if rep["instrumentation"]["records"]:
        lines.append(f"instrumentation: {rep['instrumentation']['records']} records, "
                     f"{rep['instrumentation']['record_bytes'] / 2**20:.3f} MiB")
    sp = rep["spill"]
    if sp:
        lines.append(f"spilling policy {sp['policy']}: {sp['flushes']} flushes ({sp['synchronized_flushes']} "
                     f"synchronised, {sp['individual_flushes']} individual), {sp['flushed_bytes'] / 2**20:.3f} MiB "
                     f"written in {sp['flush_seconds']:.6f} s (pads {sp['pad_seconds']:.6f} s), "
                     f"{sp['swap_bytes'] / 2**20:.3f} MiB swapped; P1 (no swapping) "
                     f"{'holds' if sp['p1_ok'] else 'violated'}")
    cc = rep["condition_c"]
    lines.append("condition C (all tracer overhead): " + ("holds" if cc["holds"] else
                 f"violated by {cc['violating_pairs']}/{cc['pairs']} pairs and {cc['violating_collectives']}/"
                 f"{cc['collectives']} collectives, max difference {cc['max_difference']:.6g} s, first at rank "
                 f"{cc['first'].get('rank')} event {cc['first'].get('seq')} ({cc['first'].get('op')})"))
    cs = rep["condition_c_spill"]
    lines.append("condition C (spilling only: swap, flush, pads): " + ("holds" if cs["holds"] else
                 f"violated by {cs['violating_pairs']}/{cs['pairs']} pairs and {cs['violating_collectives']}/"
                 f"{cs['collectives']} collectives, max difference {cs['max_difference']:.6g} s"))
    d = rep["distortion"]
    lines.append(f"wait distortion: {d['wait_states']} wait states, total {d['total_distortion']:+.6f} s, "
                 f"mean |d| {d['mean_abs_distortion']:.6g} s, max |d| {d['max_abs_distortion']:.6g} s")
    for pat, v in d["by_pattern"].items():
        lines.append(f"  {pat}: unperturbed {v['unperturbed']:.6f} s -> measured {v['measured']:.6f} s "
                     f"({v['distortion']:+.6f} s)")
    return "\n".join(lines)


def buffer_timeline(res: PerturbationResult) -> pd.DataFrame:
    """Trace-buffer bytes of every rank over simulated time: one row per record and per flush.

    Columns ``rank, time, resident`` (bytes in the rank's buffer right after the record or flush),
    ``event`` (``record`` or ``flush``) and ``swapped`` (bytes of the record copied past the memory limit).
    """
    p = res.perturbed
    if p.state is None or not len(p.records):
        return pd.DataFrame({"rank": [], "time": [], "resident": [], "event": [], "swapped": []})
    ops = res.measured.ops
    ev = res.measured.events
    t_exit = np.full(len(ops), np.nan)
    t_exit[_event_op_rows(ev, ops)] = ev["exit"].to_numpy()
    new_row_of = np.full(int(p.origin.max()) + 1, -1, np.int64)
    kept = np.flatnonzero(p.origin >= 0)
    new_row_of[p.origin[kept]] = kept
    rec_time = t_exit[new_row_of[p.records.row]]
    real = p.state.flush_bytes > 0
    flush_rows = np.flatnonzero((ops.code == CODE["flush"]) & (p.origin < 0))
    if real.sum() != flush_rows.size:  # (cannot happen: every flush with bytes is one operation)
        real = np.zeros(len(p.flushes), bool)
        flush_rows = flush_rows[:0]
    rank = np.concatenate((p.records.rank, p.flushes.rank[real]))
    key_ = np.concatenate((p.records.pos, p.flushes.pos[real]))
    time_ = np.concatenate((rec_time, t_exit[flush_rows]))
    resident = np.concatenate((p.state.resident + p.records.bytes, np.zeros(int(real.sum()))))
    swapped = np.concatenate((p.state.over, np.zeros(int(real.sum()))))
    event = np.concatenate((np.zeros(len(p.records), np.int8), np.ones(int(real.sum()), np.int8)))
    order = np.lexsort((key_, rank))
    rank, time_, resident, swapped, event = rank[order], time_[order], resident[order], swapped[order], event[order]
    # a record written after a flush is stamped no earlier than the flush (program order per rank)
    time_ = nz._group_running_max(np.nan_to_num(time_, nan=0.0), rank.astype(np.int64))
    return pd.DataFrame({"rank": rank.astype(np.int32), "time": time_, "resident": resident,
                         "event": pd.Categorical.from_codes(event, categories=["record", "flush"]),
                         "swapped": swapped})


def write_perturbation_outputs(res: PerturbationResult, folder: Path, png: bool = True) -> None:
    """Write the measured run (top level), the unperturbed run (``unperturbed/``) and the report."""
    from waitlab.experiments.outputs import write_outputs
    from waitlab.simulator.export import write_table

    write_outputs(res.measured, folder, png=png)
    (folder / "unperturbed").mkdir(exist_ok=True)
    write_outputs(res.unperturbed, folder / "unperturbed", png=False)
    meta = res.measured.metadata
    write_table(res.distortion, folder / "distortion.parquet", meta)
    if len(res.condition_c.violations):
        write_table(res.condition_c.violations, folder / "condition_c_violations.parquet", meta)
    buf = buffer_timeline(res)
    if len(buf):
        write_table(buf, folder / "buffer.parquet", meta)
    (folder / "perturbation.json").write_text(json.dumps(_jsonable(res.report), indent=2, sort_keys=True) + "\n")
    (folder / "perturbation.txt").write_text(report_text(res.report) + "\n")


def load_events(path: Path) -> pd.DataFrame:
    """An event table from ``events.parquet``, ``events.csv`` or a results folder holding one.

    Raises
    ------
    InputError
        If the file is missing, unreadable, or lacks the columns condition C needs.
    """
    path = Path(path)
    if path.is_dir():
        cand = [path / "events.parquet", path / "events.csv"]
        found = [c for c in cand if c.exists()]
        if not found:
            raise InputError(str(path), "(folder)", "holds no events.parquet or events.csv",
                             "pass a results folder written by waitlab run, or the event file itself")
        path = found[0]
    if not path.exists():
        raise InputError(str(path), "(file)", "does not exist", "check the path")
    try:
        ev = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as exc:  # pyarrow/pandas raise many kinds
        raise InputError(str(path), "(file)", f"cannot be read as an event table: {exc}",
                         "use events.parquet or events.csv from a waitlab results folder") from None
    need = ("rank", "seq", "kind", "op", "enter", "exit", "match")
    missing = [c for c in need if c not in ev.columns]
    if missing:
        raise InputError(str(path), f"column {missing[0]}", "is missing",
                         f"an event table needs the columns {', '.join(need)} (docs/event_table.md)")
    return ev.sort_values(["rank", "seq"], kind="stable").reset_index(drop=True)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def run_perturbed_scenario(scenario: Scenario, out: Path, *, force: bool = False,
                           png: bool = True) -> PerturbationResult:
    """``waitlab run`` for a perturbed scenario: both runs and the report, written atomically to ``out``."""
    from waitlab.experiments.run import results_folder

    with results_folder(Path(out), force) as partial:
        paje = partial / "smpi.paje" if scenario.simulation.paje else None
        res = run_perturbed(scenario, paje_file=paje)
        write_perturbation_outputs(res, partial, png=png)
    return res


__all__ = [
    "NoiseConfig",
    "NoiseSetup",
    "PerturbationConfig",
    "PerturbationResult",
    "PerturbedOps",
    "PlatformFacts",
    "TracingConfig",
    "buffer_spec",
    "has_perturbation",
    "load_events",
    "noise_setup",
    "parse_perturbation",
    "perturb_ops",
    "perturbation_hooks",
    "run_perturbed",
    "run_perturbed_scenario",
    "write_perturbation_outputs",
]
