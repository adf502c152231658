"""Impossible timelines: a collective instance where a rank left before the last rank entered.

A barrier completes on no rank before every member entered it; an allreduce, an alltoall, an allgather(v) or a
reduce-scatter completes on no member that receives data before every member that sends data entered it: in a
correct timeline no such member leaves the instance before the last of those entered.  Members that move no data
are not checked (Scalasca 2.6's rule: no payload, no synchronization point), nor is ``alltoallv`` (a sparse
exchange may legally let a rank leave before an unrelated one entered).  A simulator fault (SMPI 3.32's own
``MPI_Ibarrier`` released ranks early: docs/real_programs.md) or a broken trace breaks that, and then the wait
states of the instance are wrong (a rank that left early waited less than the barrier implies).
:func:`impossible_collectives` finds such instances, per collective operation, and the messages whose receive
completed before their send was entered (a point-to-point clock-condition violation, which Scalasca 2.6 warns of: a
skewed trace's late senders are then wrong), as one entry of ``op`` ``"message"``; :func:`impossible_line` says
it in one line.

A nonblocking collective is booked at its completion call (``tag`` > 0: the rank's request serial), whose entry
is not when the rank joined the collective (it posted earlier): such a member's exit is checked against the others'
entries, but its own entry is not taken as its arrival.

Pure functions over the event table's columns (numpy, no row loops), of a pandas DataFrame or an Arrow table
(:mod:`waitlab.models.columns`).

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
import numpy.typing as npt

from waitlab.models import columns
from waitlab.models.analysis.waitstates import BARRIER_OPS, NXN_OPS, payload
from waitlab.models.columns import Table
from waitlab.models.vocabulary import RECV_ACTIONS, SEND_ACTIONS

__all__ = ["CHECKED_OPS", "GAP_TOLERANCE", "impossible_collectives", "impossible_line", "impossible_messages"]

#: Collectives whose every receiving member needs every sending member's contribution before it can leave.
CHECKED_OPS: tuple[str, ...] = (*BARRIER_OPS, *(o for o in NXN_OPS if o != "alltoallv"))
#: Seconds a member may leave before the last entry without being reported (the simulated clock's rounding).
GAP_TOLERANCE = 1e-6


def impossible_collectives(events: Table, tolerance: float = GAP_TOLERANCE) -> list[dict[str, Any]]:
    """Per collective operation (in name order) with at least one impossible instance: how many of its instances
    have a member leaving more than ``tolerance`` seconds before the last member entered (``instances`` of
    ``of``), the worst gap (seconds) and the instance (``match`` id) it is in; then, if any, the entry of
    :func:`impossible_messages`; ``[]`` when none."""
    if not len(events):
        return []
    return _collectives(events, tolerance) + impossible_messages(events, tolerance)


def impossible_messages(events: Table, tolerance: float = GAP_TOLERANCE) -> list[dict[str, Any]]:
    """``[entry]`` when some message's receive completed (its row's exit, or that of the wait ``done`` names) more
    than ``tolerance`` seconds before its send was entered: ``op`` ``"message"``, how many (``instances`` of the
    ``of`` messages), the worst gap, its message (``match`` id) and its ``sender`` and ``receiver``; else ``[]``.

    >>> from waitlab.models.analysis.waitstates import make_events
    >>> ev = make_events(rank=[0, 1], op=["send", "recv"], enter=[0.5, 0.1], exit=[0.51, 0.3], match=[0, 0],
    ...                  done=[0, 1], peer=[1, 0])
    >>> print(impossible_line(impossible_messages(ev)))  # doctest: +NORMALIZE_WHITESPACE
    impossible timeline: message: 1 of 1 message has its receive done before its send was entered
    (worst gap 0.2 s, message 0 from rank 0 to rank 1)
    """
    op, match = columns.codes(events, "op"), columns.values(events, "match")
    sends = np.flatnonzero(_isin(op, SEND_ACTIONS) & (match >= 0))
    recvs = np.flatnonzero(_isin(op, RECV_ACTIONS) & (match >= 0))
    if not sends.size or not recvs.size:
        return []
    sends = sends[np.argsort(match[sends], kind="stable")]
    at = np.minimum(np.searchsorted(match[sends], match[recvs]), sends.size - 1)
    paired = match[sends][at] == match[recvs]
    send, recv = sends[at[paired]], recvs[paired]
    done = columns.values(events, "done")[recv]
    finish = columns.values(events, "exit")[np.where(done >= 0, done, recv)]
    gap = columns.values(events, "enter")[send] - finish
    bad = np.flatnonzero(gap > tolerance)
    if not bad.size:
        return []
    worst = bad[np.argmax(gap[bad])]
    rank = columns.values(events, "rank")
    return [{"op": "message", "instances": int(bad.size), "of": int(recv.size), "worst_gap": float(gap[worst]),
             "worst_instance": int(match[recv[worst]]), "sender": int(rank[send[worst]]),
             "receiver": int(rank[recv[worst]])}]


def _isin(op: tuple[npt.NDArray[np.integer[Any]], list[str]], wanted: tuple[str, ...]) -> npt.NDArray[np.bool_]:
    """Rows of a categorical column (codes, categories: :func:`waitlab.models.columns.codes`) whose label is one of
    ``wanted`` (a missing label is none)."""
    code, cats = op
    return np.array([c in wanted for c in cats] + [False])[code]


def _collectives(events: Table, tolerance: float) -> list[dict[str, Any]]:
    """The collective entries of :func:`impossible_collectives`."""
    op = columns.codes(events, "op")
    sel = _isin(op, CHECKED_OPS)
    match = columns.values(events, "match")
    rows = np.flatnonzero(sel & (match >= 0))
    if rows.size == 0:
        return []
    rows = rows[np.argsort(match[rows], kind="stable")]
    inst = match[rows]
    start = np.flatnonzero(np.r_[True, inst[1:] != inst[:-1]])
    enter = columns.values(events, "enter")[rows]
    exit_ = columns.values(events, "exit")[rows]
    tag = columns.values(events, "tag")[rows] if columns.has(events, "tag") else np.zeros(rows.size, np.int32)
    blocking = tag <= 0  # a nonblocking completion's entry is not its arrival
    sends, receives = payload(events)
    barrier = _isin(op, BARRIER_OPS)[rows]
    sent, got = sends[rows] | barrier, receives[rows] | barrier  # a barrier's members all synchronize
    last_enter = np.maximum.reduceat(np.where(blocking & sent, enter, -np.inf), start)
    first_exit = np.minimum.reduceat(np.where(got, exit_, np.inf), start)
    gap = last_enter - first_exit
    bad = gap > tolerance
    if not bad.any():
        return []
    inst_op = np.array(op[1], dtype=str)[op[0][rows[start]]]  # every row's op is a checked one: none missing
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
             f"{f['worst_gap']:.6g} s, instance {f['worst_instance']})" for f in found if f["op"] != "message"]
    for f in found:
        if f["op"] == "message":
            its = "has its" if f["instances"] == 1 else "have their"
            parts.append(f"message: {f['instances']} of {f['of']} message{'s' if f['of'] > 1 else ''} {its} receive "
                         f"done before {its.split()[1]} send was entered (worst gap {f['worst_gap']:.6g} s, message "
                         f"{f['worst_instance']} from rank {f['sender']} to rank {f['receiver']})")
    return "impossible timeline: " + "; ".join(parts)
