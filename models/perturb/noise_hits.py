"""Which detours delayed which work: the noise a finished run actually paid, for the cause ledger.

A detour during a wait costs nothing; one during compute, tracer overhead or the CPU part of a
reduction delays it.  :func:`cpu_intervals` finds those intervals in a run, :func:`noise_hits` cuts
them against the detour pattern (the pipeline books each hit as a ``noise`` cause).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from waitlab.models.ops import CODE, OpTable
from waitlab.models.perturb.detours import NoisePattern
from waitlab.models.vocabulary import names_where

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]


def detour_measure(pattern: NoisePattern, host: _I, t0: _F, t1: _F) -> _F:
    """Seconds of detour of ``host`` inside ``[t0, t1)``, for every row (vectorised per host).

    Uses the cumulative detour time ``D(t) = k * per_period + partial(t - k * period)``.
    """
    out = np.zeros(np.asarray(t0).size)
    return out if pattern.is_empty else _cum(pattern, host, t1) - _cum(pattern, host, t0)


def _cum(pattern: NoisePattern, host: _I, t: _F) -> _F:
    """Cumulative detour time ``D(t)`` of each row's host since time 0."""
    t = np.asarray(t, np.float64)
    host = np.asarray(host, np.int64)
    out = np.zeros(t.size)
    lo, hi = pattern.bounds()
    per_period = pattern.per_period()
    has = np.flatnonzero(hi > lo)
    rows_by_host = np.argsort(host, kind="stable")
    edges = np.searchsorted(host[rows_by_host], np.arange(pattern.n_hosts + 1))
    for h in has.tolist():
        rows = rows_by_host[edges[h]:edges[h + 1]]
        if rows.size == 0:
            continue
        p = float(pattern.period[h])
        s = pattern.start[lo[h]:hi[h]]
        e = s + pattern.duration[lo[h]:hi[h]]
        cum_d = np.concatenate(([0.0], np.cumsum(e - s)))
        k = np.floor(t[rows] / p)
        x = t[rows] - k * p
        i = np.searchsorted(s, x, side="right")  # detours starting at or before x
        partial = cum_d[np.maximum(i - 1, 0)] + np.where(i > 0, np.minimum(x, e[np.maximum(i - 1, 0)])
                                                          - s[np.maximum(i - 1, 0)], 0.0)
        out[rows] = k * per_period[h] + partial
    return out


@dataclass(frozen=True)
class NoiseHits:
    """Detours that delayed work: one row per (detour occurrence, operation) overlap.

    A detour that crosses its pattern's period boundary (stored as two pieces by
    :func:`~waitlab.models.perturb.detours.normalize`) is one detour: one row for its overlap with an operation.

    Attributes
    ----------
    row : int64 array
        Row of the delayed operation in the operation table.
    rank : int64 array
    start, seconds : float64 arrays
        Simulated start of the overlap and the seconds of work it delayed.
    """

    row: _I
    rank: _I
    start: _F
    seconds: _F

    def __len__(self) -> int:
        return int(self.row.size)

    def total(self) -> float:
        """Seconds of work delayed by noise."""
        return float(self.seconds.sum())


#: Operations that use the CPU for their whole duration.
CPU_ACTIONS = names_where(cpu_bound=True)
#: Collective operations whose ``flops`` (``value2``) run on the CPU at the end of the operation.
FLOP_COLLECTIVES = names_where(flops_in_value2=True)


def cpu_intervals(ops: OpTable, t_enter: _F, t_exit: _F, core_speed: float, pattern: NoisePattern,
                  host_of_rank: _I) -> tuple[_I, _F, _F]:
    """Rows and ``[start, end)`` of the time every operation used the CPU.

    ``compute``, ``overhead`` and ``noise`` use the CPU from enter to exit.
    A reduction with flops computes at its end: its CPU interval is the tail
    ``[t_c, exit)`` whose noise-free length is ``flops / core_speed``; ``t_c``
    is found by fixed-point iteration on the detour measure.
    """
    code = ops.code
    full = np.flatnonzero(np.isin(code, [CODE[a] for a in CPU_ACTIONS]) & (t_exit > t_enter))
    red = np.flatnonzero(np.isin(code, [CODE[a] for a in FLOP_COLLECTIVES]) & (ops.value2 > 0))
    rows = [full]
    starts = [t_enter[full]]
    ends = [t_exit[full]]
    if red.size and core_speed > 0:
        work = ops.value2[red] / core_speed
        x = t_exit[red]
        h = host_of_rank[ops.rank[red]]
        tc = x - work
        for _ in range(64):
            new = x - work - detour_measure(pattern, h, np.maximum(tc, t_enter[red]), x)
            if np.allclose(new, tc, rtol=0, atol=1e-15):
                tc = new
                break
            tc = new
        rows.append(red)
        starts.append(np.maximum(tc, t_enter[red]))
        ends.append(x)
    return np.concatenate(rows), np.concatenate(starts), np.concatenate(ends)


