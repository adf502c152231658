"""Spilling policies: when each rank's trace buffer is flushed to disk (see :mod:`waitlab.models.perturb.tracebuffer`).

Each policy plans :class:`~waitlab.models.perturb.tracebuffer.Flushes` for a record stream:
``keep`` (never, swaps), ``per_rank`` (Score-P/Extrae style, breaks condition C), ``swapout_f``
(Okita et al.'s swap-out function f with fixed duration tau), ``vampir_sync`` (synchronised flush at
collectives), and our ``padded_sync`` / ``predictive_sync`` (synchronised, padded to equal duration).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import numpy as np
import numpy.typing as npt

from waitlab.models.perturb.tracebuffer import (
    BufferOverflow,
    BufferSpec,
    BufferState,
    Flushes,
    Stream,
    SyncPoints,
    TauTooShort,
    greedy_flushes,
)

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]
_B = npt.NDArray[np.bool_]


class SpillPolicy(Protocol):
    """What every spilling policy provides."""

    name: ClassVar[str]
    keeps_c: ClassVar[bool]

    def plan(self, stream: Stream, spec: BufferSpec, collectives: SyncPoints, steps: SyncPoints) -> Flushes:
        """The flushes of every rank."""
        ...


@dataclass(frozen=True)
class KeepInMemory:
    """Keep the whole trace in memory; once it outgrows ``memory`` every record swaps (Okita et al.'s S_i)."""

    name: ClassVar[str] = "keep"
    keeps_c: ClassVar[bool] = False

    def plan(self, stream: Stream, spec: BufferSpec, collectives: SyncPoints, steps: SyncPoints) -> Flushes:
        """No flushes."""
        return Flushes.empty()


@dataclass(frozen=True)
class PerRankFlush:
    """Flush a rank's buffer when its next record does not fit (Score-P, Extrae).

    Each rank decides alone, so ranks that record at different rates flush at
    different places and condition C breaks.
    """

    name: ClassVar[str] = "per_rank"
    keeps_c: ClassVar[bool] = False

    def plan(self, stream: Stream, spec: BufferSpec, collectives: SyncPoints, steps: SyncPoints) -> Flushes:
        """Greedy flushes over each rank's whole record stream."""
        fl, _ = greedy_flushes(stream, stream.lo.copy(), stream.hi.copy(), spec.buffer_bytes)
        return fl


def sync_boundaries(stream: Stream, pts: SyncPoints) -> _I:
    """(points, ranks) matrix of the global record index at every sync point."""
    m = pts.matrix()
    ranks = np.broadcast_to(np.arange(pts.n_ranks, dtype=np.int64), m.shape)
    return stream.index_before(ranks.ravel(), m.ravel()).reshape(m.shape)


@dataclass(frozen=True)
class SwapOutF:
    """Okita et al.'s swap-out function f: write and clear the buffer, then busy-wait until ``tau`` has passed.

    f is placed statically after every ``every``-th collective (``sync =
    "collectives"``) or at the end of every ``every``-th step (``sync =
    "steps"``), so every rank calls it equally often (P2 with a fixed
    duration) and, with ``every`` small enough, no buffer outgrows memory (P1).

    f is the only place a rank's buffer is written (Okita et al.: the tracer
    keeps its records in memory between f calls), so a rank that records more
    than ``buffer_bytes`` between two f calls (or after the last one) is refused
    rather than silently overflowing the buffer.

    Raises
    ------
    BufferOverflow
        If some rank records more than ``buffer_bytes`` between two f calls.
    TauTooShort
        If some flush takes longer than ``tau``.
    """

    tau: float
    every: int = 1
    sync: str = "collectives"
    name: ClassVar[str] = "swapout_f"
    keeps_c: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not self.tau > 0:
            raise ValueError(f"tau must be > 0, got {self.tau!r}")
        if self.every < 1:
            raise ValueError(f"every must be >= 1, got {self.every!r}")
        if self.sync not in ("collectives", "steps"):
            raise ValueError(f"sync must be 'collectives' or 'steps', got {self.sync!r}")

    def plan(self, stream: Stream, spec: BufferSpec, collectives: SyncPoints, steps: SyncPoints) -> Flushes:
        """f after every ``every``-th point on every rank, padded to ``tau``."""
        pts = collectives if self.sync == "collectives" else steps
        if pts.n_points == 0:
            return Flushes.empty()
        bnd = sync_boundaries(stream, pts)
        m = pts.matrix()
        chosen = np.arange(self.every - 1, pts.n_points, self.every)
        if chosen.size == 0:
            return Flushes.empty()
        b = bnd[chosen]
        prev = np.vstack((stream.lo[None, :], b[:-1]))
        nbytes = stream.cum[b] - stream.cum[prev]
        # what each rank records between two f calls, and after the last one, must fit in its buffer (P1)
        grow = np.vstack((nbytes, stream.cum[stream.hi] - stream.cum[b[-1]]))
        ranks = np.arange(pts.n_ranks)
        cap = spec.of("buffer_bytes", ranks)
        if (grow > cap).any():
            i, r = np.unravel_index(int(np.argmax(grow - cap)), grow.shape)
            at = int(chosen[i]) if i < chosen.size else -1
            raise BufferOverflow(float(cap[r]), int(r), at, float(grow[i, r]), self.every)
        secs = spec.write_seconds(nbytes, ranks)
        if (secs > self.tau).any():
            i, r = np.unravel_index(int(np.argmax(secs)), secs.shape)
            raise TauTooShort(self.tau, int(r), int(chosen[i]), float(nbytes[i, r]), float(secs[i, r]))
        rank = np.broadcast_to(np.arange(pts.n_ranks, dtype=np.int64), b.shape)
        point = np.broadcast_to(chosen[:, None], b.shape)
        fl = Flushes(rank.ravel().copy(), b.ravel().copy(), m[chosen].ravel().copy(), (self.tau - secs).ravel(),
                     point.ravel().astype(np.int64))
        return Flushes.concat([fl])


def largest_safe_every(stream: Stream, pts: SyncPoints, cap: float | _F) -> int:
    """Largest ``every`` for which no rank records more than ``cap`` bytes (its buffer, one for all ranks or one
    per rank) between two f calls (P1).

    This is the programmer's static choice of Okita et al. (it knows how much each
    step records); 1 if even every point is not enough.
    """
    if pts.n_points == 0:
        return 1
    bnd = sync_boundaries(stream, pts)
    full = np.vstack((stream.lo[None, :], bnd, stream.hi[None, :]))
    cum = stream.cum[full]  # (points+2, ranks)

    def ok(e: int) -> bool:
        # f calls at points e-1, 2e-1, ... (rows e, 2e, ... of ``full``): growth between consecutive calls
        cuts = np.concatenate(([0], np.arange(e, pts.n_points + 1, e), [pts.n_points + 1]))
        grow = np.diff(cum[np.unique(cuts)], axis=0)
        return bool((grow <= cap).all())

    lo, hi = 1, pts.n_points
    if not ok(1):
        return 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True)
