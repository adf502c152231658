"""Operation tables that SimGrid 3.32's TI replay can run as recorded.

A measured program may complete some requests with ``MPI_Waitall`` while others stay pending for a later
``MPI_Wait`` (LULESH completes its sends with ``MPI_Waitall`` and its receives with ``MPI_Wait``).  SMPI's replay
``waitall`` completes *every* pending request of the rank, so the later ``wait`` finds nothing and the replay
aborts ("action wait not preceded by any irecv or isend").  :func:`replayable_ops` writes such a ``waitall`` as one
``wait`` per request it completed (which requests a completion call completed is known from the event table's
matching, :func:`waitlab.simulator.matching.completions`).

:func:`check_replayable` refuses what the TI replay cannot run: v-collectives and reduce-scatter on communicators
other than MPI_COMM_WORLD (in ``src/smpi/internals/smpi_replay.cpp`` of SimGrid 3.32, ``comm_split`` and
``comm_dup`` are no-ops and every collective runs on MPI_COMM_WORLD; waitlab's replay extension runs the
collectives of :data:`~waitlab.simulator.trace.SUBCOMM_COLLECTIVES` on the communicator their line names).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError
from waitlab.models.ops import OpTable, seq_within_rank
from waitlab.models.vocabulary import ACTIONS, CODE, COLLECTIVE_ACTIONS, SUBCOMM_COLLECTIVES, VOCABULARY, lut
from waitlab.simulator.matching import completions, match_messages
from waitlab.simulator.trace_rma import check_rma_replayable, with_rma_groups

_IS_NONBLOCKING = lut(a.name for a in VOCABULARY if a.kind in ("send", "recv") and not a.blocking)
_IS_COLLECTIVE = lut(COLLECTIVE_ACTIONS)
_ON_SUBCOMM = lut(SUBCOMM_COLLECTIVES)


def check_replayable(ops: OpTable, origin: str = "<scenario>") -> None:
    """Raise :class:`InputError` when SimGrid 3.32's TI replay (with waitlab's extension) cannot run ``ops`` as
    recorded."""
    check_rma_replayable(ops, origin)
    bad = np.flatnonzero(_IS_COLLECTIVE[ops.code] & ~_ON_SUBCOMM[ops.code] & (ops.comm != 0))
    if bad.size:
        i = int(bad[0])
        members = ops.comms[int(ops.comm[i]) - 1]
        raise InputError(origin, "application (capture)",
                         f"rank {ops.rank[i]} calls {ACTIONS[ops.code[i]]} on a sub-communicator (world ranks "
                         f"{', '.join(map(str, members[:16]))}{' ...' if len(members) > 16 else ''}): waitlab's replay "
                         f"runs only {', '.join(SUBCOMM_COLLECTIVES)} on a sub-communicator (SimGrid 3.32's TI "
                         "replay runs every collective on MPI_COMM_WORLD), so this capture could not replay",
                         'run the program itself (kind = "program"): waitlab measures collectives on any '
                         "communicator")


def open_requests_at(ops: OpTable, done: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """For every row, how many non-blocking requests of its rank were posted before it and are completed after it
    (or never)."""
    n = len(ops)
    nb = np.flatnonzero(_IS_NONBLOCKING[ops.code])
    counts = ops.per_rank_counts()
    next_first = np.cumsum(counts)[ops.rank[nb]]  # first row of the next rank
    end = np.where(done[nb] >= 0, done[nb], next_first)  # never completed: open to the rank's end
    rows = np.arange(n)
    posted_before = np.searchsorted(nb, rows, side="left")
    closed_by = np.searchsorted(np.sort(end), rows, side="right")  # completed at or before the row
    return (posted_before - closed_by).astype(np.int64)


def replayable_ops(ops: OpTable) -> OpTable:
    """``ops`` with every ``waitall`` that leaves other requests pending written as one ``wait`` per request it
    completes (in posting order), and every ``win_post``/``win_start`` naming its group in ``comm``
    (:func:`~waitlab.simulator.trace_rma.with_rma_groups`); other rows unchanged."""
    ops = with_rma_groups(ops)
    match = match_messages(ops)
    done = completions(ops, match)
    wa = np.flatnonzero(ops.code == CODE["waitall"])
    if wa.size == 0:
        return ops
    open_after = open_requests_at(ops, done)
    # requests completed by the waitall itself are not open after it; the others still pending are
    split = wa[open_after[wa] > 0]
    if split.size == 0:
        return ops
    nb = np.flatnonzero(_IS_NONBLOCKING[ops.code])
    req = nb[np.isin(done[nb], split)]  # the requests the split waitalls complete, in row (posting) order
    owner = done[req]
    n = len(ops)
    keep = np.ones(n, bool)
    keep[split] = False
    old = np.flatnonzero(keep)
    cols: dict[str, npt.NDArray[Any]] = {}
    for c in OpTable.COLUMNS:
        a = getattr(ops, c)
        new = a[owner].copy()
        cols[c] = np.concatenate((a[old], new))
    k = old.size
    cols["code"][k:] = CODE["wait"]
    cols["peer"][k:] = ops.peer[req]
    cols["tag"][k:] = ops.tag[req]
    cols["value"][k:] = 0.0
    cols["value2"][k:] = (ops.code[req] == CODE["irecv"]).astype(np.float64)  # 1: completes a receive
    # order: original rows by position, each split waitall's waits at its position, in posting order
    key = np.concatenate((old, owner)).astype(np.int64)
    tie = np.concatenate((np.zeros(old.size, np.int64), req.astype(np.int64)))
    order = np.lexsort((tie, key))
    cols = {c: a[order] for c, a in cols.items()}
    cols["seq"] = seq_within_rank(cols["rank"], ops.n_ranks)
    return OpTable(n_ranks=ops.n_ranks, names=ops.names, ledger=ops.ledger, comms=ops.comms, **cols)
