"""The records of an OTF2 trace as waitlab reads them: record kinds, region classes, the columns the reader hands
over (:class:`TraceRecords`) and the checks on them (what cannot be replayed, requests without their completion,
ranks outside their communicator).

The reader (:mod:`waitlab.simulator.otf2_import`, with ``simulator/native/waitlab_otf2_reader.c``) fills
:class:`TraceRecords`; :mod:`waitlab.models.otf2_ops` turns them into an operation table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

#: Record kinds of :class:`TraceRecords` (the contract with ``simulator/native/waitlab_otf2_reader.c``).
RECORD_KINDS = ("enter", "leave", "send", "isend", "isend_complete", "irecv_request", "recv", "irecv",
                "collective_begin", "collective_end", "request_test", "request_cancelled", "nonblocking_collective")
K = {name: i for i, name in enumerate(RECORD_KINDS)}
#: The OTF2 record type of each kind of :data:`RECORD_KINDS` (enter and leave: also ``CallingContextEnter`` and
#: ``CallingContextLeave``, read as the enter and leave of the calling context's region).
OTF2_RECORD: dict[str, str] = {
    "enter": "Enter", "leave": "Leave", "send": "MpiSend", "isend": "MpiIsend", "isend_complete": "MpiIsendComplete",
    "irecv_request": "MpiIrecvRequest", "recv": "MpiRecv", "irecv": "MpiIrecv",
    "collective_begin": "MpiCollectiveBegin", "collective_end": "MpiCollectiveEnd", "request_test": "MpiRequestTest",
    "request_cancelled": "MpiRequestCancelled", "nonblocking_collective": "NonBlockingCollectiveComplete",
}  # fmt: skip
#: The kinds of MPI records: each belongs to an MPI call (between its MPI region's enter and leave).
MPI_RECORDS = tuple(k for k in RECORD_KINDS if k not in ("enter", "leave"))
#: The kind of a record that cannot be replayed (its type is ``unsupported[a]``).
UNSUPPORTED = 100
#: Region classes (:attr:`TraceRecords.region_class`).
USER, MPI, TRANSPARENT, INIT, FINALIZE = 0, 1, 2, 3, 4
#: OTF2's undefined 32-bit value (no root).
UNDEFINED_UINT32 = 0xFFFFFFFF
#: OTF2 collective operations -> waitlab action (for a replay a v-collective becomes its equal-count form:
#: :data:`EQUAL_COUNTS`; read as recorded it keeps its v-form, :func:`waitlab.models.otf2_ops.records_to_timed_ops`).
COLLECTIVES: dict[str, str] = {
    "BARRIER": "barrier", "BCAST": "bcast", "GATHER": "gather", "GATHERV": "gather", "SCATTER": "scatter",
    "SCATTERV": "scatter", "ALLGATHER": "allgather", "ALLGATHERV": "allgather", "ALLTOALL": "alltoall",
    "ALLTOALLV": "alltoall", "ALLREDUCE": "allreduce", "REDUCE": "reduce", "SCAN": "scan", "EXSCAN": "exscan",
    "REDUCE_SCATTER": "reducescatter", "REDUCE_SCATTER_BLOCK": "reducescatter",
}  # fmt: skip
#: OTF2 collectives whose records hold a rank's total bytes, not its per-peer counts (v-collectives,
#: reduce-scatter): every rank of one instance gets the same count ``c``, from the instance's totals (bytes sent
#: and received summed over its ranks, averaged) = ``N ** p * c`` on ``N`` ranks, with ``p`` given here: 1 for a
#: gatherv/scatterv (``N`` blocks of ``c``; ``c`` per peer) and a reduce-scatter (``c``: the whole reduced vector,
#: which the replay splits evenly), 2 for an alltoallv/allgatherv (``N x N`` blocks of ``c``).
EQUAL_COUNTS: dict[str, int] = {"GATHERV": 1, "SCATTERV": 1, "ALLGATHERV": 2, "ALLTOALLV": 2, "REDUCE_SCATTER": 1,
                                "REDUCE_SCATTER_BLOCK": 1}


class Otf2Unreplayable(Exception):
    """A record waitlab cannot replay: ``what`` it is, ``where`` (rank and time), and the ``fix``."""

    def __init__(self, where: str, what: str, fix: str) -> None:
        super().__init__(where, what, fix)  # all three in ``args``: a pickled error is built again from them
        self.where, self.what, self.fix = where, what, fix

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


class Otf2Inconsistent(Otf2Unreplayable):
    """The archive contradicts itself (truncated, or records without their partner)."""


@dataclass(frozen=True)
class TraceRecords:
    """Every location's records, sorted by rank (each rank's records in their order in the trace).

    Attributes
    ----------
    n_ranks : int
    rank : int32 array
    time : int64 array
        Timer ticks.
    kind : uint32 array
        Index into :data:`RECORD_KINDS`, or :data:`UNSUPPORTED` for a record of type ``unsupported[a]``.
    a, b, c : uint32 arrays
        enter/leave: a = region; p2p: a = partner (rank in the communicator), b = communicator, c = tag;
        collective end: a = OTF2 collective op, b = communicator, c = root.
    d, e : uint64 arrays
        p2p: d = bytes (request id for completions and irecv requests), e = request id (isend, irecv);
        collective end: d = bytes sent, e = bytes received.
    resolution : float
        Timer ticks per second.
    region_names : tuple of str
        Name of each region (by region reference), already made a waitlab region label.
    region_class : int8 array
        :data:`USER`, :data:`MPI`, :data:`TRANSPARENT`, :data:`INIT` or :data:`FINALIZE` per region.
    comm_members : mapping of int to tuple of int or None
        Communicator reference -> its members as world ranks, in communicator-rank order (None: MPI_COMM_SELF).
    collective_names : mapping of int to str
        OTF2 collective operation code -> its name (``ALLREDUCE``).
    unsupported : tuple of str
        Names of the record types counted from :data:`UNSUPPORTED`.
    host_of_rank : tuple of str
        The node each rank ran on (its location group's system tree node: Score-P's host name); empty when the
        archive does not say.
    worker_threads, thread_records : int
        Read as recorded (``read_otf2(..., threads=True)``): the other threads' locations with events, not read, and
        the thread records (OmpFork, ThreadFork, ...) left out of the MPI locations' records; 0 otherwise.
    accelerator_streams : int
        The accelerator-stream (GPU) locations with events, not read (their kernels and copies are not MPI).
    """

    n_ranks: int
    rank: npt.NDArray[np.int32]
    time: npt.NDArray[np.int64]
    kind: npt.NDArray[np.uint32]
    a: npt.NDArray[np.uint32]
    b: npt.NDArray[np.uint32]
    c: npt.NDArray[np.uint32]
    d: npt.NDArray[np.uint64]
    e: npt.NDArray[np.uint64]
    resolution: float
    region_names: tuple[str, ...]
    region_class: npt.NDArray[np.int8]
    comm_members: Mapping[int, tuple[int, ...] | None]
    collective_names: Mapping[int, str]
    unsupported: tuple[str, ...] = ()
    host_of_rank: tuple[str, ...] = ()
    worker_threads: int = 0
    thread_records: int = 0
    accelerator_streams: int = 0


def region_label(name: str, canonical: str = "") -> str:
    """A waitlab region name for an OTF2 region: its name, or its canonical name when the name has blanks
    (``int main(int, char**)`` -> ``main``), else the name with blanks as ``_`` (region names have no spaces).

    >>> region_label("int main(int, char**)", "main"), region_label("solve"), region_label("a b", "")
    ('main', 'solve', 'a_b')
    """
    if name and not any(ch.isspace() for ch in name):
        return name
    if canonical and not any(ch.isspace() for ch in canonical):
        return canonical
    return "_".join(name.split()) or "unnamed"


#: The largest timestamp (ticks) the records hold exactly: the reader's unsigned 64-bit ticks become int64.
MAX_TICKS = 2**63 - 1


def clock_problem(timer_resolution: float) -> str | None:
    """What is wrong with an archive's timer resolution (``ClockProperties``: ticks per second), or None when
    it is usable: every time is ticks divided by it, so 0, a negative or a non-finite value gives infinite or
    meaningless seconds.

    >>> clock_problem(1e9) is None
    True
    >>> clock_problem(0)
    'is 0 ticks per second: every time would be infinite'
    >>> clock_problem(-5)
    'is -5 ticks per second: it must be a finite number > 0'
    """
    try:
        value = float(timer_resolution)
    except (TypeError, ValueError, OverflowError):
        return f"is {timer_resolution!r}, not a number of ticks per second"
    if value == 0:
        return "is 0 ticks per second: every time would be infinite"
    if not (np.isfinite(value) and value > 0):
        return f"is {timer_resolution!r} ticks per second: it must be a finite number > 0"
    return None


def per_rank_cumsum(delta: npt.NDArray[np.int64], counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Running sum of ``delta`` restarting at each rank's first row (``counts``: rows of each rank, in order)."""
    cs = np.cumsum(delta)
    ends = np.cumsum(counts)
    before = np.r_[0, cs[ends[:-1] - 1]] if counts.size else np.zeros(0, np.int64)
    before = np.where(np.r_[0, ends[:-1]] > 0, before, 0)
    return cs - np.repeat(before, counts)