class SynchronizedFlush:
    """VampirTrace's synchronised flush: at a collective, every rank flushes if any buffer passed ``fill_level``.

    The fill levels travel with the collective (what VampirTrace's
    ``VT_SYNC_FLUSH`` does).  A buffer that fills up between collectives is
    flushed by its rank alone.  Every rank writes its own bytes, so flush
    durations differ: condition C breaks by the difference.
    """

    fill_level: float = 0.8
    name: ClassVar[str] = "vampir_sync"
    keeps_c: ClassVar[bool] = False
    pad: ClassVar[bool] = False
    predictive: ClassVar[bool] = False
    safety: ClassVar[float] = 1.0
    window: ClassVar[int] = 0

    def __post_init__(self) -> None:
        if not 0 < self.fill_level <= 1:
            raise ValueError(f"fill_level must be in (0, 1], got {self.fill_level!r}")

    def plan(self, stream: Stream, spec: BufferSpec, collectives: SyncPoints, steps: SyncPoints) -> Flushes:
        """Walk the collectives in order; flush all ranks where the trigger fires."""
        return _sync_plan(stream, spec, collectives, fill_level=self.fill_level, pad=self.pad,
                          predictive=self.predictive, safety=self.safety, window=self.window)


@dataclass(frozen=True)
class PaddedSyncFlush:
    """Our policy: synchronised flushes whose durations are padded to the slowest rank's write.

    At every collective each rank learns, with the collective, the fill level
    of every buffer (and, for the predictive trigger, how much every rank
    recorded since the previous collective).  All ranks flush together when

    * ``trigger = "fill"``: some buffer passed ``fill_level`` of its size, or
    * ``trigger = "predict"``: some buffer would overflow before the next
      collective if it grew by ``safety`` times the largest growth between two
      collectives seen in the last ``window`` intervals (0 = all so far),

    and every rank then waits until the slowest rank's write has finished
    (``latency + max fill / rate``, known to all from the same collective), so
    flushes have equal counts and equal durations: condition C holds.  Compared
    with f it flushes only when needed and only as long as needed (f needs a
    conservative ``tau`` and interval).  A buffer that fills up between
    collectives anyway (a growth burst the trigger did not foresee) is flushed
    by its rank alone, breaking C there; the report counts these.
    """

    trigger: str = "predict"
    fill_level: float = 0.8
    safety: float = 1.5
    window: int = 0
    name: ClassVar[str] = "predictive_sync"
    keeps_c: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.trigger not in ("fill", "predict"):
            raise ValueError(f"trigger must be 'fill' or 'predict', got {self.trigger!r}")
        if not 0 < self.fill_level <= 1:
            raise ValueError(f"fill_level must be in (0, 1], got {self.fill_level!r}")
        if not self.safety >= 1:
            raise ValueError(f"safety must be >= 1, got {self.safety!r}")
        if self.window < 0:
            raise ValueError(f"window must be >= 0, got {self.window!r}")

    def plan(self, stream: Stream, spec: BufferSpec, collectives: SyncPoints, steps: SyncPoints) -> Flushes:
        """Walk the collectives in order; flush all ranks (padded) where the trigger fires."""
        return _sync_plan(stream, spec, collectives, fill_level=self.fill_level, pad=True,
                          predictive=self.trigger == "predict", safety=self.safety, window=self.window)


