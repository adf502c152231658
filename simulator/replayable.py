"""Operation tables that SimGrid 3.32's TI replay can run as recorded.

A measured program may complete some requests with ``MPI_Waitall`` while others stay pending for a later
``MPI_Wait`` (LULESH completes its sends with ``MPI_Waitall`` and its receives with ``MPI_Wait``).  SMPI's replay
``waitall`` completes *every* pending request of the rank, so the later ``wait`` finds nothing and the replay
aborts ("action wait not preceded by any irecv or isend").  :func:`replayable_ops` writes such a ``waitall`` as one
``wait`` per request it completed (which requests a completion call completed is known from the event table's
matching, :func:`waitlab.simulator.matching.completions`).

:func:`unrunnable` finds what a read trace asks that the replay cannot run (sizes past a C int, times past a year,
unbalanced regions, waits without request, collective counts that disagree); :func:`check_replayable` refuses
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
    is_rooted,
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
    (:func:`~waitlab.models.analysis.trace_check.v_count_mismatch`) or any other collective's
    (:func:`_count_problem`).  SMPI would wrap the size, overflow the times,
    abort or stop with MPI_ERR_TRUNCATE on them.  ``where`` names a row in a problem (its line)."""
    return value_problem(ops, flops_per_second) or region_problem(ops, where) or _trace_check.wait_problem(ops, where) \
        or _v_count_problem(ops, vectors, where) or _count_problem(ops, where)


#: Collectives of one count per rank (v-collectives: :func:`_v_count_problem`); the exchanges send and receive the
#: same count, the reductions and bcast give every rank's the root's (or the communicator's rank 0's).
_FIXED_COUNT = lut(a for a in COLLECTIVE_ACTIONS if a not in V_ACTIONS and a != "barrier")
_EXCHANGE = lut(("alltoall", "allgather"))


def _count_problem(ops: OpTable, where: Callable[[int], str]) -> tuple[int, str, str] | None:
    """The first collective call (other than a v-collective) whose count disagrees with its peers' (MPI requires
    matching type signatures; SMPI stops with MPI_ERR_TRUNCATE): an alltoall or allgather that sends another count
    than it receives, a gather sending other than its root receives from each rank, a scatter receiving other than
    its root sends to each (the root's own block aside), another collective whose count differs from its root's
    (bcast, reduce) or from the communicator's first rank's.  An instance is the k-th collective of its members on
    one communicator; instances whose members call different collectives or roots are left to the collective check
    (trace_check)."""
    coll = np.flatnonzero(_IS_COLLECTIVE[ops.code])
    if not _FIXED_COUNT[ops.code[coll]].any():
        return None
    comm, rank = ops.comm[coll].astype(np.int64), ops.rank[coll].astype(np.int64)
    code, peer = ops.code[coll].astype(np.int64), ops.peer[coll].astype(np.int64)
    pos = rank.copy()  # rank within the communicator
    for c in np.unique(comm[comm > 0]).tolist():
        members = np.asarray(ops.comms[c - 1], np.int64)
        local = np.full(ops.n_ranks, -1, np.int64)
        local[members] = np.arange(members.size)
        pos[comm == c] = local[rank[comm == c]]
    order = np.lexsort((ops.seq[coll], rank, comm))  # each (communicator, rank)'s collectives in sequence order
    key = comm[order] * ops.n_ranks + rank[order]
    start = np.r_[True, key[1:] != key[:-1]]
    k = np.empty(coll.size, np.int64)
    k[order] = np.arange(key.size) - np.maximum.accumulate(np.where(start, np.arange(key.size), 0))
    inst = np.unique(comm * (int(k.max()) + 1) + k, return_inverse=True)[1].ravel()
    g = np.lexsort((pos, inst))  # instances, their members in communicator-rank order
    first = np.flatnonzero(np.r_[True, inst[g][1:] != inst[g][:-1]])
    size = np.diff(np.r_[first, g.size])
    same = (np.minimum.reduceat(code[g], first) == np.maximum.reduceat(code[g], first)) \
        & (np.minimum.reduceat(peer[g], first) == np.maximum.reduceat(peer[g], first))
    rooted = is_rooted(code[g][first])
    at_root = np.where(rank[g] == peer[g], np.arange(g.size), -1)
    ref_at = np.where(rooted, np.maximum.reduceat(at_root, first), first)  # the root's row, or the first member's
    ok = same & (ref_at >= 0) & _FIXED_COUNT[code[g][first]]
    ref = np.full(coll.size, -1, np.int64)
    ref[g] = np.repeat(np.where(ok, g[np.maximum(ref_at, 0)], -1), size)
    rows = np.flatnonzero(ref >= 0)
    v, v2 = ops.value[coll], ops.value2[coll]
    r_, c_ = ref[rows], code[rows]
    own = _EXCHANGE[c_] & (v[rows] != v2[rows])  # sends other than it receives
    mine = np.where(c_ == CODE["scatter"], v2[rows], v[rows])
    theirs = np.where(c_ == CODE["gather"], v2[r_], v[r_])
    # a gather's (scatter's) root copies its own block locally: it may give no count (MPI_IN_PLACE)
    local = ((c_ == CODE["gather"]) | (c_ == CODE["scatter"])) & (rows == r_)
    bad = own | ((mine != theirs) & ~local)
    if not bad.any():
        return None
    j = int(np.flatnonzero(bad)[np.argmin(coll[rows[bad]])])
    i, o = int(rows[j]), int(r_[j])
    action, r, q = ACTIONS[int(code[i])], int(rank[i]), int(rank[o])
    on = "" if comm[i] == 0 else " on comm=" + ",".join(map(str, ops.comms[int(comm[i]) - 1]))
    call = f"rank {r}'s {action} #{int(k[i]) + 1}{on}"
    tail = ": a collective's counts must match (MPI requires matching type signatures; SMPI would stop with " \
           "MPI_ERR_TRUNCATE)"
    if own[j]:
        return int(coll[i]), f"{call} sends {v[i]:g} bytes to each rank but receives {v2[i]:g} from each{tail}", \
            f"give rank {r}'s line equal send and receive counts (count x datatype size), as every rank's"
    if action == "gather":
        text = f"sends {v[i]:g} bytes but the root, rank {q} ({where(int(coll[o]))}), receives {v2[o]:g} from each rank"
    elif action == "scatter":
        text = f"receives {v2[i]:g} bytes but the root, rank {q} ({where(int(coll[o]))}), sends {v[o]:g} to each rank"
    else:
        text = f"has a count of {v[i]:g} bytes where rank {q}'s ({where(int(coll[o]))}) has {v[o]:g}"
    return int(coll[i]), f"{call} {text}{tail}", \
        f"make the count x datatype size of rank {r}'s line match rank {q}'s ({float(theirs[j]):g} bytes)"


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
    cols["comm"][k:] = ops.comm[req]
    cols["value"][k:] = 0.0
    cols["value2"][k:] = (ops.code[req] == CODE["irecv"]).astype(np.float64)  # 1: completes a receive
    # order: original rows by position, each split waitall's waits at its position, in posting order
    key = np.concatenate((old, owner)).astype(np.int64)
    tie = np.concatenate((np.zeros(old.size, np.int64), req.astype(np.int64)))
    order = np.lexsort((tie, key))
    cols = {c: a[order] for c, a in cols.items()}
    cols["seq"] = seq_within_rank(cols["rank"], ops.n_ranks)
    return OpTable(n_ranks=ops.n_ranks, names=ops.names, ledger=ops.ledger, comms=ops.comms, **cols)
