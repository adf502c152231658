"""Run summary: makespan and per-rank time budget, wait by pattern, operation and region.

For every rank: ``compute + perturbation + communication + wait + idle = makespan``,
where *perturbation* is the time perturbation models injected: rows of injected
noise/overhead/flush/swap/delay (rows carrying a cause of the ledger) and the
system-noise detours that stalled other rows (the noise ledger's hits, moved out of
the compute or the reduction they delayed), *compute* is the application's own time
outside MPI (its computation, a trace's ``sleep``, and any noise/overhead/... line
of a trace that no ledger cause injected), *communication* is MPI time minus wait
(minus detours in a reduction's flops), and *idle* is the rest (time after the rank
finished, or gaps between activities).

The tables are pandas DataFrames or Arrow tables (read by :mod:`waitlab.models.columns`; the budget comes back in
the kind of the event table).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.models import columns
from waitlab.models.analysis.grouped import descending, group_sums
from waitlab.models.analysis.timeline_check import impossible_collectives
from waitlab.models.columns import Table

#: Kinds of the rows perturbation models inject (a row of them counts as perturbation when it carries a cause).
PERTURBATION_KINDS = ("noise", "overhead", "flush", "swap", "delay")


def rank_budget(events: Table, waits: Table, n_ranks: int | None = None,
                detour: npt.ArrayLike | None = None) -> Table:
    """Per-rank seconds of compute, perturbation, communication, wait and idle (a table of the kind of ``events``:
    columns ``rank, compute, perturbation, communication, wait, idle``).

    ``detour`` (one value per event row, or ``None``: none) is the seconds of system-noise detours that stalled
    each row (:func:`detour_seconds` of the noise ledger's hits).  They are time the noise injected, so they move
    to perturbation from the row's own column: compute (a ``compute``, or a trace's line no cause injected), or
    communication (the flops of a reduction); a row that is already perturbation (an injected overhead record or
    jitter) keeps them there.  The columns still add up to the makespan.

    Examples
    --------
    >>> from waitlab.models.analysis.waitstates import make_events, wait_states
    >>> ev = make_events(rank=[0, 0, 1, 1], op=["compute", "barrier", "compute", "barrier"],
    ...                  enter=[0.0, 1.0, 0.0, 3.0], exit=[1.0, 3.0, 3.0, 3.0], match=[-1, 0, -1, 0])
    >>> rank_budget(ev, wait_states(ev)).round(6).to_dict("records")[0]
    {'rank': 0, 'compute': 1.0, 'perturbation': 0.0, 'communication': 0.0, 'wait': 2.0, 'idle': 0.0}

    Rank 1's 3 s compute held 2 s of detours: 1 s of its own work, 2 s of noise.

    >>> rank_budget(ev, wait_states(ev), detour=[0.0, 0.0, 2.0, 0.0]).round(6).to_dict("records")[1]
    {'rank': 1, 'compute': 1.0, 'perturbation': 2.0, 'communication': 0.0, 'wait': 0.0, 'idle': 0.0}
    """
    rank = columns.values(events, "rank")
    n = int(n_ranks if n_ranks is not None else (rank.max() + 1 if len(events) else 0))
    exit_ = columns.values(events, "exit")
    dur = exit_ - columns.values(events, "enter")
    makespan = float(exit_.max()) if len(events) else 0.0
    # one pass: each row's class, then every (rank, class) sum in one bincount; each bin adds its rows in row order,
    # as a bincount of the class's rows alone does (the same sums, bit for bit); one index buffer, reused
    cls = _kind_classes(events, _BUDGET_CLASSES)
    if columns.has(events, "cause"):  # only an injected row is perturbation; a trace's own lines are the application's
        cls[(cls == _PERTURBATION) & (columns.values(events, "cause") < 0)] = _COMPUTE
    idx = rank.astype(np.intp)
    idx *= _N_CLASSES
    idx += cls
    sums = np.bincount(idx, weights=dur, minlength=n * _N_CLASSES)
    compute, perturb, mpi = (sums[i::_N_CLASSES].astype(np.float64) for i in range(3))
    if detour is not None:  # detours inside compute or a reduction move to perturbation
        stalled = np.asarray(detour, np.float64)
        if stalled.shape != dur.shape:
            raise ValueError(f"detour has {stalled.size} values for {dur.size} events")
        moved = np.bincount(idx, weights=stalled, minlength=n * _N_CLASSES)
        from_compute, from_mpi = moved[_COMPUTE::_N_CLASSES], moved[_MPI::_N_CLASSES]
        compute -= from_compute
        mpi -= from_mpi
        perturb += from_compute + from_mpi
    # leaves: every row but regions (a region's duration set to 0.0, which leaves a sum unchanged)
    dur[cls == _REGION] = 0.0
    np.copyto(idx, rank, casting="unsafe")
    leaf = np.bincount(idx, weights=dur, minlength=n).astype(np.float64)
    wait = np.bincount(columns.values(waits, "rank"), weights=columns.values(waits, "wait"), minlength=n)
    return columns.table({
        "rank": np.arange(n, dtype=np.int32),
        "compute": compute,
        "perturbation": perturb,
        "communication": mpi - wait,
        "wait": wait,
        "idle": makespan - leaf,
    }, like=events)  # fmt: skip


#: The kinds of each column of :func:`rank_budget` (class 0, 1, 2), regions (3); any other kind is class 4.  A
#: ``sleep`` is the application's (SMPI's tracer writes the program's sleeps; no perturbation model injects one).
_BUDGET_CLASSES: tuple[tuple[str, ...], ...] = (("compute", "sleep"), PERTURBATION_KINDS, ("mpi",), ("region",))
_COMPUTE, _PERTURBATION, _MPI, _REGION = 0, 1, 2, 3
_N_CLASSES = len(_BUDGET_CLASSES) + 1


def detour_seconds(n_events: int, event_row: npt.ArrayLike, hit_row: npt.ArrayLike,
                   hit_seconds: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Seconds of detour inside every event row: the noise ledger's hits (the operation row each delayed and its
    seconds) summed per event; ``event_row`` is the operation row behind every event row.

    >>> detour_seconds(3, [10, 11, 12], [12, 10, 12], [0.5, 0.25, 0.5]).tolist()
    [0.25, 0.0, 1.0]
    """
    ev_row = np.asarray(event_row, np.int64)
    hits = np.asarray(hit_row, np.int64)
    if hits.size == 0:
        return np.zeros(n_events)
    event_of_op = np.full(int(max(ev_row.max(initial=-1), hits.max())) + 1, -1, np.int64)
    event_of_op[ev_row] = np.arange(ev_row.size)
    ev = event_of_op[hits]
    if (ev < 0).any():
        raise ValueError("a noise hit delayed an operation that has no event")
    return np.bincount(ev, weights=np.asarray(hit_seconds, np.float64), minlength=n_events).astype(np.float64)


