"""Operation tables whose regions are malformed: the cases every region pass (numpy and C) must refuse alike."""

from __future__ import annotations

import numpy as np

from waitlab.models.ops import CODE, Ledger, OpTable

#: leave before enter, leave of another name, a region open at the end, a region open at its rank's end
MALFORMED_REGIONS = ("leave first", "other name", "open at end", "open at rank end")


def malformed_region_ops(case: str, filler: str = "barrier") -> OpTable:
    """Two ranks, four operations: enter/leave rows and ``filler`` rows arranged as ``case`` names."""
    e, x, b = CODE["enter"], CODE["leave"], CODE[filler]
    code, rank, name = {
        "leave first": ([b, x, e, x], [0, 0, 0, 0], [-1, 0, 0, 0]),
        "other name": ([e, e, x, x], [0, 0, 0, 0], [0, 1, 0, 1]),
        "open at end": ([b, b, b, e], [0, 0, 1, 1], [-1, -1, -1, 0]),
        "open at rank end": ([e, b, b, x], [0, 0, 1, 1], [0, -1, -1, 0]),
    }[case]
    n = len(code)
    return OpTable(n_ranks=2, names=("a", "b"), ledger=Ledger.empty(), rank=np.array(rank, np.int32),
                   seq=np.array([0, 1, 2, 3], np.int32) - np.searchsorted(rank, rank).astype(np.int32),
                   code=np.array(code, np.int8), step=np.zeros(n, np.int32), name=np.array(name, np.int32),
                   value=np.zeros(n), value2=np.zeros(n), peer=np.full(n, -1, np.int32), tag=np.zeros(n, np.int32),
                   cause=np.full(n, -1, np.int64), excess=np.zeros(n))
