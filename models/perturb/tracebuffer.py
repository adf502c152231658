"""Trace buffers in memory, swapping, disk flushes, and the spilling policies that decide when to flush.

Memory model (Okita et al. section 2.3, DESIGN.md section 9)
--------------------------------------------------------
Every rank appends its records (:mod:`waitlab.models.perturb.instrumentation`) to an
in-memory buffer.  The ranks placed on a node share the memory left for trace
buffers equally: each may keep ``memory`` bytes resident.  A record copied
while the rank's resident trace exceeds ``memory`` pays ``swap_factor`` times
the normal per-byte copy cost for the bytes past the limit (Okita et al. measured
the per-MB cost rising 74.8x, from 3.26e-3 to 2.44e-1 s/MB); the extra is a
``swap`` operation (the rank is stalled on paging I/O) right after the
record's ``overhead``.  Swapping stops when a flush empties the buffer.

A flush writes the buffer to disk in ``latency + bytes / rate`` seconds
(``rate`` is the node's disk bandwidth divided among the ranks placed on it), as a
``flush`` operation; policies that equalise flush times add a ``delay`` (the
pad), and a non-zero ``writeback_cost`` adds CPU time per flushed byte after
the flush (page-cache write-back; calibrated only for the Okita et al.
reproduction).

Spilling policies
-----------------
Each policy is a small object with a ``name`` and a :meth:`plan` that returns
the flushes (:class:`Flushes`).  Policies only use what a real tracer could
know at that point: its own buffer, or -- at a collective, where every rank
takes part -- the fill levels of all ranks (piggy-backed on the collective).

============================  =====================================================================
``keep``                      :class:`KeepInMemory`: never flush; past ``memory`` every record swaps.
``per_rank``                  :class:`PerRankFlush`: flush when the next record does not fit
                              (Score-P, Extrae).  Ranks flush at different places: breaks condition C.
``swapout_f``                 :class:`SwapOutF`: Okita et al.'s function f after every ``every``-th
                              collective (or step), on every rank, lasting exactly ``tau``
                              (conditions P1, P2).
``vampir_sync``               :class:`SynchronizedFlush`: at a collective, all ranks flush when any
                              buffer passed ``fill_level`` (VampirTrace); a full buffer between
                              collectives is flushed by its rank alone.  Flush times differ.
``padded_sync``               :class:`PaddedSyncFlush` (ours): VampirTrace's trigger, but every
                              rank pads its flush to the slowest rank's write time, learned at the
                              same collective: keeps C with short, rare flushes.
``predictive_sync``           :class:`PaddedSyncFlush` (ours) with a predictive trigger: flush at a
                              collective only if the largest growth seen between collectives would
                              overflow some buffer before the next one; padded like ``padded_sync``.
============================  =====================================================================

Examples
--------
Two ranks write 4 records of 100 bytes into buffers of 250 bytes: each flushes once,
before its third record (global record index 2 and 6), just in front of its key 30.

>>> from waitlab.models.perturb.spill_policies import PerRankFlush
>>> stream = Stream.build(2, rank=[0] * 4 + [1] * 4, pos=[10, 20, 30, 40] * 2, nbytes=[100.0] * 8)
>>> spec = BufferSpec(memory=1e9, buffer_bytes=250.0, flush_rate=1e3, flush_latency=0.0)
>>> fl = PerRankFlush().plan(stream, spec, SyncPoints.none(2), SyncPoints.none(2))
>>> fl.rank.tolist(), fl.boundary.tolist(), fl.pos.tolist()
([0, 1], [2, 6], [29, 29])
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from waitlab.errors import Picklable
from waitlab.models.ops import OpTable
from waitlab.models.perturb.insertion import KEY_SCALE, Insertions, concat, row_of
from waitlab.models.perturb.instrumentation import Instrumentation, Records

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]
_B = npt.NDArray[np.bool_]


class TauTooShort(Picklable, ValueError):
    """The swap-out function's ``tau`` is shorter than one of its flushes (P2 cannot hold)."""

    def __init__(self, tau: float, rank: int, point: int, nbytes: float, seconds: float) -> None:
        self.tau, self.rank, self.point, self.nbytes, self.seconds = tau, rank, point, nbytes, seconds
        super().__init__(f"tau = {tau:g} s is shorter than the flush of rank {rank} at sync point {point} "
                         f"({nbytes:.0f} bytes take {seconds:.6g} s)")


class BufferOverflow(Picklable, ValueError):
    """A rank records more than its buffer holds between two calls of the swap-out function f (P1 cannot hold).

    ``point`` is the sync point of the f call that ends the interval (-1: the end of the run).
    """

    def __init__(self, buffer_bytes: float, rank: int, point: int, nbytes: float, every: int) -> None:
        self.buffer_bytes, self.rank, self.point, self.nbytes, self.every = buffer_bytes, rank, point, nbytes, every
        where = f"before the f call at sync point {point}" if point >= 0 else "after the last f call"
        super().__init__(f"rank {rank} records {nbytes:.0f} bytes {where}, more than its {buffer_bytes:.0f}-byte "
                         f"buffer (f every {every} point(s))")


