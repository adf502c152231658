"""Region structure of an operation table: pairing of enter/leave markers and the enclosing region of each op."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from waitlab.errors import SimulationError
from waitlab.models.ops import CODE, OpTable
from waitlab.models.vocabulary import VOCABULARY


def region_structure(ops: OpTable) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Pair enter/leave markers; return (enter rows, leave rows, enclosing-region-enter row per op)."""
    is_enter = ops.code == CODE["enter"]
    is_leave = ops.code == CODE["leave"]
    delta = is_enter.astype(np.int64) - is_leave.astype(np.int64)
    # depth after each op, restarted per rank
    csum = np.cumsum(delta)
    counts = ops.per_rank_counts()
    rank_start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    base = np.repeat(np.concatenate(([0], csum))[rank_start], counts)
    depth_after = csum - base
    depth_before = depth_after - delta
    if (depth_after < 0).any():
        i = int(np.flatnonzero(depth_after < 0)[0])
        raise SimulationError(f"rank {ops.rank[i]} operation {ops.seq[i]}: leave without a matching enter")
    last = np.concatenate((rank_start + counts - 1,))
    open_at_end = depth_after[last[counts > 0]]
    if (open_at_end != 0).any():
        r = int(np.flatnonzero(counts > 0)[int(np.flatnonzero(open_at_end != 0)[0])])
        raise SimulationError(f"rank {r} ends with {int(open_at_end[open_at_end != 0][0])} region(s) still open")
    e_rows, l_rows = np.flatnonzero(is_enter), np.flatnonzero(is_leave)
    e_depth, l_depth = depth_after[e_rows], depth_before[l_rows]
    # Rows are in (rank, seq) order: a stable sort by (rank, depth) keeps program order within each level,
    # where enters and the leaves closing them alternate, so the i-th enter pairs with the i-th leave.
    levels = int(depth_after.max(initial=0)) + 1
    e_ord = np.argsort(ops.rank[e_rows].astype(np.int64) * levels + e_depth, kind="stable")
    l_ord = np.argsort(ops.rank[l_rows].astype(np.int64) * levels + l_depth, kind="stable")
    e_rows, l_rows = e_rows[e_ord], l_rows[l_ord]
    if not np.array_equal(ops.name[e_rows], ops.name[l_rows]):
        i = int(np.flatnonzero(ops.name[e_rows] != ops.name[l_rows])[0])
        raise SimulationError(f"rank {ops.rank[l_rows[i]]} operation {ops.seq[l_rows[i]]}: leave "
                              f"{ops.names[ops.name[l_rows[i]]]} closes region {ops.names[ops.name[e_rows[i]]]}")
    order = np.argsort(e_rows)
    e_rows, l_rows = e_rows[order], l_rows[order]
    # Innermost open region of each op: for an op at depth d (regions open before it), the
    # last depth-d enter before it on its rank.  Rows are in (rank, seq) order, so a global
    # row index comparison works once the rank is checked.
    enclosing = np.full(len(ops), -1, np.int64)
    e_depth_sorted = depth_after[e_rows]
    for d in range(1, int(depth_before.max(initial=0)) + 1):
        cand = e_rows[e_depth_sorted == d]
        rows = np.flatnonzero(depth_before == d)
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
