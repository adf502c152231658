"""An OTF2 trace's records (e.g. recorded by Score-P) as an operation table: pure, vectorised.

The reader (:mod:`waitlab.simulator.otf2_import`) hands over every location's records as numpy columns
(:class:`TraceRecords`); :func:`records_to_ops` turns them into the operation table the pipeline replays:

* a user region's ``Enter``/``Leave`` (Score-P's function, user and OpenMP-free regions) -> ``enter`` /
  ``leave`` of that region, under its Score-P name (:func:`region_label`);
* every MPI call's records (the MPI region's ``Enter``/``Leave`` bound the call) -> its operation:
  ``MpiSend``/``MpiRecv`` -> ``send``/``recv``; ``MpiIsend`` -> ``isend`` (in an ``MPI_Ssend`` / ``MPI_Issend``
  region: ``ssend`` / ``issend``, synchronous); ``MpiIrecvRequest`` -> ``irecv``
  (partner, tag and size from the matching ``MpiIrecv``); ``MpiIsendComplete``/``MpiIrecv`` -> ``wait`` for
  that request, or one ``waitall`` when an ``MPI_Waitall`` completes every outstanding request of its rank;
  a call holding several blocking records (``MPI_Sendrecv``) -> non-blocking ones, each then waited for, all
  named after the call's region (the event table's ``call`` column: the outputs say ``MPI_Sendrecv``);
  ``MpiCollectiveEnd`` -> the collective, its counts recovered from Score-P's byte accounting
  (:mod:`waitlab.models.byte_accounting`, inverted); ``NonBlockingCollectiveComplete`` -> the blocking
  collective, booked in the call that completes it (as waitlab's measurement layer records ``MPI_Iallreduce``);
* the time between two MPI calls (user region markers split it) -> ``compute`` of that duration times
  ``cpu_ratio``, the speed of the traced machine over the modeled one (Dimemas' CPU ratio: 2 means the
  modeled core is half as fast, so compute takes twice as long).  Time before the end of ``MPI_Init`` and
  after the start of ``MPI_Finalize`` is not replayed (a trace without ``MPI_Init`` starts every rank at
  the trace's first timestamp); time inside MPI calls is simulated, never compute (a call that moves
  nothing, such as ``MPI_Comm_rank`` or an unsuccessful ``MPI_Test``, takes no time); artificial regions
  (Score-P's ``TRACE BUFFER FLUSH``, waitlab's own ``compute``/``noise`` activities) are transparent: their
  time counts as compute.

Partner and root ranks are recorded within their communicator; they become world ranks through the
communicator's members.  For a replay (:func:`records_to_ops`), v-collectives (``MPI_Gatherv``, ``MPI_Scatterv``,
``MPI_Allgatherv``, ``MPI_Alltoallv``) become their equal-count forms and ``MPI_Reduce_scatter`` (``_block``) a
``reducescatter`` split evenly: OTF2 records each rank's total bytes, not per-peer counts, so every rank of one
instance (the k-th collective of its ranks on one communicator) gets the same count, from the bytes the instance moved
(:data:`~waitlab.models.otf2_records.EQUAL_COUNTS`): the replay's ranks agree (a rank's count differing from its
peers' made SMPI fail with MPI_ERR_TRUNCATE or deadlock) and the instance moves its recorded total, to the
rounding of one count to whole bytes.  Read as recorded (:func:`records_to_timed_ops`, ``waitlab analyze``: nothing
is replayed), v-collectives keep their v-form and each rank its own recorded bytes (a gatherv rank that sent nothing
sends nothing, so it is no late sender).  What cannot be replayed raises
:class:`Otf2Unreplayable` naming the first such record; an inconsistent archive (a request never completed, a region
never left) raises :class:`Otf2Inconsistent`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.models.ops import CODE, Ledger, OpTable, seq_within_rank
from waitlab.models.otf2_records import (
    COLLECTIVES,
    EQUAL_COUNTS,
    FINALIZE,
    INIT,
    MPI,
    MPI_RECORDS,
    OTF2_RECORD,
    RECORD_KINDS,
    TRANSPARENT,
    UNDEFINED_UINT32,
    USER,
    K,
    Otf2Inconsistent,
    Otf2Unreplayable,
    TraceRecords,
    check_supported,
    kinds_mask,
    per_rank_cumsum,
    request_pairs,
    without_cancelled,
    world_ranks,
)
from waitlab.models.vocabulary import COLLECTIVE_ACTIONS, SUBCOMM_COLLECTIVES

__all__ = ["Otf2Inconsistent", "Otf2Unreplayable", "TraceRecords", "records_to_ops", "records_to_timed_ops"]

#: Collectives read on a sub-communicator: those waitlab's replay runs there, and ``reducescatter`` (a recorded
#: trace's analysis replays nothing; :func:`records_to_ops`, the conversion for a replay, refuses it).
_ON_SUBCOMM = frozenset((*SUBCOMM_COLLECTIVES, "reducescatter"))
#: The v-collectives' own actions, for a trace read as recorded (no replay): each rank keeps its recorded bytes.
_V_FORM = {"GATHERV": "gatherv", "SCATTERV": "scatterv", "ALLGATHERV": "allgatherv", "ALLTOALLV": "alltoallv"}
#: Collectives with a root (their record's root is a rank of their communicator).
_ROOTED = frozenset({"bcast", "reduce", "gather", "scatter"})
#: The MPI call of an OTF2 collective operation, for messages (``BCAST`` -> ``MPI_Bcast``).
_CALL = {"BARRIER": "MPI_Barrier", "BCAST": "MPI_Bcast", "GATHER": "MPI_Gather", "GATHERV": "MPI_Gatherv",
         "SCATTER": "MPI_Scatter", "SCATTERV": "MPI_Scatterv", "ALLGATHER": "MPI_Allgather",
         "ALLGATHERV": "MPI_Allgatherv", "ALLTOALL": "MPI_Alltoall", "ALLTOALLV": "MPI_Alltoallv",
         "ALLREDUCE": "MPI_Allreduce", "REDUCE": "MPI_Reduce", "SCAN": "MPI_Scan", "EXSCAN": "MPI_Exscan",
         "REDUCE_SCATTER": "MPI_Reduce_scatter", "REDUCE_SCATTER_BLOCK": "MPI_Reduce_scatter_block"}


def _collective_values(rec: TraceRecords, rows: npt.NDArray[np.int64], comms: dict[tuple[int, ...], int],
                       equal_counts: bool) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float64],
                                                    npt.NDArray[np.float64], npt.NDArray[np.int32],
                                                    npt.NDArray[np.int32]]:
    """Action code, value, value2, root (world rank, -1) and communicator (0: MPI_COMM_WORLD, else its id in
    ``comms``, which gets the new member lists) of ``MpiCollectiveEnd`` rows: Score-P's byte accounting (module
    :mod:`waitlab.models.byte_accounting`) solved for the counts; with ``equal_counts`` (a replay) the collectives of
    :data:`~waitlab.models.otf2_records.EQUAL_COUNTS` get one count per instance (:func:`_instance_counts`),
    without it the v-collectives keep their v-form and each rank its own recorded bytes (:data:`_V_FORM`)."""
    n = rows.size
    code = np.zeros(n, np.int8)
    value, value2 = np.zeros(n), np.zeros(n)
    root = np.full(n, -1, np.int32)
    comm_id = np.zeros(n, np.int32)
    n_comm = np.zeros(n)
    me = np.zeros(n)  # rank within the communicator
    world_root = np.zeros(n, np.int32)
    sent, got = rec.d[rows].astype(np.float64), rec.e[rows].astype(np.float64)
    me_world = rec.rank[rows]
    ops = np.unique(rec.a[rows]).tolist()
    names = {op: rec.collective_names.get(int(op), f"collective {op}") for op in ops}
    for op in ops:  # communicators, sizes and roots (a pass before the counts: an instance spans ops' rows)
        name = names[op]
        sel = np.flatnonzero(rec.a[rows] == op)
        if name not in COLLECTIVES:
            j = int(rows[sel[0]])
            raise Otf2Unreplayable(f"rank {int(rec.rank[j])}", f"collective {name} cannot be replayed (SimGrid "
                                   "3.32's trace replay has no such action)", "record the run without it")
        action = COLLECTIVES[name]
        code[sel] = CODE[action]
        comm = rec.b[rows[sel]]
        r = np.zeros(n, np.int64)
        r[sel] = np.where(rec.c[rows[sel]] == UNDEFINED_UINT32, 0, rec.c[rows[sel]])
        for ref in np.unique(comm).tolist():
            members = rec.comm_members.get(int(ref), ())
            on = sel[comm == ref]
            if not members and members is not None:
                j = int(rows[on[0]])
                raise Otf2Inconsistent(f"rank {int(rec.rank[j])}", f"{_CALL.get(name, name)} is on communicator "
                                       f"{ref}, which the definitions do not define as an MPI communicator of these "
                                       "ranks", "the archive's definitions are incomplete: record the run again")
            # MPI_COMM_SELF: each rank's own communicator of one member (one rank: no wait)
            groups = [(on, tuple(int(m) for m in members))] if members is not None else _per_rank(on, me_world[on])
            for at, group in groups:
                _communicator_rows(rec, rows, at, int(ref), group, action, name, r[at], comms, n_comm, me, me_world,
                                   world_root, comm_id)
    per_peer = _instance_counts(me_world, comm_id, sent, got)
    for op in ops:
        name = names[op]
        action = COLLECTIVES[name]
        sel = np.flatnonzero(rec.a[rows] == op)
        s, g, nc = sent[sel], got[sel], n_comm[sel]
        if action in ("bcast", "reduce", "gather", "scatter"):
            root[sel] = world_root[sel]
        is_root = root[sel] == me_world[sel]
        if not equal_counts and name in _V_FORM:  # each rank's own bytes (byte rules all_to_one_v, ...)
            code[sel] = CODE[_V_FORM[name]]
            value[sel] = s / nc if name == "ALLGATHERV" else s  # an allgatherv sends its block to N ranks
            value2[sel] = g
        elif name in EQUAL_COUNTS:  # every rank of the instance: one count from the instance's totals
            c = per_peer[sel] / nc ** EQUAL_COUNTS[name]
            value[sel] = c
            value2[sel] = 0.0 if action == "reducescatter" else c  # reducescatter: value2 = flops (unknown)
        elif action == "bcast":  # one_to_all: the root sends N buffers (Scalasca decides on them), others get one
            value[sel] = np.where(is_root, s / nc, g)
        elif action == "reduce":  # all_to_one: every rank sends its buffer
            value[sel] = s
        elif action in ("allreduce", "alltoall", "allgather"):  # all_to_all: N messages each way
            value[sel] = s / nc
            value2[sel] = 0.0 if action == "allreduce" else g / nc
        elif action == "gather":  # all_to_one: the root receives N blocks
            value[sel] = s
            value2[sel] = np.where(is_root, g / nc, s)
        elif action == "scatter":  # one_to_all: the root sends N blocks
            value[sel] = np.where(is_root, s / nc, g)
            value2[sel] = g
        elif action == "scan":  # scan: rank me receives (me + 1) blocks
            value[sel] = g / (me[sel] + 1)
        elif action == "exscan":  # exscan: rank me sends (N - me - 1) blocks, receives me
            m = me[sel]
            value[sel] = np.where(m > 0, g / np.maximum(m, 1), s / np.maximum(nc - m - 1, 1))
    return code, np.rint(value), np.rint(value2), root, comm_id


def _per_rank(rows: npt.NDArray[np.int64], rank: npt.NDArray[np.int32]
              ) -> list[tuple[npt.NDArray[np.int64], tuple[int, ...]]]:
    """``rows`` split by their ``rank``: (the rows of rank r, ``(r,)``) for each rank r, in rank order.

    >>> [(a.tolist(), m) for a, m in _per_rank(np.array([4, 5, 6]), np.array([1, 0, 1], np.int32))]
    [([5], (0,)), ([4, 6], (1,))]
    """
    order = np.argsort(rank, kind="stable")
    ranks, starts = np.unique(rank[order], return_index=True)
    return [(part, (int(r),)) for part, r in zip(np.split(rows[order], starts[1:]), ranks.tolist(), strict=True)]


def _communicator_rows(rec: TraceRecords, rows: npt.NDArray[np.int64], at: npt.NDArray[np.int64], ref: int,
                       members: tuple[int, ...], action: str, name: str, root: npt.NDArray[np.int64],
                       comms: dict[tuple[int, ...], int], n_comm: npt.NDArray[np.float64], me: npt.NDArray[np.float64],
                       me_world: npt.NDArray[np.int32], world_root: npt.NDArray[np.int32],
                       comm_id: npt.NDArray[np.int32]) -> None:
    """Size, own rank in it, root (a world rank) and communicator id of the collective rows ``at`` (positions in
    ``rows``), all on the communicator ``ref`` of world ranks ``members`` (in communicator-rank order), filled in
    place.
    Raises :class:`Otf2Inconsistent` for a communicator listing a rank twice, a caller or a root outside the
    communicator, :class:`Otf2Unreplayable` for a collective a sub-communicator cannot hold."""
    world = members == tuple(range(rec.n_ranks))
    j = int(rows[at[0]])
    lut = np.asarray(members, np.int32)
    twice = np.flatnonzero(np.bincount(lut, minlength=rec.n_ranks) > 1)
    if twice.size:
        raise Otf2Inconsistent(f"rank {int(rec.rank[j])}", f"{_CALL.get(name, name)} is on communicator {ref}, "
                               f"whose definition lists rank {int(twice[0])} twice (members {list(members)[:16]}): "
                               "a communicator's members are distinct ranks", "the archive's definitions are "
                               "inconsistent: record the run again")
    outside = np.flatnonzero(~np.isin(me_world[at], lut))
    if outside.size:
        k = int(rows[at[outside[0]]])
        raise Otf2Inconsistent(f"rank {int(rec.rank[k])}", f"records {_CALL.get(name, name)} (record "
                               f"MpiCollectiveEnd) on communicator {ref}, whose members (world ranks "
                               f"{list(members)[:16]}) do not include rank {int(rec.rank[k])}: only a communicator's "
                               "members call its collectives", "the archive is inconsistent: record the run again")
    # a reduce-scatter on a sub-communicator is read (waitlab analyze needs no replay); records_to_ops, the
    # conversion for a replay, refuses it (_check_replayable)
    if not world and action not in _ON_SUBCOMM:
        raise Otf2Unreplayable(f"rank {int(rec.rank[j])}", f"{_CALL.get(name, name)} on a communicator of "
                               f"{len(members)} of the {rec.n_ranks} ranks cannot be read: waitlab runs only "
                               f"{', '.join(sorted(_ON_SUBCOMM))} on communicators other than MPI_COMM_WORLD",
                               "record a run whose other collectives use MPI_COMM_WORLD, or run the program itself "
                               '(application.kind = "program")')
    if action in _ROOTED:
        out = np.flatnonzero(root >= lut.size)
        if out.size:
            k = int(rows[at[out[0]]])
            raise Otf2Inconsistent(f"rank {int(rec.rank[k])}", f"{_CALL.get(name, name)} (record MpiCollectiveEnd) "
                                   f"names root {int(root[out[0]])}, which is outside its communicator {ref} "
                                   f"({lut.size} members)", "the archive is inconsistent: record the run again")
    local = np.full(rec.n_ranks, -1, np.int64)
    local[lut] = np.arange(lut.size)
    n_comm[at] = lut.size
    me[at] = local[me_world[at]]
    world_root[at] = lut[np.minimum(root, lut.size - 1)]  # root: communicator rank -> world rank (rooted: in range)
    if not world:
        comm_id[at] = comms.setdefault(members, len(comms) + 1)


def _instance_counts(rank: npt.NDArray[np.int32], comm: npt.NDArray[np.int32], sent: npt.NDArray[np.float64],
                     got: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """For each collective row (in trace order per rank), the bytes its instance moved: the mean of the instance's
    bytes sent and received, each summed over its ranks (equal for a consistent archive).

    An instance is the k-th collective of every rank on one communicator (``comm``: the operation table's, so
    MPI_COMM_WORLD and its duplicates are one, as the replay matches them), in the order MPI requires.

    >>> _instance_counts(np.array([0, 0, 1, 1], np.int32), np.zeros(4, np.int32), np.array([10.0, 30, 20, 70]),
    ...                  np.array([30.0, 40, 0, 60])).tolist()
    [30.0, 100.0, 30.0, 100.0]
    """
    n = rank.size
    if n == 0:
        return np.zeros(0)
    group = rank.astype(np.int64) * (int(comm.max()) + 1) + comm
    order = np.lexsort((np.arange(n), group))  # stable: each (rank, communicator)'s collectives in trace order
    sg = group[order]
    start = np.r_[True, sg[1:] != sg[:-1]]
    first = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    k = np.empty(n, np.int64)
    k[order] = np.arange(n) - first
    _, inst = np.unique(comm.astype(np.int64) * (int(k.max()) + 1) + k, return_inverse=True)
    inst = inst.ravel()
    total = (np.bincount(inst, sent) + np.bincount(inst, got)) / 2.0
    return total[inst]


def records_to_ops(rec: TraceRecords, cpu_ratio: float = 1.0) -> OpTable:
    """The operation table of a trace's records (module docstring), for a replay: what
    :func:`records_to_timed_ops` reads but a replay cannot run (a reduce-scatter on a sub-communicator) raises
    :class:`Otf2Unreplayable`.

    Parameters
    ----------
    rec : TraceRecords
    cpu_ratio : float
        Speed of the traced machine's core over the modeled one's: compute durations are multiplied by it.
    """
    ops = _timed_ops(rec, cpu_ratio, equal_counts=True, replay=True)[0]
    _check_replayable(ops)
    # a nonblocking collective's completion replays as its blocking collective (no post: no request serial)
    return ops.replace_columns(tag=np.where(ops.mask(COLLECTIVE_ACTIONS), 0, ops.tag).astype(np.int32))


def _check_replayable(ops: OpTable) -> None:
    """Raise :class:`Otf2Unreplayable` for what :func:`records_to_timed_ops` reads but a replay cannot run: a
    reduce-scatter on a sub-communicator (SimGrid 3.32's replay runs it on MPI_COMM_WORLD only, and waitlab's
    extension does not run it on others)."""
    bad = np.flatnonzero((ops.code == CODE["reducescatter"]) & (ops.comm != 0))
    if bad.size:
        i = int(bad[0])
        members = ops.comms[int(ops.comm[i]) - 1]
        raise Otf2Unreplayable(f"rank {int(ops.rank[i])}", f"MPI_Reduce_scatter on a communicator of {len(members)} "
                               f"of the {ops.n_ranks} ranks cannot be replayed: waitlab's trace replay runs a "
                               "reduce-scatter on MPI_COMM_WORLD only", "analyze the trace as recorded (waitlab "
                               "analyze ARCHIVE), record a run whose reduce-scatters use MPI_COMM_WORLD, or run the "
                               'program itself (application.kind = "program")')


def records_to_timed_ops(rec: TraceRecords, cpu_ratio: float = 1.0, *, equal_counts: bool = False
                         ) -> tuple[OpTable, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The operation table of :func:`records_to_ops` and each operation's recorded enter and exit times (seconds
    since the trace's first timestamp): what the trace measured, for an event table built without a simulation.

    Its v-collectives keep each rank's own recorded bytes sent and received (``gatherv``, ``scatterv``,
    ``allgatherv``, ``alltoallv``: a rank that sent nothing sends nothing), unless ``equal_counts`` (what
    :func:`records_to_ops` passes for a replay): then they become their equal-count forms (module docstring).

    An MPI call's operations span the call (its region's ``Enter`` and ``Leave``); a call holding several
    (``MPI_Sendrecv``: isend, irecv and their waits; an ``MPI_Waitall`` completing requests one by one) has its last
    operation span it and the others take no time at its start, so a rank's operations never overlap.  A compute
    operation spans the time between its two boundaries; a region marker takes no time.  Time inside MPI calls that
    make no operation (``MPI_Init``, ``MPI_Comm_rank``, ...) is in no operation.

    A request an ``MPI_Test*`` call completes is completed by a ``wait`` that carries the call's region (the event
    table's ``call``: ``MPI_Test``): a test never blocks, so, as in Scalasca 2.6, no late sender or late receiver is
    booked in it (:mod:`waitlab.models.analysis.waitstates`).  A cancelled request is left out with its cancellation
    (:func:`~waitlab.models.otf2_records.without_cancelled`: no message).  An MPI record outside every MPI call (no MPI
    region entered around it), which no call times, raises :class:`Otf2Inconsistent`.
    """
    return _timed_ops(rec, cpu_ratio, equal_counts=equal_counts, replay=False)


