"""Operation tables that SimGrid 3.32's TI replay can run as recorded.

A measured program may complete some requests with ``MPI_Waitall`` while others stay pending for a later
``MPI_Wait`` (LULESH completes its sends with ``MPI_Waitall`` and its receives with ``MPI_Wait``).  SMPI's replay
``waitall`` completes *every* pending request of the rank, so the later ``wait`` finds nothing and the replay
aborts ("action wait not preceded by any irecv or isend").  :func:`replayable_ops` writes such a ``waitall`` as one
``wait`` per request it completed (which requests a completion call completed is known from the event table's
matching, :func:`waitlab.simulator.matching.completions`).

:func:`unrunnable` finds what a read trace asks that the replay cannot run (sizes past a C int, times past a year,
unbalanced regions, waits without request, v-collective counts that disagree); :func:`check_replayable` refuses
what the TI replay cannot run of a measured program: v-collectives and reduce-scatter on communicators
other than MPI_COMM_WORLD (in ``src/smpi/internals/smpi_replay.cpp`` of SimGrid 3.32, ``comm_split`` and
``comm_dup`` are no-ops and every collective runs on MPI_COMM_WORLD; waitlab's replay extension runs the
collectives of :data:`~waitlab.simulator.trace.SUBCOMM_COLLECTIVES` on the communicator their line names).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError
from waitlab.lazy import Deferred
from waitlab.models.ops import OpTable, seq_within_rank
from waitlab.models.regions import region_problem
from waitlab.models.vocabulary import (
    ACTIONS,
    CODE,
    COLLECTIVE_ACTIONS,
    SUBCOMM_COLLECTIVES,
    V_ACTIONS,
    VOCABULARY,
    lut,
)
from waitlab.simulator.matching import completions, match_messages
from waitlab.simulator.ti_args import value_problem
from waitlab.simulator.ti_vectors import VectorStore, occurrence_of
from waitlab.simulator.trace_rma import check_rma_replayable, with_rma_groups

if TYPE_CHECKING:
    from waitlab.models.analysis import trace_check as _trace_check
else:  # it imports pandas, which the way to a synthetic model's SMPI stage does not (a trace is checked before)
    _trace_check = Deferred("waitlab.models.analysis.trace_check")

_IS_NONBLOCKING = lut(a.name for a in VOCABULARY if a.kind in ("send", "recv") and not a.blocking)
_IS_COLLECTIVE = lut(COLLECTIVE_ACTIONS)
_ON_SUBCOMM = lut(SUBCOMM_COLLECTIVES)
_IS_V = lut(V_ACTIONS)


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


def unrunnable(ops: OpTable, vectors: VectorStore, where: Callable[[int], str], flops_per_second: float
               ) -> tuple[int, str, str] | None:
    """``(row, problem, fix)`` of the first operation of a read trace that the replay cannot run or represent, else
    ``None``: a size past a C int or a time past a year (:func:`~waitlab.simulator.ti_args.value_problem`), an
    unbalanced region (:func:`~waitlab.models.regions.region_problem`), a wait without its request
    (:func:`~waitlab.models.analysis.trace_check.wait_problem`), a v-collective whose counts disagree between ranks
    (:func:`~waitlab.models.analysis.trace_check.v_count_mismatch`).  SMPI would wrap the size, overflow the times,
    abort or stop with MPI_ERR_TRUNCATE on them.  ``where`` names a row in a problem (its line)."""
    return value_problem(ops, flops_per_second) or region_problem(ops, where) or _trace_check.wait_problem(ops, where) \
        or _v_count_problem(ops, vectors, where)


#: Instances of a v-collective compared at a time (their counts as (instances, ranks, ranks) arrays) times ranks^2.
_V_CHUNK = 1 << 22


def _v_count_problem(ops: OpTable, vectors: VectorStore, where: Callable[[int], str]) -> tuple[int, str, str] | None:
    """The first v-collective call whose per-rank counts disagree with another rank's (rows of the call's sender)."""
    v = np.flatnonzero(_IS_V[ops.code])
    if not v.size:
        return None
    n, found = ops.n_ranks, []
    k_all = occurrence_of(ops.rank[v], ops.code[v], ops.seq[v])
    for c in np.unique(ops.code[v]).tolist():
        rows, k = v[ops.code[v] == c], k_all[ops.code[v] == c]
        at = np.full((int(k.max()) + 1, n), -1, np.int64)  # [call k, rank] -> row (-1: the rank lacks the call)
        at[k, ops.rank[rows]] = rows
        root = ops.peer[np.maximum(at, 0)]
        # calls a rank lacks or whose roots differ: the collective check names those (trace_check.first_mismatch)
        calls = np.flatnonzero((at >= 0).all(axis=1) & (root == root[:, :1]).all(axis=1))
        step = max(1, _V_CHUNK // (n * n))
        for s in range(0, calls.size, step):
            part = calls[s:s + step]
            got = [vectors.data[(r, c, int(b))] for b in part.tolist() for r in range(n)]
            send = np.stack([g[0] for g in got]).reshape(part.size, n, n)
            recv = np.stack([g[1] for g in got]).reshape(part.size, n, n)
            hit = _trace_check.v_count_mismatch(ACTIONS[c], send, recv, root[part, 0].astype(np.int64))
            if hit is not None:
                b, i, j, sent, expected = hit
                action = ACTIONS[c]
                row, other = int(at[part[b], i]), int(at[part[b], 0 if action == "reducescatter" else j])
                found.append((row, *_trace_check.v_count_text(action, int(part[b]), i, j, sent, expected,
                                                              where(other))))
                break
    return min(found) if found else None


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
