"""Scores of a diagnosis model against the ground truth (DESIGN.md section 8).

All functions take plain pandas Series of costs (seconds) indexed by the blamed
item -- a region name, or a ``(rank, region)`` pair -- so that model blame and
ground truth compare item by item.

* :func:`top_k_precision`: share of the model's k most blamed items among the k truly costliest;
* :func:`spearman`: rank correlation of the two cost vectors over the union of items;
* :func:`relative_error`: (attributed - true) / true of the total;
* :func:`false_blame`: seconds (and share) blamed on items with no injected cause; :func:`score` counts it per
  ``(rank, region)``, as ``waitlab evaluate`` does (blame on rank 4's ``Sweep`` is false when only rank 0's
  ``Sweep`` was slowed), never per region;
* :func:`improvement`: predicted vs realized improvement when the blamed items are balanced.

Examples
--------
>>> import pandas as pd
>>> model = pd.Series({"A": 5.0, "B": 3.0, "C": 1.0})
>>> truth = pd.Series({"A": 4.0, "B": 1.0, "D": 2.0})
>>> top_k_precision(model, truth, 2)
0.5
>>> round(spearman(model, truth), 3)
0.4
>>> false_blame(model, causal={"A", "B", "D"})
(1.0, 0.1111111111111111)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable

import numpy as np
import pandas as pd

from waitlab.models.analysis.suite_scores import MIN_TRUTH


def by_region(blame: pd.DataFrame) -> pd.Series:
    """Cost per region of a blame table (``region, cost`` columns), largest first.

    Examples
    --------
    >>> import pandas as pd
    >>> by_region(pd.DataFrame({"rank": [0, 1, 0], "region": ["A", "A", "B"], "cost": [1.0, 2.0, 0.5]})).to_dict()
    {'A': 3.0, 'B': 0.5}
    """
    if not len(blame):
        return pd.Series(dtype=float)
    s = blame.groupby(blame["region"].astype(str), observed=True)["cost"].sum()
    return s[s > 0].sort_values(ascending=False, kind="stable")


def by_rank_region(blame: pd.DataFrame) -> pd.Series:
    """Cost per ``(rank, region)`` of a blame table, largest first."""
    if not len(blame):
        return pd.Series(dtype=float, index=pd.MultiIndex.from_arrays([[], []], names=["rank", "region"]))
    s = blame.groupby([blame["rank"].astype(int), blame["region"].astype(str)], observed=True)["cost"].sum()
    s.index = s.index.set_names(["rank", "region"])
    return s[s > 0].sort_values(ascending=False, kind="stable")


def _top(s: pd.Series, k: int) -> list[Hashable]:
    s = s[s > 0]
    return list(s.sort_values(ascending=False, kind="stable").index[:k])


def top_k_precision(predicted: pd.Series, truth: pd.Series, k: int) -> float:
    """Share of the model's top-k items that are among the true top-k.

    ``k`` shrinks to the number of items with a positive true cost (above
    :data:`~waitlab.models.analysis.suite_scores.MIN_TRUTH`, 1 ns: float noise of two equal times is no cost); NaN
    when there is none.

    >>> top_k_precision(pd.Series({"a": 1.0, "b": 0.5}), pd.Series({"a": 5.6e-17, "b": -0.2}), 1)
    nan
    """
    kk = min(k, int((truth > MIN_TRUTH).sum()))
    if kk <= 0:
        return math.nan
    return len(set(_top(predicted, kk)) & set(_top(truth, kk))) / kk


def spearman(predicted: pd.Series, truth: pd.Series) -> float:
    """Spearman rank correlation of two cost vectors over the union of their items (missing = 0).

    NaN when fewer than two items or either vector is constant.
    """
    idx = predicted.index.union(truth.index)
    if len(idx) < 2:
        return math.nan
    a = predicted.reindex(idx, fill_value=0.0).to_numpy(float)
    b = truth.reindex(idx, fill_value=0.0).to_numpy(float)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(pd.DataFrame({"a": a, "b": b}).corr(method="spearman").iloc[0, 1])  # ranks (ties averaged), Pearson


def relative_error(attributed: float, true_total: float) -> float:
    """``(attributed - true_total) / true_total``; NaN ("n/a") when the truth is zero or near it (at most
    :data:`~waitlab.models.analysis.suite_scores.MIN_TRUTH`, 1 ns), never a huge percentage.

    >>> relative_error(7.2, 8.0), relative_error(0.36, 1e-13)
    (-0.09999999999999998, nan)
    """
    return (attributed - true_total) / true_total if abs(true_total) > MIN_TRUTH else math.nan


def false_blame(predicted: pd.Series, causal: Collection[Hashable]) -> tuple[float, float]:
    """Seconds blamed on items that have no injected cause, and their share of all blame."""
    total = float(predicted[predicted > 0].sum())
    mask = ~predicted.index.isin(list(causal))
    wrong = float(predicted[mask & (predicted > 0).to_numpy()].sum())
    return wrong, (wrong / total if total else math.nan)


def culprits(region_costs: pd.Series, share: float = 0.1, max_items: int = 5) -> list[Hashable]:
    """The items a user would act on: those holding at least ``share`` of the blame (at most ``max_items``).

    >>> import pandas as pd
    >>> culprits(pd.Series({"A": 5.0, "B": 4.0, "C": 0.5}))
    ['A', 'B']
    """
    s = region_costs[region_costs > 0].sort_values(ascending=False, kind="stable")
    total = float(s.sum())
    if total <= 0:
        return []
    return list(s[s >= share * total].index[:max_items])


def improvement(predicted_seconds: float, baseline: float, after: float) -> dict[str, float]:
    """Predicted vs realized improvement (fractions of ``baseline``) when the blamed items are balanced.

    Wu et al.'s LARED-S: 30 s of 41.6 s predicted (72%), 18.1 s realized (44%).

    >>> {k: round(v, 3) for k, v in improvement(30.0, 41.6, 41.6 - 18.1).items()}
    {'predicted': 0.721, 'realized': 0.435, 'ratio': 0.603}
    """
    if baseline <= 0:
        return {"predicted": math.nan, "realized": math.nan, "ratio": math.nan}
    pred = predicted_seconds / baseline
    real = (baseline - after) / baseline
    return {"predicted": pred, "realized": real, "ratio": real / pred if pred else math.nan}


def score(predicted_region: pd.Series, true_region: pd.Series, *, predicted_rank_region: pd.Series,
          true_rank_region: pd.Series | None = None, attributed: float, true_total: float,
          causal: Collection[tuple[int, str]], k: int = 5) -> dict[str, float]:
    """All scores of one model in one dictionary (NaN where a score is undefined).

    ``causal``: the ``(rank, region)`` pairs with injected seconds; the false blame is the blame on every other
    pair (the definition of ``false_blame`` in ``waitlab evaluate``, :func:`~waitlab.models.analysis.suite_scores.
    share_without_cause`).
    """
    pairs = pd.Series(predicted_rank_region.to_numpy(float),
                      index=pd.Index([(int(r), str(g)) for r, g in predicted_rank_region.index], tupleize_cols=False))
    fb, fb_share = false_blame(pairs, {(int(r), str(g)) for r, g in causal})
    out = {
        "top_k_region": top_k_precision(predicted_region, true_region, k),
        "spearman_region": spearman(predicted_region, true_region),
        "relative_error_total": relative_error(attributed, true_total),
        "false_blame_seconds": fb,
        "false_blame_share": fb_share,
    }
    if true_rank_region is not None:
        out["top_k_rank_region"] = top_k_precision(predicted_rank_region, true_rank_region, k)
        common = true_rank_region.index
        out["spearman_rank_region"] = spearman(predicted_rank_region.reindex(common, fill_value=0.0),
                                               true_rank_region)
    return out
