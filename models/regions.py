"""Region structure of an operation table: pairing of enter/leave markers and the enclosing region of each op."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from waitlab.errors import SimulationError
from waitlab.models.ops import CODE, OpTable
from waitlab.models.vocabulary import VOCABULARY

#: enter rows, leave rows, region depth after each row, region depth before each row
_Depths = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]


def _depths(ops: OpTable) -> _Depths:
    """(enter rows, leave rows, region depth after each row, depth before it), the depth restarted per rank."""
    is_enter = ops.code == CODE["enter"]
    is_leave = ops.code == CODE["leave"]
    delta = is_enter.astype(np.int64) - is_leave.astype(np.int64)
    csum = np.cumsum(delta)
    counts = ops.per_rank_counts()
    rank_start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    base = np.repeat(np.concatenate(([0], csum))[rank_start], counts)
    depth_after = csum - base
    return np.flatnonzero(is_enter), np.flatnonzero(is_leave), depth_after, depth_after - delta


def _pair(ops: OpTable, d: _Depths) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For every leave row (no depth below 0), the enter row it closes: at each (rank, depth), in program order,
    enters and the leaves closing them alternate, so the i-th leave of a level closes the i-th enter of it.
    Returns (enter rows paired, leave rows), in (rank, depth, program) order."""
    e_rows, l_rows, depth_after, depth_before = d
    levels = int(depth_after.max(initial=0)) + 1
    e_key = ops.rank[e_rows].astype(np.int64) * levels + depth_after[e_rows]
    l_key = ops.rank[l_rows].astype(np.int64) * levels + depth_before[l_rows]
    e_ord, l_ord = np.argsort(e_key, kind="stable"), np.argsort(l_key, kind="stable")
    e_key, l_key = e_key[e_ord], l_key[l_ord]
    nth = np.arange(l_key.size) - np.searchsorted(l_key, l_key, side="left")  # the leave's place in its level
    return e_rows[e_ord][np.searchsorted(e_key, l_key, side="left") + nth], l_rows[l_ord]


def _operation(ops: OpTable) -> Callable[[int], str]:
    return lambda i: f"operation {int(ops.seq[i])} of rank {int(ops.rank[i])}"


def _problem(ops: OpTable, d: _Depths, where: Callable[[int], str],
             pairs: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None) -> tuple[int, str, str] | None:
    """:func:`region_problem` of the depths ``d`` and their :func:`_pair` ``pairs`` (``None`` when a depth is < 0)."""
    e_rows, _, depth_after, _ = d

    def name(i: int) -> str:
        return ops.names[int(ops.name[i])] if ops.name[i] >= 0 else "(unnamed)"

    if pairs is None:
        i = int(np.flatnonzero(depth_after < 0)[0])
        return i, f"leave {name(i)} without a matching enter: no region is open on rank {int(ops.rank[i])}", \
            f"add 'enter {name(i)}' before it, or remove it"
    closes, leaves = pairs
    crossed = np.flatnonzero(ops.name[closes] != ops.name[leaves])
    if crossed.size:
        c = crossed[np.argmin(leaves[crossed])]
        i, e = int(leaves[c]), int(closes[c])
        return i, f"leave {name(i)} closes region {name(e)} (entered at {where(e)}): regions must nest", \
            f"leave {name(e)} before {name(i)} (leave regions in the reverse order of entering them)"
    left = np.zeros(len(ops), bool)
    left[closes] = True
    open_ = e_rows[~left[e_rows]]
    if open_.size:
        i = int(open_[0])
        r = int(ops.rank[i])
        still = int(np.count_nonzero(ops.rank[open_] == r))
        return i, f"region {name(i)} is entered and never left: rank {r} ends with {still} region(s) still open", \
            f"add 'leave {name(i)}' after the region's last operation"
    return None


def region_problem(ops: OpTable, where: Callable[[int], str] | None = None) -> tuple[int, str, str] | None:
    """``(row, problem, fix)`` of the first unbalanced region marker (a leave without enter, crossed regions, a
    region never left), else ``None``; ``where`` names a row in the problem (default: its operation and rank).

    >>> from waitlab.models.ops import OpBuilder
    >>> b = OpBuilder(1)
    >>> for a, nm in (("enter", "a"), ("enter", "b"), ("leave", "a"), ("leave", "b")):
    ...     b.add(a, 0, region=nm)
    >>> region_problem(b.build())[:2]
    (2, 'leave a closes region b (entered at operation 1 of rank 0): regions must nest')
    """
    d = _depths(ops)
    return _problem(ops, d, where or _operation(ops), _pairs(ops, d))


def _pairs(ops: OpTable, d: _Depths) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    return None if (d[2] < 0).any() else _pair(ops, d)


def region_structure(ops: OpTable) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Pair enter/leave markers; return (enter rows, leave rows, enclosing-region-enter row per op).

    Raises :class:`~waitlab.errors.SimulationError` naming the operation of an unbalanced marker
    (:func:`region_problem`; a trace's reader refuses those with its file and line before)."""
    d = _depths(ops)
    pairs = _pairs(ops, d)
    found = _problem(ops, d, _operation(ops), pairs)
    if found is not None:
        i, problem, fix = found
        raise SimulationError(f"rank {ops.rank[i]} operation {ops.seq[i]}: {problem} (fix: {fix})")
    assert pairs is not None  # a depth below 0 is a problem found
    _, _, depth_after, depth_before = d
    e_rows, l_rows = pairs
    order = np.argsort(e_rows)
    e_rows, l_rows = e_rows[order], l_rows[order]
    # Innermost open region of each op: for an op at depth d (regions open before it), the
    # last depth-d enter before it on its rank.  Rows are in (rank, seq) order, so a global
    # row index comparison works once the rank is checked.
    enclosing = np.full(len(ops), -1, np.int64)
    e_depth_sorted = depth_after[e_rows]
    for dep in range(1, int(depth_before.max(initial=0)) + 1):
        cand = e_rows[e_depth_sorted == dep]
        rows = np.flatnonzero(depth_before == dep)
        if rows.size == 0:
            continue
        p = np.searchsorted(cand, rows) - 1
        enclosing[rows] = cand[p]
    return e_rows, l_rows, enclosing


#: Codes of MPI operations: their ``name`` is the call the program made (``MPI_Sendrecv``), not a region.
_IS_MPI = np.array([a.event_kind == "mpi" for a in VOCABULARY])


def enclosing_region(ops: OpTable) -> npt.NDArray[np.int32]:
    """Region (index into ``ops.names``) of every operation: its own name (not an MPI operation's: that names its
    call), else the innermost open region."""
    _, _, enclosing = region_structure(ops)
    inner = np.where(enclosing >= 0, ops.name[np.maximum(enclosing, 0)], -1)
    return np.where((ops.name >= 0) & ~_IS_MPI[ops.code], ops.name, inner).astype(np.int32)
