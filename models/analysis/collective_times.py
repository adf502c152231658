"""The time one collective takes, per collective operation: what a what-if sweep compares between algorithms.

A collective instance (one ``match`` id of the event table, every member rank's row) lasts, by itself, from the
moment its last member enters it to the moment its last member leaves it: before that, the early ranks wait for
the late one (a wait state, counted apart); after it, nothing of the collective is left.  :func:`collective_times`
gives, per collective operation, the mean of that span over its instances, so a 12% difference between two alltoall
algorithms is not hidden by the compute around them, nor by an imbalance that makes ranks arrive at different times.

Examples
--------
>>> from waitlab.models.analysis.waitstates import make_events
>>> ev = make_events(rank=[0, 1, 0, 1], op=["alltoall"] * 4, enter=[0.0, 1.0, 3.0, 3.0],
...                  exit=[2.0, 2.5, 4.0, 4.5], match=[0, 0, 1, 1])
>>> collective_times(ev)   # (2.5 - 1.0 + 4.5 - 3.0) / 2
{'alltoall': 1.5}
>>> alltoall_shapes(make_events(rank=[0, 1], op=["alltoall"] * 2, enter=[0.0, 0.0], exit=[1.0, 1.0],
...                             match=[0, 0], nbytes=[128, 128]))
[(2, 64)]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from waitlab.models.vocabulary import COLLECTIVE_ACTIONS

__all__ = ["alltoall_shapes", "collective_times"]


def _instances(events: pd.DataFrame, ops: tuple[str, ...]) -> pd.DataFrame:
    op = events["op"].astype(str)
    sel = op.isin(ops).to_numpy() & (events["match"].to_numpy() >= 0)
    return events.loc[sel].assign(op=op[sel])


def collective_times(events: pd.DataFrame) -> dict[str, float]:
    """Mean seconds of one instance, last entry to last exit, per collective operation present (sorted by name)."""
    rows = _instances(events, tuple(sorted(COLLECTIVE_ACTIONS)))
    if rows.empty:
        return {}
    inst = rows.groupby(["op", "match"], sort=True, observed=True).agg(enter=("enter", "max"), exit=("exit", "max"))
    span = np.maximum(inst["exit"].to_numpy() - inst["enter"].to_numpy(), 0.0)
    mean = pd.Series(span, index=inst.index.get_level_values("op")).groupby(level=0, sort=True).mean()
    return {str(k): float(v) for k, v in mean.items()}


def alltoall_shapes(events: pd.DataFrame) -> list[tuple[int, int]]:
    """The distinct (member ranks, bytes each rank sends to each member) of the alltoall instances, in order of
    first appearance; the event table's ``bytes`` of an alltoall row is what that rank sends in all."""
    rows = _instances(events, ("alltoall",))
    if rows.empty:
        return []
    inst = rows.groupby("match", sort=True).agg(ranks=("rank", "size"), bytes=("bytes", "first"))
    shapes = zip(inst["ranks"].astype(int), (inst["bytes"] // inst["ranks"]).astype(int), strict=True)
    return list(dict.fromkeys((int(p), int(n)) for p, n in shapes))
