"""The perturbation stage: jitter, instrumentation records, trace buffers, spilling, and system noise.

Pure functions over operation tables (no SimGrid, no files).  :func:`perturb_ops`
applies jitter, instrumentation records, swap and the spilling policy of a
:class:`PerturbationConfig`; :func:`noise_setup` draws the detours of the noise
model and renders them as SimGrid speed profiles (text) per host;
:func:`noise_ledger` books the detours that delayed work into the cause ledger.

Seeds: the noise draws use ``numpy.random.default_rng([seed, 0x6E6F6973])``
(the scenario seed and the stream tag "nois"), the jitter ``[seed, 0x6A697474]``,
so adding or removing an application's random draws never changes the noise.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError
from waitlab.models.ops import CAUSE_KINDS, Ledger, OpTable
from waitlab.models.perturb import detours as dt
from waitlab.models.perturb import noise as nz
from waitlab.models.perturb import noise_hits as nh
from waitlab.models.perturb.insertion import Insertions, apply_insertions, concat, key
from waitlab.models.perturb.instrumentation import (
    SUB_JITTER,
    Instrumentation,
    OnlySelectsNothing,
    Records,
    collective_points,
    select_records,
    step_points,
)
from waitlab.models.perturb.spill_policies import (
    SpillSummary,
    largest_safe_every,
    make_policy,
    summarize_spill,
    sync_boundaries,
)
from waitlab.models.perturb.tracebuffer import (
    BufferOverflow,
    BufferSpec,
    BufferState,
    Flushes,
    Stream,
    SyncPoints,
    TauTooShort,
    buffer_state,
    tracing_insertions,
)
from waitlab.models.regions import enclosing_region

NOISE_MODELS = ("none", "periodic", "poisson", "signature")
NOISE_SCOPES = ("node", "core")
SYNC_KINDS = ("collectives", "steps")

#: Event kinds the spilling policy is responsible for (condition C of the spill alone).
SPILL_KINDS = ("swap", "flush", "delay")

_NOISE_STREAM = 0x6E6F6973
_JITTER_STREAM = 0x6A697474


@dataclass(frozen=True)
class NoiseConfig:
    """Validated ``[noise]``: the detour model, its scope, and compute jitter."""

    model: Any = field(default_factory=nz.NoNoise)
    scope: str = "node"
    jitter: nz.GaussianJitter = field(default_factory=lambda: nz.GaussianJitter(0.0))
    horizon_factor: float = 4.0
    nodes: tuple[int, ...] = ()  # nodes whose hosts get detours (empty: every node)
    precision: float = 1e-9  # the simulation's timing precision: shorter detour hits are not hits

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


def ranks_on_node(facts: PlatformFacts) -> npt.NDArray[np.int64]:
    """For every rank, the number of ranks placed on its node (not the platform's ``ranks_per_node``: the last
    node of 13 ranks at 4 per node holds 1)."""
    node = np.asarray(facts.node_of_rank, np.int64)
    return np.bincount(node)[node] if node.size else np.zeros(0, np.int64)


def buffer_spec(cfg: TracingConfig, facts: PlatformFacts, file: str = "<scenario>") -> BufferSpec:
    """Per-rank memory, buffer and disk share from ``[tracing]`` and the platform.

    The ranks placed on a node share its trace memory and disk bandwidth equally; the shares are one number when
    every node holds as many ranks, else one per rank.
    """
    count = ranks_on_node(facts)
    share: float | npt.NDArray[np.float64] = (1.0 / count[0] if count.size and (count == count[0]).all()
                                              else 1.0 / np.maximum(count, 1))
    memory = (cfg.memory if cfg.memory is not None else facts.node_memory) * share
    bw = (cfg.disk_bandwidth if cfg.disk_bandwidth is not None else facts.disk_bandwidth) * share
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
    except OnlySelectsNothing as exc:
        raise InputError(file, "instrumentation.only", exc.problem, exc.fix) from None
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
        cap = spec.of("buffer_bytes", stream.rank)
        if tr.policy != "keep" and len(stream) and bool((stream.bytes > cap).any()):
            i = int(np.argmax(stream.bytes - cap))
            inst = cfg.instrumentation
            raise InputError(file, "tracing.buffer_bytes", f"{float(cap[i]):g} bytes is smaller than one "
                             f"record: rank {int(stream.rank[i])} writes a {float(stream.bytes[i]):g}-byte record "
                             f"(instrumentation.record_bytes = {inst.record_bytes}"
                             + (f" + payload {inst.payload:g} x the message bytes" if inst.payload else "") + ")",
                             f"use buffer_bytes >= {float(stream.bytes.max()):g}") from None
        every = tr.every
        if every == "auto":
            every = largest_safe_every(stream, pts, spec.buffer_bytes)
        policy = make_policy(tr.policy, tau=tr.tau, every=int(every), sync=tr.sync, fill_level=tr.fill_level,
                             safety=tr.safety, window=tr.window)
        try:
            flushes = policy.plan(stream, spec, coll, steps)
        except BufferOverflow as exc:
            pt = tr.sync[:-1]
            where = f"before the f call at {pt} point {exc.point}" if exc.point >= 0 else "after the last f call"
            grow = np.diff(stream.cum[np.vstack((stream.lo[None, :], sync_boundaries(stream, pts),
                                                 stream.hi[None, :]))], axis=0).max(axis=0)  # per rank
            most = float(grow.max())
            if tr.every == "auto":
                problem = (f'every = "auto" finds no interval: even with f after every {pt}, rank {exc.rank} records '
                           f"{exc.nbytes:.0f} bytes {where}, more than buffer_bytes = {exc.buffer_bytes:g} "
                           "(f is the only flush, so the buffer would overflow)")
            else:
                problem = (f"rank {exc.rank} records {exc.nbytes:.0f} bytes {where} (f every {exc.every} {pt} "
                           f"point(s)), more than buffer_bytes = {exc.buffer_bytes:g}: f is the only flush, so the "
                           "buffer would overflow (P1 does not hold)")
            safe = largest_safe_every(stream, pts, spec.buffer_bytes)
            fits = bool((grow <= spec.of("buffer_bytes", np.arange(ops.n_ranks))).all())  # some every works
            fix = (f'use every = {safe} (or "auto"), or buffer_bytes >= {exc.nbytes:.0f}' if fits else
                   f"use buffer_bytes >= {most:.0f} (the most a rank records between two {tr.sync}), or a "
                   "flushing policy such as \"padded_sync\"")
            raise InputError(file, "tracing.buffer_bytes" if tr.every == "auto" or not fits else "tracing.every",
                             problem, fix) from None
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



@dataclass(frozen=True)
class NoiseSetup:
    """Detour pattern, its hosts and the SimGrid speed profiles of one run."""

    pattern: dt.NoisePattern
    pattern_host_of_rank: npt.NDArray[np.int64]
    speed_profiles: dict[str, str]
    horizon: float
    precision: float = 1e-9  # the simulation's timing precision (shorter overlaps are no hits)

    @property
    def active(self) -> bool:
        """Whether any host gets a profile."""
        return bool(self.speed_profiles)


#: Most detours one host may get over the run.  Each is two speed changes SimGrid processes and, when it delays work,
#: a noise row of the ledger: measured at 1.5 million per host (50 MHz periodic noise on a 0.03 s, 2-node stencil)
#: about 3 us and 0.4 KB per detour and host, so this bound keeps the noise of one host within a few seconds and
#: 0.5 GB, and still lets 1 kHz noise run for 1,000 simulated seconds.
MAX_DETOURS_PER_HOST = 1_000_000


def _down(x: float, digits: int = 4) -> float:
    """``x`` rounded down to ``digits`` significant digits (a limit that still passes: 199998.9 -> 199900)."""
    if not (x > 0 and np.isfinite(x)):
        return x
    step = 10.0 ** (int(np.floor(np.log10(x))) - digits + 1)
    return float(np.floor(x / step) * step)


def _up(x: float, digits: int = 4) -> float:
    """``x`` rounded up to ``digits`` significant digits."""
    if not (x > 0 and np.isfinite(x)):
        return x
    step = 10.0 ** (int(np.floor(np.log10(x))) - digits + 1)
    return float(np.ceil(x / step) * step)


def check_detour_count(cfg: NoiseConfig, horizon: float, file: str = "<scenario>") -> None:
    """Refuse a noise model that would give one host more than :data:`MAX_DETOURS_PER_HOST` detours over the
    run with a one-line :class:`InputError`.

    The run is the unperturbed makespan (``horizon / cfg.horizon_factor``) stretched by the noise: the detours
    take the fraction ``f`` of a host's time (``frequency`` or ``rate`` x ``duration``, a signature's detour
    seconds per ``period``), so its work takes about ``makespan / (1 - f)`` (89 % noise makes a 5 s run 47 s
    long, and gives 9 times the detours of the unperturbed 5 s).  The limit in the fix solves
    ``per_second x makespan / (1 - f) <= MAX`` for the key, rounded so that it passes.
    """
    m = cfg.model
    run = horizon / cfg.horizon_factor
    if isinstance(m, nz.PeriodicNoise):
        key, per_second, what, detour = "noise.frequency", m.frequency, "frequency", m.duration
        seconds = m.frequency * m.duration
    elif isinstance(m, nz.PoissonNoise):
        key, per_second, what, detour = "noise.rate", m.rate, "rate", m.duration
        seconds = m.rate * m.duration
    elif isinstance(m, nz.SignatureNoise):
        key, per_second, what, detour = "noise.period", len(m.start) / m.period, "signature", 0.0
        covered = m.period - dt.uncovered_time(m.start, m.duration, m.period)  # detour seconds per period
        seconds = covered / m.period
    else:
        return
    fraction = min(max(seconds, 0.0), 1.0)
    stretched = run / (1.0 - fraction) if fraction < 1.0 else float("inf")
    count = per_second * stretched
    if count <= MAX_DETOURS_PER_HOST:
        return
    n = MAX_DETOURS_PER_HOST
    if what != "signature":  # per_second x run / (1 - per_second x detour) <= n
        fix = (f"use {what} <= {_down(n / (run + n * detour)):.6g} per second for this run (fewer, longer detours "
               "give the same noise fraction)")
    else:  # len x run / (period - detour seconds per period) <= n
        fix = (f"use a period of at least {_up(len(m.start) * run / n + covered):.6g} s, or keep fewer detours in "
               "the signature")
    raise InputError(file, key, f"{per_second:.6g} detours per second over the {run:.6g} s run, which the noise "
                     f"({100 * fraction:.3g}% of the time) stretches to about {stretched:.6g} s, give "
                     f"{int(np.ceil(count)):,} detours per host; waitlab simulates at most {n:,} per host (each is "
                     "two speed changes in SimGrid and, when it delays work, a row of the ledger)", fix)


def check_free_time(cfg: NoiseConfig, pattern: dt.NoisePattern, host_is: str = "node",
                    file: str = "<scenario>") -> None:
    """Refuse a drawn pattern that leaves a host less than the timing precision of its period outside detours.

    SimGrid would replay that host's speed profile for ever: the run would end only at its time limit.  Periodic
    noise and signatures are refused when they are read (``duration x frequency >= 1``; detours that cover the
    signature's period); Poisson detours queue, so a draw can fill a whole horizon even with ``rate x duration < 1``
    (0.999 often does on a short run, whose horizon holds few detours).
    """
    free = pattern.free_time()
    stuck = np.flatnonzero((free < cfg.precision) | (free <= 0.0))
    if not stuck.size:
        return
    h = int(stuck[0])
    what = f"{host_is} {h}" + (f" (and {stuck.size - 1} more)" if stuck.size > 1 else "")
    m = cfg.model
    if isinstance(m, nz.PoissonNoise):
        raise InputError(file, "noise.rate", f"rate x duration = {m.rate * m.duration:g}: the detours drawn for "
                         f"{what} queue back to back over the whole {float(pattern.period[h]):g} s the pattern "
                         "repeats, so it would never compute and the run would never end",
                         "lower rate or duration: rate x duration well below 1, e.g. 0.5")
    raise InputError(file, "noise", f"the detours of {what} cover its whole {float(pattern.period[h]):g} s period, so "
                     "it would never compute and the run would never end", "use fewer or shorter detours")


def noise_setup(cfg: NoiseConfig, facts: PlatformFacts, seed: int, horizon: float,
                file: str = "<scenario>") -> NoiseSetup:
    """Draw the detours and render one speed profile per host that runs ranks.

    ``scope = "node"``: one pattern per node, on every host of the node (all
    its cores stall together).  ``scope = "core"``: one pattern per rank,
    which needs one host per rank (``split_cores = true`` or one rank per node).
    ``cfg.nodes`` (non-empty) keeps the detours of the patterns of those nodes
    only; the patterns are drawn for every host first, so the hit nodes get the
    same detours as without the selector.
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
        return NoiseSetup(dt.empty_pattern(n_hosts), phost, {}, horizon, cfg.precision)
    check_detour_count(cfg, horizon, file)
    rng = np.random.default_rng([seed, _NOISE_STREAM])
    pattern = cfg.model.pattern(n_hosts, rng, horizon)
    if cfg.nodes:
        n_nodes = int(facts.node_of_rank.max()) + 1 if n else 0
        if max(cfg.nodes) >= n_nodes:
            raise InputError(file, "noise.nodes", f"node {max(cfg.nodes)} does not exist: the ranks run on "
                             f"{n_nodes} node(s)", f"use nodes 0..{n_nodes - 1}")
        node_of_phost = np.zeros(n_hosts, np.int64)
        node_of_phost[phost] = facts.node_of_rank.astype(np.int64)
        pattern = dt.only_hosts(pattern, np.isin(node_of_phost, np.asarray(cfg.nodes, np.int64)))
    check_free_time(cfg, pattern, "node" if cfg.scope != "core" else "rank", file)
    profiles: dict[str, str] = {}
    host_pattern: dict[str, int] = {}
    for r in range(n):
        host_pattern.setdefault(facts.host_of_rank[r], int(phost[r]))
    texts: dict[int, str] = {}
    for host, ph in host_pattern.items():
        if ph not in texts:
            texts[ph] = dt.profile_text(pattern, ph)
        if texts[ph]:
            profiles[host] = texts[ph]
    return NoiseSetup(pattern, phost, profiles, horizon, cfg.precision)


def noise_ledger(ops: OpTable, t_enter: npt.NDArray[np.float64], t_exit: npt.NDArray[np.float64],
                 setup: NoiseSetup, core_speed: float) -> tuple[Ledger, nh.NoiseHits]:
    """Ledger rows (kind noise) for every detour that delayed work in a finished run."""
    rows, a, b = nh.cpu_intervals(ops, t_enter, t_exit, core_speed, setup.pattern, setup.pattern_host_of_rank)
    hits = nh.noise_hits(setup.pattern, setup.pattern_host_of_rank, ops.rank[rows].astype(np.int64), rows, a, b,
                         setup.precision)
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