def _kind_classes(events: Table, classes: Sequence[Sequence[str]], name: str = "kind") -> npt.NDArray[np.int8]:
    """Each row's class: the index of the first group of ``classes`` holding its kind (column ``name``), else
    ``len(classes)``.

    >>> from waitlab.models.columns import Coded, table
    >>> _kind_classes(table({"kind": Coded(np.array([2, 0, 1, -1]), ["mpi", "noise", "x"])}), [["noise"], ["mpi"]])
    array([2, 1, 0, 2], dtype=int8)
    """
    if columns.is_coded(events, name):
        code, labels = columns.codes(events, name)
        of_label = np.full(len(labels) + 1, len(classes), np.int8)  # the last: code -1 (missing)
        for i, group in reversed(list(enumerate(classes))):
            of_label[:-1][np.isin(np.array(labels, dtype=str), group)] = i
        return of_label[code]
    as_str = columns.values(events, name).astype(str)
    out = np.full(len(as_str), len(classes), np.int8)
    for i, group in reversed(list(enumerate(classes))):
        out[np.isin(as_str, group)] = i
    return out


def summarize(events: Table, waits: Table, budget: Table | None = None) -> dict[str, Any]:
    """Makespan, totals, and wait broken down by pattern, MPI operation and call path (``budget``: the tables'
    :func:`rank_budget`, when already made); the same for pandas DataFrames and Arrow tables.

    A breakdown holds every label with a positive wait, the largest first (ties in category order); the call path
    ``""`` (outside every region) is ``(top level)``.

    >>> from waitlab.models.analysis.waitstates import make_events, wait_states
    >>> ev = make_events(rank=[0, 1, 2], op=["barrier"] * 3, enter=[0.0, 1.0, 3.0], exit=[3.0] * 3, match=[0] * 3)
    >>> s = summarize(ev, wait_states(ev))
    >>> s["wait_by_pattern"], s["wait_by_path"], s["totals"]["wait"]
    ({'wait_at_barrier': 5.0}, {'(top level)': 5.0}, 5.0)
    """
    budget = rank_budget(events, waits) if budget is None else budget
    wait = columns.values(waits, "wait")

    def breakdown(col: str) -> dict[str, float]:
        if not len(waits):
            return {}
        code, cats = columns.codes(waits, col)
        seen = np.flatnonzero(np.bincount(code[code >= 0], minlength=len(cats)))  # the groups with a row
        total = group_sums(code, wait, len(cats))[seen]  # as pandas adds them (a missing label: no group)
        order = descending(total)  # the largest first, equal ones as pandas' sort puts them
        return {(cats[i] or "(top level)"): v for i, v in zip(seen[order].tolist(), total[order].tolist(),
                                                               strict=True) if v > 0}

    return {
        "makespan": float(columns.values(events, "exit").max()) if len(events) else 0.0,
        "ranks": len(budget),
        "events": len(events),
        "wait_states": len(waits),
        "totals": {c: float(columns.values(budget, c).sum())
                   for c in ("compute", "perturbation", "communication", "wait", "idle")},
        "wait_by_pattern": breakdown("pattern"),
        "wait_by_op": breakdown("op"),
        "wait_by_path": breakdown("path"),
        "max_rank_wait": float(columns.values(budget, "wait").max()) if len(budget) else 0.0,
        # collective instances with a rank leaving before the last one entered ([] when the timeline is possible)
        "impossible_collectives": impossible_collectives(events),
    }


def placement_text(ranks: int, nodes: int, per_node: int) -> str:
    """How the ranks sit on the nodes, for a summary line: full nodes as ``nodes x ranks``, else the room per node.

    >>> placement_text(16, 2, 8), placement_text(8, 1, 16), placement_text(16, 16, 1), placement_text(20, 2, 16)
    ('2 nodes x 8 ranks', '1 node, up to 16 ranks per node', '16 nodes x 1 rank', '2 nodes, up to 16 ranks per node')
    """
    node_s = f"{nodes} node{'s' if nodes != 1 else ''}"
    if ranks == nodes * per_node:
        return f"{node_s} x {per_node} rank{'s' if per_node != 1 else ''}"
    return f"{node_s}, up to {per_node} ranks per node"