@dataclass(frozen=True)
class BufferSpec:
    """Memory, buffer and disk of one rank.

    Parameters
    ----------
    memory : float or float64 array (one value per rank)
        Bytes of trace one rank may keep resident before it swaps (the node's
        memory left to trace buffers divided by the ranks placed on the node).
    buffer_bytes : float or float64 array (one value per rank)
        Size of the tracer's buffer: flushing policies flush before it overflows.
    flush_rate : float or float64 array (one value per rank)
        Bytes per second of one rank's flush (the node's disk bandwidth divided
        by the ranks placed on the node).
    flush_latency : float
        Seconds per flush (system call, seek).
    swap_factor : float
        Per-byte copy cost multiplier for bytes past ``memory`` (>= 1).
    writeback_cost : float
        CPU seconds per flushed byte spent after the flush (default 0).
    """

    memory: float | _F
    buffer_bytes: float | _F
    flush_rate: float | _F
    flush_latency: float = 0.0
    swap_factor: float = 1.0
    writeback_cost: float = 0.0

    def __post_init__(self) -> None:
        for key in ("memory", "buffer_bytes", "flush_rate"):
            if not bool(np.all(np.asarray(getattr(self, key)) > 0)):
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)!r}")
        if not self.flush_latency >= 0:
            raise ValueError(f"flush_latency must be >= 0, got {self.flush_latency!r}")
        if not self.swap_factor >= 1:
            raise ValueError(f"swap_factor must be >= 1, got {self.swap_factor!r}")
        if not self.writeback_cost >= 0:
            raise ValueError(f"writeback_cost must be >= 0, got {self.writeback_cost!r}")

    def of(self, key: str, rank: npt.ArrayLike) -> _F:
        """``memory``, ``buffer_bytes`` or ``flush_rate`` of the ranks ``rank`` (same shape)."""
        v = np.asarray(getattr(self, key), np.float64)
        r = np.asarray(rank, np.int64)
        return v[r] if v.ndim else np.full(r.shape, float(v))

    def write_seconds(self, nbytes: npt.ArrayLike, rank: npt.ArrayLike) -> _F:
        """Seconds for ranks ``rank`` to write ``nbytes`` (0 for an empty buffer); ``rank`` broadcasts against
        ``nbytes`` (a matrix with one column per rank takes ``rank = arange(n_ranks)``)."""
        b = np.asarray(nbytes, np.float64)
        return np.where(b > 0, self.flush_latency + b / self.of("flush_rate", rank), 0.0)

    def describe(self) -> dict[str, float | list[float]]:
        """Plain data for reports: a per-rank value that differs between ranks is listed per rank."""
        out: dict[str, float | list[float]] = {}
        for f in dataclasses.fields(self):
            v = np.asarray(getattr(self, f.name), np.float64)
            out[f.name] = float(v) if v.ndim == 0 else v.tolist()
        return out


@dataclass(frozen=True)
class Stream:
    """The records of all ranks in program order, with running byte counts.

    Attributes
    ----------
    n_ranks : int
    rank, pos : int64 arrays
        Owner and insertion key of every record, sorted by ``(rank, pos)``.
    bytes : float64 array
    cum : float64 array, length n+1
        ``cum[i]`` = bytes of all records before ``i`` (global, over the sorted rows).
    lo, hi : int64 arrays, one per rank
        The rank's records are ``lo[r]:hi[r]``.
    """

    n_ranks: int
    rank: _I
    pos: _I
    bytes: _F
    cum: _F
    lo: _I
    hi: _I

    @staticmethod
    def build(n_ranks: int, rank: npt.ArrayLike, pos: npt.ArrayLike, nbytes: npt.ArrayLike) -> Stream:
        """A stream from records sorted by ``(rank, pos)``."""
        r = np.asarray(rank, np.int64)
        p = np.asarray(pos, np.int64)
        b = np.asarray(nbytes, np.float64)
        if r.size and not np.all((np.diff(r) > 0) | ((np.diff(r) == 0) & (np.diff(p) >= 0))):
            raise ValueError("records must be sorted by (rank, pos)")
        edges = np.searchsorted(r, np.arange(n_ranks + 1))
        return Stream(n_ranks, r, p, b, np.concatenate(([0.0], np.cumsum(b))), edges[:-1].astype(np.int64),
                      edges[1:].astype(np.int64))

    def __len__(self) -> int:
        return int(self.rank.size)

    def index_before(self, rank: _I, pos: _I) -> _I:
        """Global index of the first record of ``rank`` at or after ``pos`` (records before it have pos < pos)."""
        out = np.empty(np.asarray(rank).size, np.int64)
        rank = np.asarray(rank, np.int64)
        pos = np.asarray(pos, np.int64)
        if rank.size == 0:
            return out
        # combined integer key: exact
        span = int(max(int(self.pos.max()) if len(self) else 0, int(pos.max()))) + 2
        rec_key = self.rank * span + self.pos
        q = rank * span + pos
        return np.searchsorted(rec_key, q, side="left").astype(np.int64)


