"""Scores of one model on one case of a benchmark suite, against the counterfactual truth (issue 24).

Items are ``(rank, region)`` pairs (or regions); costs are seconds of wait.

* :func:`tie_sets`: injected causes that are equally large (within a tolerance) in one region: removing
  one of several equally late ranks' excess saves nothing, so their truth is that of the set;
* :func:`shared_truth`: each member of a tied set gets the set's true cost divided by its size (its
  Shapley value: the members are symmetric);
* :func:`top_hit`: does the model's top item (or its top k) hold a truly costliest item?
* :func:`l1_error`: ``sum_i |blame_i - true_i| / true total`` (relative blame error);
* :func:`share_without_cause`: share of the blame on items with no injected cause (false blame).

Relative figures are ``nan`` ("n/a" in reports) where the truth is zero or near it
(:data:`MIN_TRUTH`), never a huge percentage.

Examples
--------
>>> import pandas as pd
>>> truth = pd.Series({(1, "A"): 2.0, (3, "A"): 2.0, (5, "B"): 0.5})
>>> top_hit(pd.Series({(3, "A"): 9.0, (0, "A"): 1.0}), truth, k=1)
1.0
>>> l1_error(pd.Series({"A": 3.0}), pd.Series({"A": 4.0, "B": 1.0}), true_total=5.0)
0.4
>>> l1_error(pd.Series({"A": 3.0}), pd.Series({"A": 0.0}), true_total=1e-12)
nan
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable

import numpy as np
import pandas as pd

#: Truth below this many seconds is "near zero": relative errors against it are n/a.
MIN_TRUTH = 1e-9
#: Two injected causes are tied when their seconds per step differ by at most this (s); see
#: :data:`waitlab.models.analysis.ties.TIE_TOLERANCE` for where the figure comes from.
LEDGER_TIE_TOLERANCE = 1e-6


def tie_sets(ledger: pd.DataFrame, candidates: Collection[tuple[int, str]],
             tolerance: float = LEDGER_TIE_TOLERANCE) -> list[tuple[tuple[int, str], ...]]:
    """Groups of at least two candidate (rank, region) pairs of one region whose injected seconds per step
    differ by at most ``tolerance`` (single linkage over the sorted totals).

    >>> import pandas as pd
    >>> led = pd.DataFrame({"rank": [1, 3, 5, 1, 3], "region": ["A", "A", "A", "A", "A"], "step": [0, 0, 0, 1, 1],
    ...                     "seconds": [0.004, 0.004000001, 0.001, 0.004, 0.004], "kind": ["imbalance"] * 5})
    >>> tie_sets(led, [(1, "A"), (3, "A"), (5, "A")])
    [((1, 'A'), (3, 'A'))]
    """
    led = ledger[ledger["seconds"] > 0]
    if not len(led):
        return []
    steps = max(int(led["step"].nunique()), 1)
    tot = led.groupby([led["rank"].astype(int), led["region"].astype(str)])["seconds"].sum()
    cand = [c for c in ((int(r), str(g)) for r, g in candidates) if c in tot.index]
    out: list[tuple[tuple[int, str], ...]] = []
    for region in sorted({g for _, g in cand}):
        items = sorted((c for c in cand if c[1] == region), key=lambda c: (float(tot[c]), c[0]))
        vals = np.array([float(tot[c]) for c in items])
        brk = np.flatnonzero(np.diff(vals) > tolerance * steps) + 1
        for grp in np.split(np.arange(len(items)), brk):
            if grp.size > 1:
                out.append(tuple(sorted(items[i] for i in grp)))
    return out


def shared_truth(truth: pd.Series, sets: dict[tuple[tuple[int, str], ...], float]) -> pd.Series:
    """Per-item truth where each member of a tied set gets ``set cost / size`` (Shapley value of symmetric
    members) instead of its own (near-zero) cost.

    >>> import pandas as pd
    >>> shared_truth(pd.Series({(1, "A"): 0.0, (3, "A"): 0.0}), {((1, "A"), (3, "A")): 4.0}).tolist()
    [2.0, 2.0]
    """
    d = {k: float(v) for k, v in truth.items()}
    for members, cost in sets.items():
        for m in members:
            d[m] = cost / len(members)
    out = pd.Series(list(d.values()), index=pd.Index(list(d.keys()), tupleize_cols=False), dtype=float)
    return out.sort_values(ascending=False, kind="stable")


def _top(s: pd.Series, k: int) -> list[Hashable]:
    s = s[s > 0]
    return list(s.sort_values(ascending=False, kind="stable").index[:k])


def top_hit(predicted: pd.Series, truth: pd.Series, k: int = 1, rel: float = 1e-6) -> float:
    """1.0 if one of the model's ``k`` most blamed items is a truly costliest item (within ``rel`` of the
    largest true cost: every member of a tied top), 0.0 if not, nan when no item has a true cost."""
    if not len(truth) or float(truth.max()) <= MIN_TRUTH:
        return math.nan
    best = float(truth.max())
    top_true = set(truth.index[truth.to_numpy(float) >= best * (1 - rel)])
    return 1.0 if set(_top(predicted, k)) & top_true else 0.0


def l1_error(predicted: pd.Series, truth: pd.Series, true_total: float) -> float:
    """``sum over items of |blame - true cost| / true_total`` (items missing on a side count 0); nan when the
    true total is near zero."""
    if not math.isfinite(true_total) or abs(true_total) <= MIN_TRUTH:
        return math.nan
    idx = predicted.index.union(truth.index)
    a = predicted.reindex(idx, fill_value=0.0).to_numpy(float)
    b = truth.reindex(idx, fill_value=0.0).to_numpy(float)
    return float(np.abs(a - b).sum() / abs(true_total))


def relative(value: float, truth: float) -> float:
    """``value / truth`` (nan when the truth is near zero).

    >>> relative(3.0, 4.0), relative(3.0, 0.0)
    (0.75, nan)
    """
    return value / truth if math.isfinite(truth) and abs(truth) > MIN_TRUTH else math.nan


def share_without_cause(predicted: pd.Series, causal: Collection[Hashable]) -> float:
    """Share of the blame on items with no injected cause (nan when nothing is blamed).

    >>> import pandas as pd
    >>> share_without_cause(pd.Series({(0, "A"): 1.0, (1, "A"): 3.0}), {(1, "A")})
    0.25
    """
    total = float(predicted[predicted > 0].sum())
    if total <= 0:
        return math.nan
    wrong = ~predicted.index.isin(list(causal)) & (predicted > 0).to_numpy()
    return float(predicted[wrong].sum()) / total


__all__ = ["LEDGER_TIE_TOLERANCE", "MIN_TRUTH", "l1_error", "relative", "share_without_cause", "shared_truth",
           "tie_sets", "top_hit"]
