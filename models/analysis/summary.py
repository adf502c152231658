"""Run summary: makespan and per-rank time budget, wait by pattern, operation and region.

For every rank: ``compute + perturbation + communication + wait + idle = makespan``,
where *perturbation* is time in injected noise/overhead/flush/swap/delay,
*communication* is MPI time minus wait, and *idle* is the rest (time after the
rank finished, or gaps between activities).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

PERTURBATION_KINDS = ("noise", "overhead", "flush", "swap", "delay", "sleep")


def _kind_test(kind: pd.Series) -> Callable[[Sequence[str]], npt.NDArray[np.bool_]]:
    """``test(labels)``: which rows' kind is one of ``labels`` (on a categorical's codes: no string per row)."""
    if isinstance(kind.dtype, pd.CategoricalDtype):
        codes = kind.cat.codes.to_numpy()
        labels = np.asarray(kind.cat.categories.astype(str))
        return lambda want: np.append(np.isin(labels, want), False)[codes]  # code -1 (missing) matches nothing
    as_str = kind.to_numpy().astype(str)
    return lambda want: np.isin(as_str, want)


def rank_budget(events: pd.DataFrame, waits: pd.DataFrame, n_ranks: int | None = None) -> pd.DataFrame:
    """Per-rank seconds of compute, perturbation, communication, wait and idle.

    Examples
    --------
    >>> from waitlab.models.analysis.waitstates import make_events, wait_states
    >>> ev = make_events(rank=[0, 0, 1, 1], op=["compute", "barrier", "compute", "barrier"],
    ...                  enter=[0.0, 1.0, 0.0, 3.0], exit=[1.0, 3.0, 3.0, 3.0], match=[-1, 0, -1, 0])
    >>> rank_budget(ev, wait_states(ev)).round(6).to_dict("records")[0]
    {'rank': 0, 'compute': 1.0, 'perturbation': 0.0, 'communication': 0.0, 'wait': 2.0, 'idle': 0.0}
    """
    n = int(n_ranks if n_ranks is not None else (events["rank"].max() + 1 if len(events) else 0))
    rank = events["rank"].to_numpy()
    dur = events["exit"].to_numpy() - events["enter"].to_numpy()
    makespan = float(events["exit"].max()) if len(events) else 0.0
    is_kind = _kind_test(events["kind"])

    def per_rank(mask: np.ndarray) -> np.ndarray:
        return np.bincount(rank[mask], weights=dur[mask], minlength=n).astype(np.float64)

    compute = per_rank(is_kind(("compute",)))
    perturb = per_rank(is_kind(PERTURBATION_KINDS))
    mpi = per_rank(is_kind(("mpi",)))
    leaf = per_rank(~is_kind(("region",)))
    wait = np.bincount(waits["rank"].to_numpy(), weights=waits["wait"].to_numpy(), minlength=n)
    return pd.DataFrame({
        "rank": np.arange(n, dtype=np.int32),
        "compute": compute,
        "perturbation": perturb,
        "communication": mpi - wait,
        "wait": wait,
        "idle": makespan - leaf,
    })  # fmt: skip


def summarize(events: pd.DataFrame, waits: pd.DataFrame) -> dict[str, Any]:
    """Makespan, totals, and wait broken down by pattern, MPI operation and call path."""
    budget = rank_budget(events, waits)

    def breakdown(col: str) -> dict[str, float]:
        if not len(waits):
            return {}
        s = waits.groupby(col, observed=True)["wait"].sum().sort_values(ascending=False)
        return {(str(k) or "(top level)"): float(v) for k, v in s.items() if v > 0}

    return {
        "makespan": float(events["exit"].max()) if len(events) else 0.0,
        "ranks": len(budget),
        "events": len(events),
        "wait_states": len(waits),
        "totals": {c: float(budget[c].sum()) for c in ("compute", "perturbation", "communication", "wait", "idle")},
        "wait_by_pattern": breakdown("pattern"),
        "wait_by_op": breakdown("op"),
        "wait_by_path": breakdown("path"),
        "max_rank_wait": float(budget["wait"].max()) if len(budget) else 0.0,
    }
