"""Reference diagnosis models beside CWP-DM and H-CWP-DM (protocol of :mod:`.protocol`).

* :func:`profile_model` -- the floor every method must beat: each wait charged to the waiter's own
  (rank, region), which is what a flat profile shows.
* :func:`blame_shifting_model` -- idleness blame shifting (Tallent, Adhianto, Mellor-Crummey, "Scalable
  identification of load imbalance in parallel executions using call path profiles", SC 2010; the
  time-based rule of Tallent and Mellor-Crummey, PPoPP 2009): while ``I(t)`` ranks idle in a wait and
  ``W(t)`` ranks work, each working rank's current region accrues blame at the rate ``I(t) / W(t)``.
  The blame of one work interval ``[a, b]`` is ``F(b) - F(a)`` with ``F(t) = integral_0^t I/W``
  (cumulative sums over the sorted interval ends: numpy, no row loop).  Idleness while nobody works
  (everyone in MPI) is left unexplained.
* :func:`critical_path_model` -- critical-path imbalance (Boehme et al., "Scalable critical-path based
  performance analysis", IPDPS 2012): ``iota(f) = d_cp(f) - avg_p d_p(f)``, the time of region ``f`` on
  the critical path minus its mean per rank (:func:`~.critical_path.critical_path`).  In seconds of wait:
  when the other ranks idle for the path's excess, the wait it makes is ``sum_p (d_cp(f) - d_p(f)) =
  n * iota(f)``; that is split over the ranks on the path by their time in ``f`` on it, and scaled down
  if it exceeds the total wait.

Examples
--------
Rank 0 works 3 s; ranks 1 and 2 work 1 s and wait 2 s at a barrier.

>>> from waitlab.models.analysis.protocol import RunData
>>> from waitlab.models.analysis.waitstates import make_events, wait_states
>>> ev = make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "barrier"] * 3,
...                  enter=[0, 3, 0, 1, 0, 1], exit=[3, 3, 1, 3, 1, 3], match=[-1, 0] * 3)
>>> run = RunData(ev, wait_states(ev))
>>> profile_model(run)[["rank", "seconds"]].to_dict("records")
[{'rank': 1, 'seconds': 2.0}, {'rank': 2, 'seconds': 2.0}]
>>> blame_shifting_model(run)[["rank", "seconds"]].to_dict("records")
[{'rank': 0, 'seconds': 4.0}]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from waitlab.models.analysis.critical_path import critical_path
from waitlab.models.analysis.protocol import RunData

_COLUMNS = ["rank", "region", "seconds"]


def _region_of(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Innermost region of event rows, ``(top level)`` outside every region."""
    reg = events["region"].astype(str).to_numpy()[rows] if "region" in events else np.full(rows.size, "")
    return np.where(reg == "", "(top level)", reg).astype(object)


def _grouped(rank: np.ndarray, region: np.ndarray, seconds: np.ndarray, **attrs: Any) -> pd.DataFrame:
    if not rank.size:
        out = pd.DataFrame({"rank": np.zeros(0, np.int64), "region": np.zeros(0, object), "seconds": np.zeros(0)})
    else:
        out = pd.DataFrame({"rank": rank.astype(np.int64), "region": region, "seconds": seconds.astype(float)})
        out = out.groupby(["rank", "region"], as_index=False, sort=True)["seconds"].sum()
        out = out[out["seconds"] > 0].sort_values(["seconds", "rank"], ascending=[False, True], kind="stable")
    out = out.reset_index(drop=True)
    out.attrs = {"explains": "total_wait", **attrs}
    return out


def profile_model(run: RunData, **_: Any) -> pd.DataFrame:
    """Each wait charged to the waiting rank's own region (a flat profile's view)."""
    w = run.waits
    if not len(w):
        return _grouped(np.zeros(0), np.zeros(0), np.zeros(0))
    rows = w["event"].to_numpy()
    return _grouped(w["rank"].to_numpy(), _region_of(run.events, rows), w["wait"].to_numpy(float))


def blame_shifting_model(run: RunData, **_: Any) -> pd.DataFrame:
    """Idleness blame shifting (Tallent et al., SC 2010): idle time charged to the work done meanwhile."""
    ev, w = run.events, run.waits
    kind = ev["kind"].astype(str).to_numpy()
    work = np.flatnonzero((kind != "mpi") & (kind != "region"))
    if not len(w) or not work.size:
        return _grouped(np.zeros(0), np.zeros(0), np.zeros(0), unexplained=run.total_wait)
    enter, exit_ = ev["enter"].to_numpy(float), ev["exit"].to_numpy(float)
    ws = enter[w["event"].to_numpy()]
    we = ws + w["wait"].to_numpy(float)
    wa, wb = enter[work], exit_[work]
    t = np.unique(np.concatenate([ws, we, wa, wb]))
    # number of idle (I) and working (W) ranks on each elementary interval [t_j, t_j+1)
    idle = np.cumsum(np.bincount(np.searchsorted(t, ws), minlength=t.size)
                     - np.bincount(np.searchsorted(t, we), minlength=t.size))[:-1]
    busy = np.cumsum(np.bincount(np.searchsorted(t, wa), minlength=t.size)
                     - np.bincount(np.searchsorted(t, wb), minlength=t.size))[:-1]
    rate = np.where(busy > 0, idle / np.maximum(busy, 1), 0.0)  # I(t) / W(t) (Tallent et al.)
    big_f = np.r_[0.0, np.cumsum(rate * np.diff(t))]  # F(t) = integral of I/W
    blame = big_f[np.searchsorted(t, wb)] - big_f[np.searchsorted(t, wa)]
    lost = float(np.sum(np.where(busy == 0, idle, 0) * np.diff(t)))
    return _grouped(ev["rank"].to_numpy()[work], _region_of(ev, work), blame, unexplained=lost)


def critical_path_model(run: RunData, **_: Any) -> pd.DataFrame:
    """Critical-path imbalance blame (Boehme et al., IPDPS 2012), in seconds of wait."""
    n = run.n_ranks
    cp = critical_path(run.events, run.waits, n_ranks=n)
    reg = cp.by_region
    if not len(reg) or n == 0:
        return _grouped(np.zeros(0), np.zeros(0), np.zeros(0))
    comp = reg[~reg["region"].astype(str).str.startswith("MPI_")]
    iota = comp.set_index("region")["imbalance"].clip(lower=0.0)  # iota(f) = d_cp(f) - avg d(f), >= 0
    rr = cp.by_region_rank
    rr = rr[rr["region"].isin(iota.index[iota > 0])]
    if not len(rr):
        return _grouped(np.zeros(0), np.zeros(0), np.zeros(0))
    on_path = rr.groupby("region")["seconds"].transform("sum").to_numpy(float)
    share = np.divide(rr["seconds"].to_numpy(float), on_path, out=np.zeros(len(rr)), where=on_path > 0)
    seconds = n * iota.reindex(rr["region"]).to_numpy(float) * share  # n * iota(f): the wait it makes
    total = float(seconds.sum())
    if total > run.total_wait:  # at most the run's wait (none: nobody made anyone wait, however imbalanced the path)
        seconds *= run.total_wait / total
    label = rr["region"].astype(str).to_numpy()
    region = np.where(np.isin(label, run.regions), label, "(top level)")  # compute outside regions: "(top level)"
    return _grouped(rr["rank"].to_numpy(), region.astype(object), seconds)


__all__ = ["blame_shifting_model", "critical_path_model", "profile_model"]
