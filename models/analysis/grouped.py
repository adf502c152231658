"""Sums per group and a descending order as pandas (3.1) gives them, on numpy arrays: the summary, the sweeps'
metrics and the page add a run's waits group by group the way pandas' ``groupby().sum()`` and
``sort_values(ascending=False)`` did when those were pandas code, so an Arrow table and a DataFrame, and a folder
written before and after the run path left pandas, give the same floats and the same order."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

#: :func:`group_sums` adds the values of this many groups or more at once (numpy); fewer: each group's own loop.
_VECTOR_GROUPS = 32


def group_sums(group: npt.NDArray[np.integer[Any]], column: npt.NDArray[Any], n_groups: int) -> np.ndarray:
    """The values of ``column`` summed per ``group`` (0 .. ``n_groups - 1``; -1: left out), as pandas' (3.1)
    ``groupby().sum()`` adds them, so the same floats (a page made from a DataFrame by pandas and from an Arrow
    table says the same, ties and last digits included): groups in row order (``group`` not decreasing) without a
    missing value (NaN) by ``np.add.reduceat``, else each group's values in row order with compensation (Kahan), a
    missing value left out.

    The Kahan sums add the groups' k-th values at once (numpy) while at least :data:`_VECTOR_GROUPS` groups have
    one; the few longer groups' values left are added one by one.

    >>> group_sums(np.array([0, 1, 0, 0]), np.array([0.1, 5.0, 0.2, np.nan]), 3).tolist()
    [0.30000000000000004, 5.0, 0.0]
    """
    g = np.asarray(group, np.int64)
    x = np.asarray(column, np.float64)
    if g.size and (np.diff(g) >= 0).all() and not np.isnan(x).any():
        keep = g >= 0  # the rows left out come first
        g, x = g[keep], x[keep]
        out = np.zeros(n_groups)
        if g.size:
            starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
            out[g[starts]] = np.add.reduceat(x, starts)
        return out
    keep = g >= 0
    g, x = g[keep], x[keep]
    order = np.argsort(g, kind="stable")
    x = x[order]
    starts = np.searchsorted(g[order], np.arange(n_groups))
    lengths = np.searchsorted(g[order], np.arange(n_groups), side="right") - starts
    by_length = np.argsort(-lengths, kind="stable")  # the groups longer than k: the first ones of this order
    neg_sorted = -lengths[by_length]
    total, comp = np.zeros(n_groups), np.zeros(n_groups)
    k, active = 0, int(np.searchsorted(neg_sorted, 0))
    while active >= _VECTOR_GROUPS:
        gs = by_length[:active]
        val = x[starts[gs] + k]
        ok = ~np.isnan(val)
        with np.errstate(invalid="ignore"):
            y = val - comp[gs]
            t = total[gs] + y
            c = (t - total[gs]) - y
        comp[gs] = np.where(ok, np.where(np.isfinite(c), c, 0.0), comp[gs])  # an infinite value: none
        total[gs] = np.where(ok, t, total[gs])
        k += 1
        active = int(np.searchsorted(neg_sorted, -k))
    for gi in by_length[:active].tolist():
        s, cc = float(total[gi]), float(comp[gi])
        for v in x[starts[gi] + k:starts[gi] + lengths[gi]].tolist():
            if v == v:
                y = v - cc
                t = s + y
                cc = (t - s) - y
                if not math.isfinite(cc):
                    cc = 0.0
                s = t
        total[gi] = s
    return total


def descending(v: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """The order of ``v`` from the largest value, NaN last: pandas' ``sort_values(ascending=False)`` (its reversed
    quicksort, so equal values come in the same order).

    >>> descending(np.array([1.0, np.nan, 3.0, 1.0])).tolist()
    [2, 0, 3, 1]
    """
    mask = np.isnan(v)
    idx = np.flatnonzero(~mask)[::-1]
    order = idx[v[idx].argsort(kind="quicksort")][::-1]
    return np.concatenate([order, np.flatnonzero(mask)])