def kinds_mask(kind: npt.NDArray[np.uint32], *names: str) -> npt.NDArray[np.bool_]:
    """Rows whose record kind is one of ``names`` (a lookup table: faster than ``np.isin`` on long columns)."""
    lut = np.zeros(UNSUPPORTED + 256, bool)
    lut[[K[n] for n in names]] = True
    return lut[np.minimum(kind, lut.size - 1)]


def check_supported(rec: TraceRecords) -> None:
    bad = np.flatnonzero(rec.kind >= UNSUPPORTED)
    if bad.size:
        i = int(bad[np.argmin(rec.time[bad])])
        name = rec.unsupported[int(rec.a[i])]  # the reader's index of the record type (native/waitlab_otf2_reader.c)
        what = ("threads (OpenMP or Pthreads)" if name.startswith(("Thread", "Omp")) else
                "one-sided MPI (RMA)" if name.startswith("Rma") else "MPI I/O or POSIX I/O")
        raise Otf2Unreplayable(f"rank {int(rec.rank[i])}", f"record {name} ({what}) cannot be replayed: SimGrid "
                               "3.32's trace replay has no such action", "record the run again without it (Score-P: "
                               "SCOREP_MPI_ENABLE_GROUPS without rma/io, no OpenMP), or run the program itself "
                               '(application.kind = "program")')