def _sync_plan(stream: Stream, spec: BufferSpec, pts: SyncPoints, *, fill_level: float, pad: bool,
               predictive: bool, safety: float, window: int) -> Flushes:
    cap = spec.buffer_bytes
    base = stream.lo.copy()
    parts: list[Flushes] = []
    if pts.n_points == 0:
        fl, _ = greedy_flushes(stream, base, stream.hi.copy(), cap)
        return fl
    bnd = sync_boundaries(stream, pts)
    m = pts.matrix()
    ranks = np.arange(pts.n_ranks, dtype=np.int64)
    growth_hist: list[float] = []
    prev_b = stream.lo.copy()
    for k in range(pts.n_points):
        b = bnd[k]
        fl, base = greedy_flushes(stream, base, b, cap)
        parts.append(fl)
        fill = stream.cum[b] - stream.cum[base]
        growth_hist.append(float((stream.cum[b] - stream.cum[prev_b]).max()))
        prev_b = b
        if predictive:
            hist = growth_hist[-window:] if window else growth_hist
            fire = bool((fill + safety * max(hist) > cap).any())
        else:
            fire = bool((fill >= fill_level * cap).any())
        if fire:
            secs = spec.write_seconds(fill, ranks)
            pads = (secs.max() - secs) if pad else np.zeros(pts.n_ranks)
            parts.append(Flushes(ranks.copy(), b.copy(), m[k].copy(), pads, np.full(pts.n_ranks, k, np.int64)))
            base = b.copy()
    fl, _ = greedy_flushes(stream, base, stream.hi.copy(), cap)
    parts.append(fl)
    return Flushes.concat(parts)


#: Policy names accepted in ``[tracing] policy``.
POLICIES: dict[str, str] = {
    "keep": "keep everything in memory (swaps past the memory limit)",
    "per_rank": "flush a rank's buffer when full (Score-P / Extrae)",
    "swapout_f": "Okita et al.'s swap-out function f every N collectives or steps, lasting tau (P1, P2)",
    "vampir_sync": "all ranks flush at a collective when any buffer passed fill_level (VampirTrace)",
    "padded_sync": "ours: VampirTrace's trigger, flushes padded to the slowest rank (keeps C)",
    "predictive_sync": "ours: flush at a collective only when the next interval could overflow, padded (keeps C)",
}


def make_policy(name: str, *, tau: float = 1.0, every: int = 1, sync: str = "collectives", fill_level: float = 0.8,
                safety: float = 1.5, window: int = 0) -> SpillPolicy:
    """The policy called ``name`` with its parameters (unused ones are ignored).

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones).
    """
    if name == "keep":
        return KeepInMemory()
    if name == "per_rank":
        return PerRankFlush()
    if name == "swapout_f":
        return SwapOutF(tau=tau, every=every, sync=sync)
    if name == "vampir_sync":
        return SynchronizedFlush(fill_level=fill_level)
    if name == "padded_sync":
        return PaddedSyncFlush(trigger="fill", fill_level=fill_level, safety=safety, window=window)
    if name == "predictive_sync":
        return PaddedSyncFlush(trigger="predict", fill_level=fill_level, safety=safety, window=window)
    raise ValueError(f"unknown spilling policy {name!r}; known: {', '.join(POLICIES)}")


@dataclass(frozen=True)
class SpillSummary:
    """What a policy did (for reports and the policy comparison).

    ``flush_seconds`` is the writing alone (``latency + bytes / rate`` of every flush); ``pad_seconds`` the pads
    (``delay`` rows) that equalise synchronised flushes.  The ledger books both, and any write-back, as kind
    ``flush``.
    """

    policy: str
    flushes: int
    synchronized_flushes: int
    individual_flushes: int
    flushed_bytes: float
    flush_seconds: float
    pad_seconds: float
    swap_bytes: float
    peak_resident: float
    p1_ok: bool
    per_rank_flushes: list[int] = field(default_factory=list)


def summarize_spill(policy: str, stream: Stream, flushes: Flushes, state: BufferState,
                    spec: BufferSpec) -> SpillSummary:
    """Counts and totals of what a policy did."""
    sync = flushes.point >= 0
    real = state.flush_bytes > 0
    return SpillSummary(
        policy=policy,
        flushes=len(flushes),
        synchronized_flushes=int(sync.sum()),
        individual_flushes=int((~sync).sum()),
        flushed_bytes=float(state.flush_bytes.sum()),
        flush_seconds=float(state.flush_seconds.sum()),
        pad_seconds=float(flushes.pad.sum()),
        swap_bytes=float(state.over.sum()),
        peak_resident=float(state.peak.max()) if state.peak.size else 0.0,
        p1_ok=bool((state.peak <= spec.memory).all()),
        per_rank_flushes=np.bincount(flushes.rank[real | sync], minlength=stream.n_ranks).tolist(),
    )
