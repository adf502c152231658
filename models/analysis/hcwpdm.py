"""H-CWP-DM: hotspot-based diagnosis of communication waits (Wu et al., formulas 3-5).

Within the synchronization interval of a wait state (p,i) that waited for (q,k)
(:mod:`waitlab.models.analysis.syncpoints`):

* ``t(x,c)`` = time of call path ``c`` on rank ``x`` in the interval, waits removed (formula 3);
* ``sigma(q,c) = max(0, t(q,c) - t(p,c))`` -- the excess of ``c`` on ``q`` (formula 4);
* ``cost(q,c) = sigma(q,c) / sum_{f in H} sigma(q,f) * w(p,i)`` for hotspots ``c in H`` (formula 5).

Hotspots ``H`` are the call paths holding at least ``threshold`` (default 1%) of
the total time of all ranks.  There is no propagation: every wait state is
explained by its own interval only, so an indirect wait (one whose partner was
itself waiting) is blamed on whatever excess its partner's interval shows, or,
when no hotspot shows any, reported as **unexplained** -- never dropped.

Collectives: the paper pairs the latest rank q with the *earliest* rank p of each
collective instance (``pairing="earliest"``: one wait per instance, the largest);
``pairing="each"`` pairs q with every waiting rank.  When several ranks are exactly equally
late, each gets an equal share of the wait (:mod:`waitlab.models.analysis.ties`).

Examples
--------
Rank 0 is late at a barrier because of two regions with excesses 3:1; the
wait of rank 1 (4 s) is split 3:1.

>>> import pandas as pd
>>> from waitlab.models.analysis.waitstates import make_events, wait_states
>>> ev = make_events(rank=[0, 0, 0, 1, 1, 1], op=["compute", "compute", "barrier"] * 2,
...                  enter=[0, 4, 6, 0, 1, 2], exit=[4, 6, 6, 1, 2, 6], match=[-1, -1, 0] * 2)
>>> ev["path"] = pd.Categorical(["A", "B", ""] * 2)
>>> ev["region"] = ev["path"]
>>> res = hcwpdm(ev, wait_states(ev))
>>> res.costs[["rank", "callpath", "cost"]].to_dict("records")
[{'rank': 0, 'callpath': 'A', 'cost': 3.0}, {'rank': 0, 'callpath': 'B', 'cost': 1.0}]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from waitlab.models.analysis.callpaths import CallPaths, call_paths, group_codes, pattern_codes
from waitlab.models.analysis.syncpoints import _P2P_TABLE, EventIndex, sync_points, wait_table

Pairing = Literal["earliest", "each"]
PAIRINGS: tuple[str, ...] = ("earliest", "each")
DEFAULT_THRESHOLD = 0.01


@dataclass(frozen=True)
class HcwpdmResult:
    """Result of :func:`hcwpdm`.

    Attributes
    ----------
    costs : DataFrame
        ``rank, callpath, region, excess`` (sum of sigma), ``cost`` per blamed (rank, call path).
    waits : DataFrame
        The input wait states (same row order) with ``considered`` (paired by the model),
        ``explained`` and ``unexplained`` seconds.
    hotspots : tuple of str
        Call paths above the threshold.
    threshold : float
    pairing : str
    """

    costs: pd.DataFrame
    waits: pd.DataFrame
    hotspots: tuple[str, ...]
    threshold: float
    pairing: str

    @property
    def considered_wait(self) -> float:
        """Total wait of the wait states the model paired (its denominator)."""
        return float(self.waits.loc[self.waits["considered"], "wait"].sum())

    @property
    def attributed(self) -> float:
        return float(self.costs["cost"].sum())

    @property
    def unexplained(self) -> float:
        return float(self.waits["unexplained"].sum())

    def blame(self) -> pd.DataFrame:
        """``rank, region, callpath, cost`` of every blamed call path (the scoring interface)."""
        return self.costs[["rank", "region", "callpath", "cost"]]


def considered_waits(events: pd.DataFrame, waits: pd.DataFrame, pairing: str = "earliest") -> npt.NDArray[np.bool_]:
    """Which wait states H-CWP-DM pairs: all point-to-point ones, and for collectives the
    earliest rank of each instance (``"earliest"``, its largest wait) or every waiting rank (``"each"``).

    Examples
    --------
    >>> from waitlab.models.analysis.waitstates import make_events, wait_states
    >>> ev = make_events(rank=[0, 1, 2], op=["barrier"] * 3, enter=[0.0, 1.0, 3.0], exit=[3.0] * 3,
    ...                  match=[0, 0, 0])
    >>> considered_waits(ev, wait_states(ev)).tolist()
    [True, False]
    """
    if pairing not in PAIRINGS:
        raise ValueError(f"unknown pairing {pairing!r}; use one of {', '.join(PAIRINGS)}")
    n = len(waits)
    coll = ~_P2P_TABLE[pattern_codes(waits)]
    if pairing == "each" or n == 0:
        return np.ones(n, bool)
    inst = events["match"].to_numpy()[waits["event"].to_numpy()]
    w = waits["wait"].to_numpy()
    rows = np.flatnonzero(coll)
    r = rows[np.argsort(inst[rows], kind="stable")]
    if r.size == 0:
        return ~coll
    starts = np.flatnonzero(np.concatenate(([True], inst[r[1:]] != inst[r[:-1]])))
    best = np.maximum.reduceat(w[r], starts)
    group = np.cumsum(np.isin(np.arange(r.size), starts)) - 1
    hit = w[r] == best[group]
    # first row reaching the maximum of its instance
    first_hit = np.full(starts.size, r.size, np.int64)
    np.minimum.at(first_hit, group[hit], np.flatnonzero(hit))
    keep = ~coll
    keep[r[first_hit]] = True
    return keep


def hotspot_mask(total_time: npt.NDArray[np.float64], threshold: float) -> npt.NDArray[np.bool_]:
    """Call paths holding at least ``threshold`` of the total time."""
    total = float(total_time.sum())
    return total_time >= threshold * total if total > 0 else np.zeros(total_time.size, bool)


def hcwpdm(events: pd.DataFrame, waits: pd.DataFrame, *, threshold: float = DEFAULT_THRESHOLD,
           pairing: Pairing = "earliest", callpaths: CallPaths | None = None, tie_relative: float = 0.0,
           index: EventIndex | None = None) -> HcwpdmResult:
    """Run H-CWP-DM on an event table and its wait states.

    Parameters
    ----------
    events, waits : DataFrame
    threshold : float
        Hotspot threshold: fraction of the total time (all ranks) a call path must hold.
    pairing : {"earliest", "each"}
        Collective pairing (see the module docstring).
    callpaths : CallPaths, optional
        Precomputed :func:`~waitlab.models.analysis.syncpoints.call_paths`.
    tie_relative : float
        The relative tie rule (:mod:`~waitlab.models.analysis.ties`; 0: off, the default).
    index : EventIndex, optional
        :func:`~waitlab.models.analysis.syncpoints.event_index` of ``events``, when already built (its call paths
        replace ``callpaths``).

    Returns
    -------
    HcwpdmResult
    """
    if not 0 <= threshold < 1:
        raise ValueError(f"threshold must be in [0, 1), got {threshold!r}")
    cps = index.callpaths if index is not None else callpaths if callpaths is not None else call_paths(events)
    select = considered_waits(events, waits, pairing)
    sp = sync_points(events, waits, select, callpaths=cps, split_ties=True,  # tied culprits: equal shares
                     tie_relative=tie_relative, index=index)
    sel = select[sp.index]
    rows = np.flatnonzero(sel)
    n = len(sp)
    w_of, cp, sigma = sp.deltas(rows) if rows.size else (rows, rows, np.zeros(0))  # formulas (3), (4)
    sp = sp.without_times()  # the interval times (up to 16 bytes per event) are not read again
    hot = hotspot_mask(sp.total_time, threshold)
    keep = hot[cp] if cp.size else np.zeros(0, bool)
    w_of, cp, sigma = w_of[keep], cp[keep], sigma[keep]
    ssum = np.bincount(w_of, weights=sigma, minlength=n)  # sum_{f in H} sigma(q,f)
    ok = ssum > 0
    share = sigma / np.where(ok, ssum, 1.0)[w_of]
    cost = share * sp.wait[w_of]  # formula (5)
    n_cp = max(len(cps), 1)
    key = sp.peer_rank[w_of] * n_cp + cp
    uniq, codes = group_codes(key, int(sp.peer_rank.max() + 1) * n_cp if len(sp) else 1)
    m = uniq.size
    cp_of = uniq % n_cp
    costs = pd.DataFrame({
        "rank": (uniq // n_cp).astype(np.int32),
        "callpath": pd.Categorical.from_codes(cp_of, categories=list(cps.names) or ["(top level)"]),
        "region": np.asarray(cps.region or ("(top level)",), dtype=object)[cp_of],
        "excess": np.bincount(codes, weights=sigma, minlength=m),
        "cost": np.bincount(codes, weights=cost, minlength=m),
    })  # fmt: skip
    costs = costs[costs["cost"] > 0].sort_values(["cost", "rank"], ascending=[False, True], kind="stable")
    del w_of, cp, sigma, share, cost, key, codes  # one entry per (wait state, call path): freed before the wait table
    explained = np.where(sel & ok, sp.wait, 0.0)
    table = wait_table(sp, considered=sel, explained=explained, unexplained=np.where(sel & ~ok, sp.wait, 0.0))
    return HcwpdmResult(costs=costs.reset_index(drop=True), waits=table,
                        hotspots=tuple(np.asarray(cps.names, dtype=object)[hot].tolist()) if len(cps) else (),
                        threshold=threshold, pairing=pairing)