def without_cancelled(rec: TraceRecords) -> TraceRecords:
    """``rec`` without its cancelled requests: each ``MpiRequestCancelled`` (Score-P records it where the call that
    completes a request, ``MPI_Wait*``/``MPI_Test*``, finds it cancelled) and the request it cancelled (the latest
    ``MpiIrecvRequest`` or ``MpiIsend`` of that request id on its rank before it) are left out: a cancelled request
    moved no message (a cancel that fails completes the request as usual, with its ``MpiIrecv`` or
    ``MpiIsendComplete``).  The calls keep their time (``MPI_Cancel``, the completing ``MPI_Wait``), as every call
    that makes no operation does.  Raises :class:`Otf2Inconsistent` for a cancellation of no request."""
    cancelled = np.flatnonzero(rec.kind == K["request_cancelled"])
    if not cancelled.size:
        return rec
    requests = np.flatnonzero(kinds_mask(rec.kind, "isend", "irecv_request"))
    rows = np.concatenate((requests, cancelled))
    req = np.concatenate((np.where(rec.kind[requests] == K["isend"], rec.e[requests], rec.d[requests]),
                          rec.d[cancelled]))
    is_cancel = np.r_[np.zeros(requests.size, bool), np.ones(cancelled.size, bool)]
    order = np.lexsort((rows, req, rec.rank[rows]))  # each (rank, request id)'s records in trace order
    rows, req, is_cancel = rows[order], req[order], is_cancel[order]
    at = np.flatnonzero(is_cancel)
    prev = at - 1  # the record before each cancellation: the request it cancels, if of its rank and request id
    ok = prev >= 0
    p, c = prev[ok], at[ok]
    ok[ok] = ~is_cancel[p] & (req[p] == req[c]) & (rec.rank[rows[p]] == rec.rank[rows[c]])
    if not ok.all():
        j = int(rows[at[np.flatnonzero(~ok)[0]]])
        raise Otf2Inconsistent(f"rank {int(rec.rank[j])}", f"record MpiRequestCancelled cancels request "
                               f"{int(rec.d[j])}, which no MpiIrecvRequest or MpiIsend before it posted",
                               "the archive is truncated or inconsistent: record the run again (let it reach "
                               "MPI_Finalize)")
    keep = np.ones(rec.kind.size, bool)
    keep[rows[at]] = False
    keep[rows[prev]] = False
    return replace(rec, rank=rec.rank[keep], time=rec.time[keep], kind=rec.kind[keep], a=rec.a[keep],
                   b=rec.b[keep], c=rec.c[keep], d=rec.d[keep], e=rec.e[keep])


