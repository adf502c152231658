"""Impossible timelines: a collective instance where a rank left before the last rank entered.

A barrier completes on no rank before every member entered it; an allreduce, an alltoall, an allgather(v) or a
reduce-scatter completes on no member that receives data before every member that sends data entered it: in a
correct timeline no such member leaves the instance before the last of those entered.  Members that move no data
are not checked (Scalasca 2.6's rule: no payload, no synchronization point), nor is ``alltoallv`` (a sparse
exchange may legally let a rank leave before an unrelated one entered).  A simulator fault (SMPI 3.32's own
``MPI_Ibarrier`` released ranks early: docs/real_programs.md) or a broken trace breaks that, and then the wait
states of the instance are wrong (a rank that left early waited less than the barrier implies).
:func:`impossible_collectives` finds such instances, per collective operation; :func:`impossible_line` says it in
one line.

A nonblocking collective is booked at its completion call (``tag`` > 0: the rank's request serial), whose entry
is not when the rank joined the collective (it posted earlier): such a member's exit is checked against the others'
entries, but its own entry is not taken as its arrival.

Pure functions over the event table's columns (numpy, no row loops).

Examples
--------
>>> from waitlab.models.analysis.waitstates import make_events
>>> ev = make_events(rank=[0, 1, 2, 3], op=["barrier"] * 4, enter=[0.0, 0.5, 1.0, 1.5],
...                  exit=[1.5, 0.5, 1.0, 1.5], match=[0, 0, 0, 0])
>>> impossible_collectives(ev)
[{'op': 'barrier', 'instances': 1, 'of': 1, 'worst_gap': 1.0, 'worst_instance': 0}]
>>> impossible_line(impossible_collectives(ev))
'impossible timeline: barrier: 1 of 1 instance has a rank leaving before the last entered (worst gap 1 s, instance 0)'
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from waitlab.models.analysis.waitstates import BARRIER_OPS, NXN_OPS, payload

__all__ = ["CHECKED_OPS", "GAP_TOLERANCE", "impossible_collectives", "impossible_line"]

#: Collectives whose every receiving member needs every sending member's contribution before it can leave.
CHECKED_OPS: tuple[str, ...] = (*BARRIER_OPS, *(o for o in NXN_OPS if o != "alltoallv"))
#: Seconds a member may leave before the last entry without being reported (the simulated clock's rounding).
GAP_TOLERANCE = 1e-6


def impossible_collectives(events: pd.DataFrame, tolerance: float = GAP_TOLERANCE) -> list[dict[str, Any]]:
    """Per collective operation (in name order) with at least one impossible instance: how many of its instances
    have a member leaving more than ``tolerance`` seconds before the last member entered (``instances`` of
    ``of``), the worst gap (seconds) and the instance (``match`` id) it is in; ``[]`` when none."""
    if not len(events):
        return []
    op = events["op"]
    sel = op.isin(CHECKED_OPS).to_numpy()
    match = events["match"].to_numpy()
    rows = np.flatnonzero(sel & (match >= 0))
    if rows.size == 0:
        return []
    rows = rows[np.argsort(match[rows], kind="stable")]
    inst = match[rows]
    start = np.flatnonzero(np.r_[True, inst[1:] != inst[:-1]])
    enter = events["enter"].to_numpy()[rows]
    exit_ = events["exit"].to_numpy()[rows]
    tag = events["tag"].to_numpy()[rows] if "tag" in events else np.zeros(rows.size, np.int32)
    blocking = tag <= 0  # a nonblocking completion's entry is not its arrival
    sends, receives = payload(events)
    barrier = op.isin(BARRIER_OPS).to_numpy()[rows]
    sent, got = sends[rows] | barrier, receives[rows] | barrier  # a barrier's members all synchronize
    last_enter = np.maximum.reduceat(np.where(blocking & sent, enter, -np.inf), start)
    first_exit = np.minimum.reduceat(np.where(got, exit_, np.inf), start)
    gap = last_enter - first_exit
    bad = gap > tolerance
    if not bad.any():
        return []
    inst_op = np.asarray(op.iloc[rows[start]].astype(str))
    out = []
    for name in sorted(set(inst_op[bad].tolist())):
        mine = inst_op == name
        hits = np.flatnonzero(mine & bad)
        worst = hits[np.argmax(gap[hits])]
        out.append({"op": name, "instances": int(hits.size), "of": int(mine.sum()),
                    "worst_gap": float(gap[worst]), "worst_instance": int(inst[start[worst]])})
    return out


def impossible_line(found: list[dict[str, Any]]) -> str:
    """One line naming every collective with impossible instances (``""`` when ``found`` is empty)."""
    if not found:
        return ""
    parts = [f"{f['op']}: {f['instances']} of {f['of']} instance{'s' if f['of'] > 1 else ''} "
             f"{'has' if f['instances'] == 1 else 'have'} a rank leaving before the last entered (worst gap "
             f"{f['worst_gap']:.6g} s, instance {f['worst_instance']})" for f in found]
    return "impossible timeline: " + "; ".join(parts)