def noise_hits(pattern: NoisePattern, host_of_rank: _I, rank: _I, row: _I, start: _F, end: _F,
               min_seconds: float = 0.0) -> NoiseHits:
    """Every overlap between a detour and a CPU interval ``[start, end)`` of a rank, of at least ``min_seconds``.

    ``min_seconds`` is the simulation's timing precision: SimGrid does not resolve events closer than that, so an
    overlap shorter than it is an artefact of rounding, not a delay (e.g. the start of a reduction's flops, found by
    inverting the detour measure, lands 1e-16 s inside the detour that ended just before them).

    Parameters
    ----------
    pattern : NoisePattern
    host_of_rank : int64 array
        Pattern host of every rank.
    rank, row, start, end : arrays, one per CPU interval
        Owner rank, operation row, and the simulated interval.
    min_seconds : float
        Shorter overlaps are not hits (default 0: every overlap).

    Examples
    --------
    A 1 ms detour every 10 ms at phase 5 ms; a compute stretched over [0, 21 ms) is hit twice.

    >>> from waitlab.models.perturb.noise import PeriodicNoise
    >>> pat = PeriodicNoise(100.0, 0.001, phase=0.005).pattern(1, np.random.default_rng(0))
    >>> hits = noise_hits(pat, np.array([0]), np.array([0]), np.array([7]), np.array([0.0]), np.array([0.021]))
    >>> hits.row.tolist(), [round(s, 9) for s in hits.start.tolist()], [round(s, 9) for s in hits.seconds.tolist()]
    ([7, 7], [0.005, 0.015], [0.001, 0.001])

    A compute that ends 1e-16 s into a detour was not delayed by it (it is below the 1e-9 s precision):

    >>> len(noise_hits(pat, np.array([0]), np.array([0]), np.array([7]), np.array([0.0]),
    ...                np.array([0.005 + 1e-16]), min_seconds=1e-9))
    0
    """
    empty = NoiseHits(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    if pattern.is_empty or np.asarray(row).size == 0:
        return empty
    host = host_of_rank[rank]
    lo, hi = pattern.bounds()
    out_row, out_rank, out_start, out_sec = [], [], [], []
    order = np.argsort(host, kind="stable")
    edges = np.searchsorted(host[order], np.arange(pattern.n_hosts + 1))
    for h in np.flatnonzero(hi > lo).tolist():
        sel = order[edges[h]:edges[h + 1]]
        if sel.size == 0:
            continue
        p = float(pattern.period[h])
        s = pattern.start[lo[h]:hi[h]]
        e = s + pattern.duration[lo[h]:hi[h]]
        m = s.size
        a, b = start[sel], end[sel]
        # global occurrence index g = k * m + i of the first detour ending after a and the last starting before b
        ka = np.floor(a / p)
        ia = np.searchsorted(e, a - ka * p, side="right")  # first detour of period ka ending after a
        first = (ka * m + ia).astype(np.int64)
        kb = np.floor(b / p)
        ib = np.searchsorted(s, b - kb * p, side="left")  # detours of period kb starting before b
        last = (kb * m + ib - 1).astype(np.int64)
        n = np.maximum(last - first + 1, 0)
        if not n.any():
            continue
        idx = np.repeat(np.arange(sel.size), n)
        g = np.repeat(first, n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
        k, i = np.divmod(g, m)
        ds, de = k * p + s[i], k * p + e[i]
        ov0 = np.maximum(ds, a[idx])
        ov = np.maximum(np.minimum(de, b[idx]) - ov0, 0.0)
        if m > 1 and s[0] == 0.0 and p - e[-1] <= 4 * np.spacing(p):
            # a detour that crosses the period boundary is stored as two pieces, [s, p) and [0, end - p): the last
            # detour of a period and the first of the next are one detour, so they make one hit of their sum
            joined = np.zeros(g.size, bool)
            joined[1:] = (idx[1:] == idx[:-1]) & (g[1:] == g[:-1] + 1) & (i[1:] == 0)
            if joined.any():
                heads = np.flatnonzero(~joined)
                idx, ov0, ov = idx[heads], ov0[heads], np.add.reduceat(ov, heads)
        ok = (ov > 0) & (ov >= min_seconds)
        out_row.append(row[sel][idx][ok])
        out_rank.append(rank[sel][idx][ok])
        out_start.append(ov0[ok])
        out_sec.append(ov[ok])
    if not out_row:
        return empty
    r = np.concatenate(out_row)
    order2 = np.lexsort((np.concatenate(out_start), r))
    return NoiseHits(r[order2].astype(np.int64), np.concatenate(out_rank)[order2].astype(np.int64),
                     np.concatenate(out_start)[order2], np.concatenate(out_sec)[order2])