def request_pairs(rec: TraceRecords, first: npt.NDArray[np.int64], second: npt.NDArray[np.int64],
           req_first: npt.NDArray[np.uint64], req_second: npt.NDArray[np.uint64], what: str
           ) -> npt.NDArray[np.int64]:
    """Row of the ``second`` record (completion) of each ``first`` record (request), matched by (rank, request
    id) in trace order; raises :class:`Otf2Inconsistent` on a request without completion or the reverse."""
    idx = np.concatenate((first, second))
    req = np.concatenate((req_first, req_second))
    is_second = np.concatenate((np.zeros(first.size, bool), np.ones(second.size, bool)))
    order = np.lexsort((idx, req, rec.rank[idx]))
    idx, req, is_second = idx[order], req[order], is_second[order]
    ok = idx.size % 2 == 0
    if ok and idx.size:
        ok = bool((~is_second[0::2]).all() & is_second[1::2].all() & (req[0::2] == req[1::2]).all()
                  & (rec.rank[idx[0::2]] == rec.rank[idx[1::2]]).all())
    if not ok:
        bad = next(i for i in range(idx.size) if i % 2 != int(is_second[i]) or
                   (i % 2 == 1 and (req[i] != req[i - 1] or rec.rank[idx[i]] != rec.rank[idx[i - 1]])) or
                   (i % 2 == 0 and i + 1 == idx.size))
        j = int(idx[bad])
        raise Otf2Inconsistent(f"rank {int(rec.rank[j])}", f"{what} request {int(req[bad])} has no "
                               f"{'request' if is_second[bad] else 'completion'} record", "the archive is truncated "
                               "or inconsistent: record the run again (let it reach MPI_Finalize)")
    out = np.full(rec.kind.size, -1, np.int64)
    out[idx[0::2]] = idx[1::2]
    return out


def world_ranks(rec: TraceRecords, comm: npt.NDArray[np.uint32], local: npt.NDArray[np.uint32],
           own: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
    """World ranks of ranks ``local`` within communicators ``comm`` (MPI_COMM_SELF: the own rank)."""
    out = np.full(comm.size, -1, np.int32)
    for ref in np.unique(comm).tolist():
        rows = np.flatnonzero(comm == ref)
        members = rec.comm_members.get(int(ref), ())
        if members is None:
            out[rows] = own[rows]
            continue
        lut = np.asarray(members, np.int32)
        bad = local[rows] >= lut.size
        if bad.any():
            j = int(rows[np.flatnonzero(bad)[0]])
            raise Otf2Inconsistent(f"rank {int(own[j])}", f"rank {int(local[j])} is outside communicator {ref} "
                                   f"({lut.size} members) or the communicator is not defined",
                                   "the archive's definitions are incomplete: record the run again")
        out[rows] = lut[local[rows].astype(np.int64)]
    return out