@dataclass(frozen=True)
class SyncPoints:
    """Points where every rank is at the same logical place: ``(rank, point, pos)`` sorted by (point, rank)."""

    n_ranks: int
    rank: _I
    point: _I
    pos: _I
    kind: str = "collectives"

    @staticmethod
    def none(n_ranks: int, kind: str = "collectives") -> SyncPoints:
        """No synchronisation points."""
        z = np.zeros(0, np.int64)
        return SyncPoints(n_ranks, z, z, z, kind)

    @property
    def n_points(self) -> int:
        """Number of points (every rank has each)."""
        return int(self.point.max()) + 1 if self.point.size else 0

    def matrix(self) -> _I:
        """``pos`` as a (points, ranks) matrix; requires every rank at every point."""
        if self.point.size != self.n_points * self.n_ranks:
            raise ValueError(f"every rank must reach every {self.kind} point")
        return self.pos.reshape(self.n_points, self.n_ranks)


@dataclass(frozen=True)
class Flushes:
    """Flushes chosen by a policy, sorted by ``(rank, pos)``.

    Attributes
    ----------
    rank : int64 array
    boundary : int64 array
        Global record index: the flush writes the rank's records before it.
    pos : int64 array
        Insertion key of the flush (an individual flush sits just before the
        record that did not fit: ``pos`` of that record minus 1).
    pad : float64 array
        Seconds to wait after writing (to equalise durations); 0 if none.
    point : int64 array
        Sync point of a synchronised flush, -1 for an individual one.
    """

    rank: _I
    boundary: _I
    pos: _I
    pad: _F
    point: _I

    def __len__(self) -> int:
        return int(self.rank.size)

    @staticmethod
    def empty() -> Flushes:
        """No flushes."""
        z = np.zeros(0, np.int64)
        return Flushes(z, z, z, np.zeros(0), z)

    @staticmethod
    def concat(parts: list[Flushes]) -> Flushes:
        """Merge and sort flushes."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return Flushes.empty()
        rank = np.concatenate([p.rank for p in parts])
        pos = np.concatenate([p.pos for p in parts])
        order = np.lexsort((pos, rank))
        return Flushes(rank[order], np.concatenate([p.boundary for p in parts])[order], pos[order],
                       np.concatenate([p.pad for p in parts])[order], np.concatenate([p.point for p in parts])[order])


@dataclass(frozen=True)
class BufferState:
    """Resident trace before every record and the bytes of every flush.

    Attributes
    ----------
    resident : float64 array
        Bytes in the rank's buffer just before each record.
    over : float64 array
        Bytes of each record past the rank's ``memory`` (copied at swap speed).
    flush_bytes, flush_seconds : float64 arrays
        Bytes written by each flush and its write time.
    peak : float64 array
        Largest resident trace of every rank.
    """

    resident: _F
    over: _F
    flush_bytes: _F
    flush_seconds: _F
    peak: _F


def buffer_state(stream: Stream, flushes: Flushes, spec: BufferSpec) -> BufferState:
    """Resident bytes before every record, swap bytes, and flush sizes (vectorised).

    Examples
    --------
    >>> s = Stream.build(1, rank=[0, 0, 0], pos=[1, 2, 3], nbytes=[60.0, 60.0, 60.0])
    >>> st = buffer_state(s, Flushes.empty(), BufferSpec(memory=100.0, buffer_bytes=1e9, flush_rate=1.0))
    >>> st.resident.tolist(), st.over.tolist(), st.peak.tolist()
    ([0.0, 60.0, 120.0], [0.0, 20.0, 60.0], [180.0])
    """
    n = len(stream)
    idx = np.arange(n, dtype=np.int64)
    reset = np.zeros(n + 1, bool)
    reset[stream.lo] = True
    b = np.clip(flushes.boundary, 0, n)
    reset[b] = True
    base_idx = np.maximum.accumulate(np.where(reset[:n], idx, 0)) if n else idx
    resident = stream.cum[:n] - stream.cum[base_idx]
    after = resident + stream.bytes
    mem = spec.of("memory", stream.rank)
    over = np.maximum(after - mem, 0.0) - np.maximum(resident - mem, 0.0)
    # bytes of each flush: records since the previous flush (or the rank's start)
    if len(flushes):
        prev = np.concatenate(([-1], flushes.boundary[:-1]))
        first_of_rank = np.ones(len(flushes), bool)
        first_of_rank[1:] = flushes.rank[1:] != flushes.rank[:-1]
        start = np.where(first_of_rank, stream.lo[flushes.rank], np.maximum(prev, stream.lo[flushes.rank]))
        fb = stream.cum[b] - stream.cum[start]
    else:
        fb = np.zeros(0)
    peak = np.zeros(stream.n_ranks)
    if n:
        np.maximum.at(peak, stream.rank, after)
    return BufferState(resident, over, fb, spec.write_seconds(fb, flushes.rank), peak)


def _first_overflow(stream: Stream, base: _I, seg_hi: _I, cap: float | _F) -> _I:
    """For each rank, the first record in ``[base, seg_hi)`` whose end exceeds ``cap`` bytes since ``base``
    (``seg_hi`` if none)."""
    target = stream.cum[base] + cap
    j = np.searchsorted(stream.cum[1:], target, side="right")  # first i with cum[i+1] > target
    return np.minimum(np.maximum(j, base), seg_hi).astype(np.int64)


def greedy_flushes(stream: Stream, base: _I, seg_hi: _I, cap: float | _F) -> tuple[Flushes, _I]:
    """Per-rank "flush when the next record does not fit" over records ``[base[r], seg_hi[r])``.

    ``cap`` is the buffer size, one for all ranks or one per rank.

    Returns the flushes and the new buffer start of every rank.  A record
    larger than the buffer is written alone into an empty buffer.
    """
    base = base.copy()
    caps = np.broadcast_to(np.asarray(cap, np.float64), (stream.n_ranks,))
    out_rank: list[_I] = []
    out_b: list[_I] = []
    active = np.flatnonzero(base < seg_hi)
    while active.size:
        j = _first_overflow(stream, base[active], seg_hi[active], caps[active])
        inside = j < seg_hi[active]
        alone = inside & (j == base[active])
        j = np.where(alone, j + 1, j)  # oversized record: flush right after it
        flush = inside & (j < seg_hi[active])
        r = active[flush]
        out_rank.append(r)
        out_b.append(j[flush])
        # an oversized record at the very end of the segment stays in the buffer (base unchanged)
        base[r] = j[flush]
        active = r
    if not out_rank:
        return Flushes.empty(), base
    rank = np.concatenate(out_rank).astype(np.int64)
    bnd = np.concatenate(out_b).astype(np.int64)
    order = np.lexsort((bnd, rank))
    rank, bnd = rank[order], bnd[order]
    pos = stream.pos[bnd] - 1
    return Flushes(rank, bnd, pos, np.zeros(rank.size), np.full(rank.size, -1, np.int64)), base


def tracing_insertions(ops: OpTable, records: Records, inst: Instrumentation, spec: BufferSpec, flushes: Flushes,
                       state: BufferState) -> Insertions:
    """The operations a tracer adds: record overheads, swap stalls, flushes, pads and write-back.

    * every record: ``overhead`` of ``fixed_cost + bytes * copy_cost`` (kind overhead) and, for
      bytes past ``memory``, ``swap`` of ``over * copy_cost * (swap_factor - 1)`` (kind swap);
    * every flush: ``flush`` of its bytes at a rate that makes it last ``latency + bytes / rate``,
      then ``delay`` of its pad and ``overhead`` of ``writeback_cost * bytes`` (all kind flush).
    """
    parts = [
        Insertions.make(rank=records.rank, key=records.pos, tie=0, action="overhead",
                        value=inst.cost(records.bytes), kind="overhead", ref_row=records.row),
        Insertions.make(rank=records.rank, key=records.pos, tie=1, action="swap",
                        value=state.over * inst.copy_cost * (spec.swap_factor - 1.0), kind="swap",
                        ref_row=records.row),
    ]
    if len(flushes):
        ref = row_of(ops, flushes.rank, flushes.pos // KEY_SCALE - 1)
        secs = state.flush_seconds
        rate = np.where(secs > 0, state.flush_bytes / np.where(secs > 0, secs, 1.0), 1.0)
        parts += [
            Insertions.make(rank=flushes.rank, key=flushes.pos, tie=2, action="flush", value=state.flush_bytes,
                            value2=rate, kind="flush", ref_row=ref),
            Insertions.make(rank=flushes.rank, key=flushes.pos, tie=3, action="delay", value=flushes.pad,
                            kind="flush", ref_row=ref),
            Insertions.make(rank=flushes.rank, key=flushes.pos, tie=4, action="overhead",
                            value=spec.writeback_cost * state.flush_bytes, kind="flush", ref_row=ref),
        ]
    return concat(parts)
