"""Detour patterns: when the operating system takes each host's CPU away, and SimGrid's speed profile of it.

A *detour* is an interval during which the operating system (or a daemon)
takes the CPU away from the application.  A :class:`NoisePattern` holds the
detours of every host, repeating with a per-host period; the noise models of
:mod:`waitlab.models.perturb.noise` draw them and :func:`profile_text` turns a
host's detours into a SimGrid *speed profile*: during a detour the host runs at
:data:`DETOUR_SCALE` (1e-12) of its peak speed, so a ``compute`` or
``overhead`` action in progress is stalled for exactly the detour, while a
rank waiting in MPI (not using the CPU) loses nothing.  SimGrid 3.32 ignores a
speed scale of exactly 0, hence the tiny positive value; the resulting error
is 1e-12 of the detour length.

Examples
--------
>>> pat = normalize(2, 0.25, [0, 1], [0.0625, 0.0625], [0.125, 0.125])
>>> print(profile_text(pat, 0))
PERIODICITY 0.25
0.0625 1e-12
0.1875 1.0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: Speed scale of a host during a detour (SimGrid 3.32 ignores a scale of exactly 0).
DETOUR_SCALE = 1e-12

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]


@dataclass(frozen=True)
class NoisePattern:
    """Detours of every host, repeating with a per-host period.

    Attributes
    ----------
    n_hosts : int
    period : float64 array, one per host
        The pattern of host ``h`` repeats every ``period[h]`` seconds (``inf``: no detours).
    host : int64 array, one per detour
        Host of each detour; rows are sorted by ``(host, start)``.
    start, duration : float64 arrays
        Detour start in ``[0, period)`` and length; detours of one host do not
        overlap and do not cross the period boundary (a detour that would is
        split in two).
    """

    n_hosts: int
    period: _F
    host: _I
    start: _F
    duration: _F

    def __len__(self) -> int:
        return int(self.host.size)

    @property
    def is_empty(self) -> bool:
        """True when no host has any detour of positive length."""
        return not bool((self.duration > 0).any())

    def bounds(self) -> tuple[_I, _I]:
        """Row range ``[lo[h], hi[h])`` of every host's detours."""
        edges = np.searchsorted(self.host, np.arange(self.n_hosts + 1))
        return edges[:-1].astype(np.int64), edges[1:].astype(np.int64)

    def per_period(self) -> _F:
        """Detour seconds per period of every host."""
        return np.bincount(self.host, weights=self.duration, minlength=self.n_hosts).astype(np.float64)

    def fraction(self) -> _F:
        """Fraction of time every host is in a detour."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(np.isfinite(self.period), self.per_period() / self.period, 0.0)

    def free_time(self) -> _F:
        """Seconds of every host's period outside its detours (``inf`` for a host without detours).

        The detours of a host are merged, so a host whose detours cover its whole period has exactly one, from 0
        to the period, and a free time of exactly 0: it would never compute (SimGrid would replay its speed
        profile for ever).

        >>> normalize(2, [0.5, 1.0], [0, 1], [0.0, 0.5], [0.5 - 1e-3, 0.25]).free_time().round(9).tolist()
        [0.001, 0.75]
        >>> normalize(1, 0.5, [0, 0], [0.0, 0.25], [0.25, 0.25]).free_time().tolist()
        [0.0]
        """
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(self.period), self.period - self.per_period(), np.inf)


def empty_pattern(n_hosts: int) -> NoisePattern:
    """A pattern without detours."""
    return NoisePattern(n_hosts, np.full(n_hosts, np.inf), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))


def only_hosts(pattern: NoisePattern, keep: npt.ArrayLike) -> NoisePattern:
    """``pattern`` with the detours of the hosts where ``keep`` is False removed (their period becomes ``inf``).

    Examples
    --------
    >>> p = normalize(3, [1.0], [0, 1, 2], [0.1, 0.2, 0.3], [0.1, 0.1, 0.1])
    >>> q = only_hosts(p, [False, True, False])
    >>> q.host.tolist(), q.start.tolist(), q.period.tolist()
    ([1], [0.2], [inf, 1.0, inf])
    """
    k = np.broadcast_to(np.asarray(keep, bool), (pattern.n_hosts,))
    rows = k[pattern.host]
    return NoisePattern(pattern.n_hosts, np.where(k, pattern.period, np.inf), pattern.host[rows],
                        pattern.start[rows], pattern.duration[rows])


def normalize(n_hosts: int, period: npt.ArrayLike, host: npt.ArrayLike, start: npt.ArrayLike,
              duration: npt.ArrayLike) -> NoisePattern:
    """Build a valid :class:`NoisePattern` from raw detours of any order.

    Starts are taken modulo the period, detours crossing the period boundary
    are split, overlapping or touching detours of one host are merged, and
    zero-length ones dropped.

    Examples
    --------
    >>> p = normalize(1, [1.0], [0, 0], [0.9, 0.2], [0.2, 0.1])
    >>> p.start.tolist(), [round(d, 12) for d in p.duration.tolist()]
    ([0.0, 0.2, 0.9], [0.1, 0.1, 0.1])
    """
    per = np.broadcast_to(np.asarray(period, np.float64), (n_hosts,)).copy()
    h = np.asarray(host, np.int64)
    s = np.asarray(start, np.float64)
    d = np.asarray(duration, np.float64)
    if h.size == 0:
        return NoisePattern(n_hosts, per, h, s, d)
    if (d < 0).any() or not np.isfinite(d).all():
        raise ValueError("detour durations must be finite and >= 0")
    p = per[h]
    if (d >= p).any():
        raise ValueError("a detour at least as long as its period would stop the host for ever")
    # a start that is a whole number of periods (phase = 5.0 with a 0.1 s period) must land on 0, not on the
    # period minus the rounding error of the remainder (5.0 mod 0.1 = 0.0999999999999997): that left a 3e-16 s
    # sliver of every detour at the end of the period, which SimGrid cannot resolve and the ledger counted as hits
    s0 = s
    s = np.mod(s0, p)
    s = np.where(p - s <= 4 * np.spacing(np.maximum(np.abs(s0), p)), 0.0, s)
    end = s + d
    cross = end > p
    # split detours that cross the period boundary: [s, p) and [0, end - p)
    n_cross = int(cross.sum())
    h = np.concatenate((h, h[cross]))
    s2 = np.concatenate((s, np.zeros(n_cross)))
    e2 = np.concatenate((np.where(cross, p, end), end[cross] - p[cross]))
    # exact length of unsplit detours (end - start can lose the last bit)
    d2 = np.concatenate((np.where(cross, p - s, d), end[cross] - p[cross]))
    keep = e2 > s2
    h, s2, e2, d2 = h[keep], s2[keep], e2[keep], d2[keep]
    order = np.lexsort((s2, h))
    h, s2, e2, d2 = h[order], s2[order], e2[order], d2[order]
    # merge overlapping/touching intervals per host: running max of ends within the host
    run_end = group_running_max(e2, h)
    new = np.ones(h.size, bool)
    new[1:] = (h[1:] != h[:-1]) | (s2[1:] > run_end[:-1])
    heads = np.flatnonzero(new)
    starts = s2[new]
    ends = np.maximum.reduceat(e2, heads)
    single = np.diff(np.append(heads, h.size)) == 1
    hosts = h[new]
    dur = np.where(single, d2[heads], ends - starts)
    return NoisePattern(n_hosts, per, hosts.astype(np.int64), starts, dur)


def uncovered_time(start: npt.ArrayLike, duration: npt.ArrayLike, period: float) -> float:
    """Seconds of ``[0, period)`` that no detour ``[start, start + duration)`` covers (detours inside the period,
    in any order; overlapping or touching ones handled).  It is exactly 0.0 when the detours cover the whole
    period, back to back or overlapping: a host with that pattern would never compute.

    Examples
    --------
    >>> uncovered_time([0.0, 0.25], [0.25, 0.25], 0.5), uncovered_time([0.0], [0.5], 0.5)
    (0.0, 0.0)
    >>> uncovered_time([0.3, 0.0, 0.1], [0.2, 0.2, 0.25], 0.5)  # overlapping and out of order: all covered
    0.0
    >>> round(uncovered_time([0.1, 0.3], [0.1, 0.1], 0.5), 12)  # free: [0, 0.1), [0.2, 0.3), [0.4, 0.5)
    0.3
    """
    s = np.asarray(start, np.float64).ravel()
    e = np.clip(s + np.asarray(duration, np.float64).ravel(), 0.0, period)
    s = np.clip(s, 0.0, period)
    if s.size == 0:
        return float(period)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)  # the furthest end of the detours up to each one
    # every term is >= 0 and exactly 0 where there is no gap, so the sum is 0.0 only when nothing is free
    gaps = np.maximum(s[1:] - reach[:-1], 0.0)
    return float(s[0] + gaps.sum() + max(period - float(reach[-1]), 0.0))


def group_running_max(x: _F, group: _I) -> _F:
    """Running maximum of ``x`` restarted at every change of ``group`` (rows sorted by group); exact."""
    if x.size == 0:
        return x.copy()
    first = np.ones(x.size, bool)
    first[1:] = group[1:] != group[:-1]
    heads = np.flatnonzero(first)
    sizes = np.diff(np.append(heads, x.size))
    col = np.arange(x.size) - np.repeat(heads, sizes)
    grid = np.full((heads.size, int(sizes.max())), -np.inf)
    gid = np.cumsum(first) - 1
    grid[gid, col] = x
    return np.maximum.accumulate(grid, axis=1)[gid, col]


def queue_detours(host: _I, arrival: _F, duration: _F) -> _F:
    """Start times when a detour arriving during another one waits for it (Lindley's recursion).

    Rows must be sorted by ``(host, arrival)``.  ``end_i = max(arrival_i, end_{i-1}) + d_i``
    is computed without a loop: ``end_i = C_i + max_{j<=i} (a_j - C_{j-1})`` with ``C`` the
    running sum of durations within the host.

    Examples
    --------
    >>> queue_detours(np.array([0, 0, 0, 1]), np.array([0.0, 0.5, 3.0, 0.2]), np.array([1.0, 1.0, 1.0, 1.0]))
    array([0. , 1. , 3. , 0.2])
    """
    if host.size == 0:
        return arrival.copy()
    first = np.ones(host.size, bool)
    first[1:] = host[1:] != host[:-1]
    csum = np.cumsum(duration)
    base = np.repeat(np.concatenate(([0.0], csum))[np.flatnonzero(first)], np.diff(np.append(
        np.flatnonzero(first), host.size)))
    c = csum - base  # running sum within host, inclusive
    c_prev = c - duration
    key = arrival - c_prev
    run = group_running_max(key, host)
    end = c + run
    prev_end = np.concatenate(([-np.inf], end[:-1]))
    prev_end[first] = -np.inf
    # exact arrival when the detour does not wait
    return np.maximum(arrival, prev_end)


def profile_text(pattern: NoisePattern, host: int, scale: float = DETOUR_SCALE) -> str:
    """The SimGrid speed profile body of one host (``""`` when it has no detours).

    Lines are ``TIME SCALE``: the speed drops to ``scale`` at each detour start
    and returns to 1 at its end; ``PERIODICITY`` repeats the pattern.
    """
    lo, hi = np.searchsorted(pattern.host, [host, host + 1])
    if hi == lo:
        return ""
    s = pattern.start[lo:hi]
    e = s + pattern.duration[lo:hi]
    lines = [f"PERIODICITY {float(pattern.period[host])!r}"]
    for a, b in zip(s.tolist(), e.tolist(), strict=True):
        lines.append(f"{a!r} {scale!r}")
        lines.append(f"{b!r} 1.0")
    return "\n".join(lines)