def _timed_ops(rec: TraceRecords, cpu_ratio: float, *, equal_counts: bool, replay: bool
               ) -> tuple[OpTable, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """:func:`records_to_timed_ops`; with ``replay`` (:func:`records_to_ops`) a completion in an ``MPI_Test*`` call
    carries no call name: the replay runs it as a wait, which blocks."""
    check_supported(rec)
    rec = without_cancelled(rec)
    n = rec.kind.size
    kind = rec.kind
    pos = np.arange(n, dtype=np.int64)
    counts = np.bincount(rec.rank, minlength=rec.n_ranks).astype(np.int64)
    first_of_rank = np.r_[0, np.cumsum(counts)[:-1]]
    is_el = (kind == K["enter"]) | (kind == K["leave"])
    cls = np.full(n, -1, np.int8)
    cls[is_el] = rec.region_class[rec.a[is_el].astype(np.int64)]
    sign = np.where(kind == K["enter"], 1, np.where(kind == K["leave"], -1, 0)).astype(np.int64)
    mpi_like = (cls == MPI) | (cls == INIT) | (cls == FINALIZE)
    depth = per_rank_cumsum(np.where(mpi_like, sign, 0), counts)
    user_depth = per_rank_cumsum(np.where(cls == USER, sign, 0), counts)
    last = np.r_[first_of_rank[1:], n] - 1
    has = last >= first_of_rank
    for arr, what in ((depth, "an MPI call"), (user_depth, "a region")):
        if (arr < 0).any() or (arr[last[has]] != 0).any():
            r = int(rec.rank[np.flatnonzero(arr < 0)[0]]) if (arr < 0).any() else \
                int(np.flatnonzero(has)[np.flatnonzero(arr[last[has]] != 0)[0]])
            raise Otf2Inconsistent(f"rank {r}", f"enters {what} it never leaves (or leaves one it never entered)",
                                   "the archive is truncated or inconsistent: record the run again (let it reach "
                                   "MPI_Finalize)")
    _check_nesting(rec, np.flatnonzero(is_el & (cls != TRANSPARENT)), sign)
    _check_inside_calls(rec, depth)
    # active window: after MPI_Init's leave, before MPI_Finalize's enter
    init_end = np.full(rec.n_ranks, -1, np.int64)
    rows = np.flatnonzero((cls == INIT) & (kind == K["leave"]))
    np.maximum.at(init_end, rec.rank[rows], rows)
    fin_start = np.full(rec.n_ranks, n, np.int64)
    rows = np.flatnonzero((cls == FINALIZE) & (kind == K["enter"]))
    np.minimum.at(fin_start, rec.rank[rows], rows)
    active = (pos >= init_end[rec.rank]) & (pos < fin_start[rec.rank])
    # compute: the time between two boundaries (user or MPI region enter/leave) spent outside MPI
    # (a rank's last record closes its last stretch; without MPI_Init a rank starts at the trace's start)
    is_last = np.zeros(n, bool)
    is_last[last[has]] = True
    bnd = np.flatnonzero((is_el & (cls != TRANSPARENT)) | is_last)
    prev = np.r_[-1, bnd[:-1]]
    same = np.r_[False, rec.rank[bnd[1:]] == rec.rank[bnd[:-1]]]
    outside = same.copy()
    outside[same] = (depth[prev[same]] == 0) & active[prev[same]]
    t_prev = np.zeros(bnd.size, np.int64)
    t_prev[same] = rec.time[prev[same]]
    start = ~same & (init_end[rec.rank[bnd]] < 0)
    outside |= start
    t_prev[start] = rec.time.min() if n else 0
    gap = np.zeros(bnd.size)
    gap[outside] = (rec.time[bnd[outside]] - t_prev[outside]).astype(np.float64) / rec.resolution
    comp = bnd[gap > 0]
    parts: list[dict[str, npt.NDArray[np.generic]]] = [
        _block(comp, 0, CODE["compute"], rec.rank[comp], value=gap[gap > 0] * cpu_ratio,
               t0=t_prev[gap > 0], t1=rec.time[comp])]
    # user region markers
    marks = np.flatnonzero(is_el & (cls == USER))
    mark_code = np.where(kind[marks] == K["enter"], CODE["enter"], CODE["leave"]).astype(np.int8)
    parts.append(_block(marks, 1, mark_code, rec.rank[marks], name=rec.a[marks].astype(np.int32),
                        t0=rec.time[marks], t1=rec.time[marks]))
    coll = np.flatnonzero(kinds_mask(kind, "collective_end", "nonblocking_collective"))
    comms: dict[tuple[int, ...], int] = {}
    code, value, value2, root, comm = _collective_values(rec, coll, comms, equal_counts)
    parts.append(_block(coll, 1, code, rec.rank[coll], value=value, value2=value2, peer=root, comm=comm,
                        tag=_completion_serials(rec, coll, kind, mpi_like, depth)))
    members = list(sorted(comms, key=comms.__getitem__))
    parts += _p2p_blocks(rec, kind, depth, cls, members, name_tests=not replay)
    ops, cols = _assemble(rec, parts, tuple(members))
    t0, t1 = _call_times(rec, kind, mpi_like, depth, cols)
    origin = rec.time.min() if n else 0
    return ops, (t0 - origin) / rec.resolution, (t1 - origin) / rec.resolution


def _check_nesting(rec: TraceRecords, rows: npt.NDArray[np.int64], sign: npt.NDArray[np.int64]) -> None:
    """Raise :class:`Otf2Inconsistent` for the first ``Leave`` (of the enter/leave records ``rows``, balanced per
    rank) that leaves a region other than the innermost open one: regions that cross (enter A, enter B, leave A),
    which OTF2 forbids.  Each leave pairs with the last enter at its depth on its rank (numpy, no stack)."""
    if not rows.size:
        return
    depth = per_rank_cumsum(sign[rows], np.bincount(rec.rank[rows], minlength=rec.n_ranks).astype(np.int64))
    level = np.where(sign[rows] > 0, depth, depth + 1)  # an enter's depth after it, a leave's before it
    order = np.lexsort((rows, level, rec.rank[rows]))  # per (rank, depth): enter, leave, enter, leave, ...
    enter, leave = rows[order[0::2]], rows[order[1::2]]
    names = np.asarray(rec.region_names, dtype=object)
    crossed = np.flatnonzero(names[rec.a[enter].astype(np.int64)] != names[rec.a[leave].astype(np.int64)])
    if not crossed.size:
        return
    k = crossed[np.argmin(leave[crossed])]
    e, lv = int(enter[k]), int(leave[k])
    t0 = int(rec.time.min())
    left, open_ = rec.region_names[int(rec.a[lv])], rec.region_names[int(rec.a[e])]
    raise Otf2Inconsistent(f"rank {int(rec.rank[lv])}", f"regions cross: the Leave of {left} at "
                           f"{(int(rec.time[lv]) - t0) / rec.resolution:.9f} s comes while {open_}, the innermost "
                           f"region open (entered at {(int(rec.time[e]) - t0) / rec.resolution:.9f} s), is not left "
                           "yet: regions must nest", "the archive is inconsistent: record the run again (a tool that "
                           "writes an archive must leave regions in the reverse order of entering them)")


def _check_inside_calls(rec: TraceRecords, depth: npt.NDArray[np.int64]) -> None:
    """Raise :class:`Otf2Inconsistent` for the first MPI record (``MpiSend``, ``MpiCollectiveEnd``, ...) outside
    every MPI call: an operation's times are its call's (its MPI region's ``Enter`` and ``Leave``), and a record no
    call frames has none (it would be an operation of no length, which waits for nothing)."""
    loose = np.flatnonzero(kinds_mask(rec.kind, *MPI_RECORDS) & (depth == 0))
    if not loose.size:
        return
    i = int(loose[np.argmin(rec.time[loose])])
    r = int(rec.rank[i])
    seconds = (int(rec.time[i]) - int(rec.time.min())) / rec.resolution
    # the regions open around it (a user region, or an MPI call's region of another paradigm, says why)
    mine = np.flatnonzero((rec.rank == r) & (np.arange(rec.kind.size) < i) & (rec.kind <= K["leave"]))
    stack: list[int] = []
    for j in mine.tolist():
        if rec.kind[j] == K["enter"]:
            stack.append(int(rec.a[j]))
        elif stack:
            stack.pop()
    where = (f" (inside the region {rec.region_names[stack[-1]]}, which is not an MPI region: an MPI call's region "
             "has the paradigm MPI)" if stack else "")
    name = OTF2_RECORD[RECORD_KINDS[int(rec.kind[i])]]
    more = f", and {loose.size - 1} more MPI records are" if loose.size > 1 else ""
    raise Otf2Inconsistent(f"rank {r}", f"record {name} at {seconds:.9f} s is outside every MPI call{where}{more}: "
                           "waitlab takes an MPI operation's times from its call (the Enter and Leave of its MPI "
                           "region), so it cannot time it",
                           "record the run again with the MPI calls' regions (Score-P's MPI adapter writes an Enter "
                           "and a Leave of paradigm MPI around each call's records)")


def _completion_serials(rec: TraceRecords, coll: npt.NDArray[np.int64], kind: npt.NDArray[np.uint32],
                        mpi_like: npt.NDArray[np.bool_], depth: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The event table's ``tag`` of collective rows ``coll``: a nonblocking collective's completion (its record in
    an ``MPI_Wait*``/``MPI_Test*`` call, not in its own ``MPI_<Collective>``) gets its rank's serial 1, 2, ... (its
    call's entry is not when the rank joined the collective: the timeline check ignores it), others 0."""
    enters = np.flatnonzero((kind == K["enter"]) & mpi_like)
    if not coll.size or not enters.size:
        return np.zeros(coll.size, np.int64)
    at = np.searchsorted(enters, coll, side="right") - 1  # the last MPI call entered before the record
    completing = np.array([nm.startswith(("MPI_Wait", "MPI_Test")) for nm in rec.region_names] + [False])
    inside = (depth[coll] > 0) & (at >= 0)
    nbc = np.zeros(coll.size, bool)
    nbc[inside] = completing[rec.a[enters[at[inside]]].astype(np.int64)]
    # records are sorted by rank: a running count per rank
    serial = per_rank_cumsum(nbc.astype(np.int64), np.bincount(rec.rank[coll], minlength=rec.n_ranks).astype(np.int64))
    return np.where(nbc, serial, 0)


def _call_times(rec: TraceRecords, kind: npt.NDArray[np.uint32], mpi_like: npt.NDArray[np.bool_],
                depth: npt.NDArray[np.int64], cols: dict[str, npt.NDArray[Any]]
                ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Enter and exit ticks of the assembled operations (``cols``, in table order): the compute and marker blocks
    carry theirs; an MPI operation gets its call's ``Enter`` and ``Leave`` (its own record's time outside a call),
    and of several operations of one call only the last spans it (:func:`records_to_timed_ops`)."""
    t0, t1 = cols["t0"].copy(), cols["t1"].copy()
    todo = np.flatnonzero(t0 < 0)
    row = cols["key"][todo] // 4
    is_enter = (kind == K["enter"]) & mpi_like
    call = np.cumsum(is_enter)  # call number of each record: the last MPI call entered at or before it
    enter_of_call = np.zeros(int(call[-1]) + 1 if call.size else 1, np.int64)
    enter_of_call[call[is_enter]] = np.flatnonzero(is_enter)
    leave_of_call = np.zeros_like(enter_of_call)
    leaves = np.flatnonzero((kind == K["leave"]) & mpi_like)
    leave_of_call[call[leaves]] = leaves
    inside = (depth[row] > 0) | ((kind[row] == K["leave"]) & mpi_like[row])
    c = call[row]
    t0[todo] = np.where(inside, rec.time[enter_of_call[c]], rec.time[row])
    t1[todo] = np.where(inside, rec.time[leave_of_call[c]], rec.time[row])
    op_call = np.full(t0.size, -1, np.int64)
    op_call[todo[inside]] = c[inside]
    shared = np.flatnonzero((op_call[:-1] >= 0) & (op_call[:-1] == op_call[1:]))  # not the call's last operation
    t1[shared] = t0[shared]
    return t0, t1


def _block(rows: npt.NDArray[np.int64], sub: int | npt.NDArray[np.int64], code: int | npt.NDArray[np.int8],
           rank: npt.NDArray[np.int32], *, value: npt.ArrayLike = 0.0, value2: npt.ArrayLike = 0.0,
           peer: npt.ArrayLike = -1, tag: npt.ArrayLike = 0, name: npt.ArrayLike = -1, comm: npt.ArrayLike = 0,
           t0: npt.ArrayLike = -1, t1: npt.ArrayLike = -1) -> dict[str, npt.NDArray[np.generic]]:
    """Operations placed at record ``rows`` (``sub`` orders them there: 0 before the record's own, 1 its own);
    ``t0``, ``t1``: their recorded enter and exit ticks (-1: their MPI call's, :func:`_call_times`)."""
    n = rows.size

    def col(x: npt.ArrayLike, dtype: type) -> npt.NDArray[Any]:
        return np.broadcast_to(np.asarray(x, dtype), (n,)).copy()

    return {"key": 4 * rows + col(sub, np.int64), "rank": rank.astype(np.int32), "code": col(code, np.int8),
            "value": col(value, np.float64), "value2": col(value2, np.float64), "peer": col(peer, np.int32),
            "tag": col(tag, np.int32), "name": col(name, np.int32), "comm": col(comm, np.int32),
            "t0": col(t0, np.int64), "t1": col(t1, np.int64)}


def _p2p_comms(rec: TraceRecords, refs: npt.NDArray[np.uint32], own: npt.NDArray[np.int32],
               members: list[tuple[int, ...]]) -> npt.NDArray[np.int32]:
    """Communicator id of point-to-point records on communicators ``refs`` (of ranks ``own``): 0 for MPI_COMM_WORLD
    (the first communicator defined with the world's ranks in order), else ``k`` with ``members[k - 1]`` its members
    (appended when new); MPI_COMM_SELF is each rank's own communicator of one member (``(rank,)``).  A communicator
    shares the id of the collectives on its member list (collectives are keyed by members) unless another
    communicator of those members (MPI_COMM_WORLD, an earlier duplicate) took it: then it gets an id of its own, so
    that MPI matching, per communicator, is kept (a duplicate of MPI_COMM_WORLD is another communicator, and a
    message to self on MPI_COMM_SELF never matches one on MPI_COMM_WORLD)."""
    out = np.zeros(refs.size, np.int32)
    world = tuple(range(rec.n_ranks))
    refs_u = np.unique(refs).tolist()
    world_ref = min((r for r, m in rec.comm_members.items() if m is not None and tuple(m) == world), default=-1)
    claimed = {world}
    index = {key: k + 1 for k, key in reversed(list(enumerate(members)))}  # members -> its first id
    for ref in refs_u:
        m = rec.comm_members.get(int(ref), ())
        if ref == world_ref or (m is not None and not m):  # MPI_COMM_WORLD, or unknown (world_ranks refuses it)
            continue
        on = np.flatnonzero(refs == ref)
        keys = ([(on, tuple(int(x) for x in m))] if m is not None else  # MPI_COMM_SELF: one per rank
                _per_rank(on, own[on]))
        for rows, key in keys:
            if key in claimed or key not in index:
                members.append(key)
                cid = len(members)
                index.setdefault(key, cid)
            else:
                cid = index[key]
            claimed.add(key)
            out[rows] = cid
    return out


def _p2p_blocks(rec: TraceRecords, kind: npt.NDArray[np.uint32], depth: npt.NDArray[np.int64],
                cls: npt.NDArray[np.int8], members: list[tuple[int, ...]], *, name_tests: bool
                ) -> list[dict[str, npt.NDArray[np.generic]]]:
    """Point-to-point operations and their completions (``members``: the communicators' member lists by id, extended
    with those of the point-to-point communicators, :func:`_p2p_comms`).  With ``name_tests`` a completion in an
    ``MPI_Test*`` call carries the call's region (the event table's ``call``: no wait state is booked in a test)."""
    own = rec.rank
    world = np.full(kind.size, -1, np.int32)
    p2p = np.flatnonzero(kinds_mask(kind, "send", "isend", "recv", "irecv"))
    world[p2p] = world_ranks(rec, rec.b[p2p], rec.a[p2p], own[p2p])
    comm = np.zeros(kind.size, np.int32)
    comm[p2p] = _p2p_comms(rec, rec.b[p2p], own[p2p], members)
    tag = rec.c.astype(np.int64).astype(np.int32)
    nbytes = rec.d.astype(np.float64)
    isend, done = np.flatnonzero(kind == K["isend"]), np.flatnonzero(kind == K["isend_complete"])
    send_done = request_pairs(rec, isend, done, rec.e[isend], rec.d[done], "MPI_Isend")
    ireq, irecv = np.flatnonzero(kind == K["irecv_request"]), np.flatnonzero(kind == K["irecv"])
    recv_of = request_pairs(rec, ireq, irecv, rec.d[ireq], rec.e[irecv], "MPI_Irecv")
    # calls (MPI region visits): a call holding several blocking records (MPI_Sendrecv) runs them non-blocking
    call = np.cumsum((kind == K["enter"]) & ((cls == MPI) | (cls == INIT) | (cls == FINALIZE)))
    is_blocking = kinds_mask(kind, "send", "recv")
    blocking = np.flatnonzero(is_blocking & (depth > 0))
    per_call = np.bincount(call[blocking], minlength=int(call[-1]) + 1 if call.size else 1)
    leave_of_call = np.zeros(per_call.size, np.int64)
    leaves = np.flatnonzero((kind == K["leave"]) & ((cls == MPI) | (cls == INIT) | (cls == FINALIZE)))
    leave_of_call[call[leaves]] = leaves
    paired = blocking[per_call[call[blocking]] >= 2]
    is_blocking[paired] = False
    single = np.flatnonzero(is_blocking)
    parts = []
    enter_of_call = np.zeros(per_call.size, np.int64)
    enters = np.flatnonzero((kind == K["enter"]) & (cls == MPI))
    enter_of_call[call[enters]] = enters
    # a send in its own MPI_Ssend / MPI_Issend region is synchronous (Score-P records it as MpiSend / MpiIsend)
    sync = np.array([nm in ("MPI_Ssend", "MPI_Issend") for nm in rec.region_names] + [False])

    def in_sync(rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        return sync[np.where(depth[rows] > 0, rec.a[enter_of_call[call[rows]]].astype(np.int64), -1)]

    is_send = kind[single] == K["send"]
    send_code = np.where(in_sync(single), CODE["ssend"], CODE["send"])
    parts.append(_block(single, 1, np.where(is_send, send_code, CODE["recv"]).astype(np.int8), own[single],
                        value=nbytes[single], peer=world[single], tag=tag[single], comm=comm[single]))
    ps = kind[paired] == K["send"]
    # the parts carry their call's region (MPI_Sendrecv): the event table's `call` names the call the program made
    region_of = rec.a[enter_of_call[call[paired]]].astype(np.int64)
    parts.append(_block(paired, 1, np.where(ps, CODE["isend"], CODE["irecv"]).astype(np.int8), own[paired],
                        value=nbytes[paired], peer=world[paired], tag=tag[paired], name=region_of,
                        comm=comm[paired]))
    at = leave_of_call[call[paired]]
    parts.append(_block(at, 0, CODE["wait"], own[paired], value2=(~ps).astype(np.float64), peer=world[paired],
                        tag=tag[paired], name=region_of, comm=comm[paired]))
    # non-blocking: the isend at its record, the irecv at its request with the completion's partner and size
    parts.append(_block(isend, 1, np.where(in_sync(isend), CODE["issend"], CODE["isend"]).astype(np.int8),
                        own[isend], value=nbytes[isend], peer=world[isend], tag=tag[isend], comm=comm[isend]))
    comp = recv_of[ireq]
    parts.append(_block(ireq, 1, CODE["irecv"], own[ireq], value=nbytes[comp], peer=world[comp], tag=tag[comp],
                        comm=comm[comp]))
    # completions: a wait per request, or one waitall for an MPI_Waitall that leaves nothing outstanding
    req_of = np.full(kind.size, -1, np.int64)
    req_of[send_done[isend]] = isend
    req_of[comp] = comp
    completions = np.sort(np.concatenate((send_done[isend], comp)))
    outstanding = np.zeros(kind.size, np.int64)
    outstanding[isend] += 1
    outstanding[ireq] += 1
    outstanding[completions] -= 1
    left = per_rank_cumsum(outstanding, np.bincount(rec.rank, minlength=rec.n_ranks).astype(np.int64))
    ccall = call[completions]
    waitall_name = np.array([nm == "MPI_Waitall" for nm in rec.region_names] + [False])
    in_waitall = waitall_name[np.where(depth[completions] > 0, rec.a[enter_of_call[ccall]].astype(np.int64), -1)]
    whole = in_waitall & (left[leave_of_call[ccall]] == 0) & (depth[completions] > 0)
    first_in_call = np.r_[True, ccall[1:] != ccall[:-1]]
    wa = completions[whole & first_in_call]
    parts.append(_block(wa, 1, CODE["waitall"], own[wa]))
    single_c = completions[~whole]
    src = req_of[single_c]
    is_recv = kind[single_c] == K["irecv"]
    at_enter = enter_of_call[call[single_c]]
    framed = (depth[single_c] > 0) & (kind[at_enter] == K["enter"]) & (call[at_enter] == call[single_c])
    call_region = np.where(framed, rec.a[at_enter].astype(np.int64), -1)
    test_name = np.array([nm.startswith("MPI_Test") for nm in rec.region_names] + [False])
    in_test = test_name[call_region] & name_tests
    parts.append(_block(single_c, 1, CODE["wait"], own[single_c], value2=is_recv.astype(np.float64),
                        peer=world[src], tag=tag[src], comm=comm[src], name=np.where(in_test, call_region, -1)))
    return parts


def _assemble(rec: TraceRecords, parts: Sequence[dict[str, npt.NDArray[np.generic]]],
              comms: tuple[tuple[int, ...], ...] = ()) -> tuple[OpTable, dict[str, npt.NDArray[Any]]]:
    """The operation table of the blocks ``parts``, and their columns in its order (``key``, ``t0``, ``t1``, ...)."""
    cols = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    order = np.argsort(cols["key"], kind="stable")
    cols = {c: v[order] for c, v in cols.items()}
    rank = cols["rank"].astype(np.int32)
    used = np.unique(cols["name"][cols["name"] >= 0]).tolist()
    labels = list(dict.fromkeys(rec.region_names[i] for i in used))  # two regions of one label: one name
    lut = np.full(len(rec.region_names) + 1, -1, np.int32)
    lut[used] = [labels.index(rec.region_names[i]) for i in used]
    name = np.where(cols["name"] >= 0, lut[cols["name"]], -1).astype(np.int32)
    n = rank.size
    empty = Ledger.empty()
    return OpTable(n_ranks=rec.n_ranks, rank=rank, seq=seq_within_rank(rank, rec.n_ranks),
                   code=cols["code"].astype(np.int8), step=np.full(n, -1, np.int32), name=name,
                   value=cols["value"].astype(np.float64), value2=cols["value2"].astype(np.float64),
                   peer=cols["peer"].astype(np.int32), tag=cols["tag"].astype(np.int32),
                   cause=np.full(n, -1, np.int64), excess=np.zeros(n), names=tuple(labels), ledger=empty,
                   comm=cols["comm"].astype(np.int32), comms=comms), cols
