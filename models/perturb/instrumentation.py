"""Instrumentation model: which events a tracer records, how big each record is, what it costs.

A tracer hooks into events (MPI calls, region enter/leave) and writes one
*record* per event into its in-memory trace buffer.  The record costs the rank
``fixed_cost + bytes * copy_cost`` seconds of CPU (Okita et al.: a ``memcpy`` into
the buffer), injected as an ``overhead`` operation next to the event:

* MPI calls: after the call (``where = "after"``, Okita et al. records right after
  ``MPI_Recv``), before it, or both (an enter and an exit record);
* regions: after the ``enter`` marker and before the ``leave`` marker (inside
  the region, as Score-P's enter/exit hooks run).

A record is ``record_bytes`` of header plus ``payload`` times the bytes the
MPI call moves (Okita et al. copies the message contents: ``payload = 1``).

Positions are integer *insertion keys* (:func:`waitlab.models.perturb.insertion.key`):
``8 * before_seq + 2 * sub`` where ``before_seq`` is the operation the new
rows go in front of and ``sub`` orders the rows inserted at one place:
:data:`SUB_JITTER` (noise of the preceding compute), :data:`SUB_AFTER`
(records of the preceding event, with their swap cost), :data:`SUB_FLUSH`
(synchronised spilling), :data:`SUB_BEFORE` (records of the next event).  An
individual flush goes just before the record that does not fit (its key
minus 1).

Examples
--------
>>> from waitlab.models.ops import OpBuilder
>>> b = OpBuilder(2)
>>> b.add("compute", [0, 1], value=1.0, region="w")
>>> b.add("send", 0, peer=1, value=1000)
>>> b.add("recv", 1, peer=0, value=1000)
>>> ops = b.build()
>>> inst = Instrumentation(events="mpi", only=("recv",), record_bytes=16, payload=1.0,
...                        fixed_cost=1e-6, copy_cost=1e-9)
>>> rec = select_records(ops, inst)
>>> rec.rank.tolist(), rec.row.tolist(), rec.bytes.tolist(), rec.pos.tolist()
([1], [3], [1016.0], [18])
>>> [round(c, 12) for c in inst.cost(rec.bytes).tolist()]
[2.016e-06]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from waitlab.errors import Picklable
from waitlab.models.ops import OpTable
from waitlab.models.perturb.insertion import key
from waitlab.models.vocabulary import BYTES_ACTIONS, CODE, COLLECTIVE_ACTIONS, MPI_ACTIONS, codes_of

#: What a tracer can record.
EVENT_SETS = ("none", "mpi", "regions", "all")
#: Where the record of an MPI call is written.
PLACEMENTS = ("after", "before", "both")

SUB_JITTER, SUB_AFTER, SUB_FLUSH, SUB_BEFORE = 0, 1, 2, 3

#: MPI actions whose ``value`` is bytes moved (the payload a tracer may copy).
_BYTES_ACTIONS = BYTES_ACTIONS

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Instrumentation:
    """What is recorded and what one record costs.

    Parameters
    ----------
    events : {"none", "mpi", "regions", "all"}
        Record MPI calls, region enter/leave, or both.
    only : tuple of str
        If not empty, record only these MPI actions (e.g. ``("recv",)``) and
        regions of these names.
    record_bytes : int
        Bytes of every record (timestamp, ids, ...).
    payload : float
        Fraction of the bytes an MPI call moves that is copied into its record.
    fixed_cost : float
        Seconds per record (reading the clock, bookkeeping).
    copy_cost : float
        Seconds per byte copied into the buffer.
    where : {"after", "before", "both"}
        Position of MPI-call records.
    """

    events: str = "mpi"
    only: tuple[str, ...] = ()
    record_bytes: int = 64
    payload: float = 0.0
    fixed_cost: float = 0.0
    copy_cost: float = 0.0
    where: str = "after"

    def __post_init__(self) -> None:
        if self.events not in EVENT_SETS:
            raise ValueError(f"events must be one of {', '.join(EVENT_SETS)}, got {self.events!r}")
        if self.where not in PLACEMENTS:
            raise ValueError(f"where must be one of {', '.join(PLACEMENTS)}, got {self.where!r}")
        for name in ("record_bytes", "payload", "fixed_cost", "copy_cost"):
            v = getattr(self, name)
            if not (v >= 0 and np.isfinite(v)):
                raise ValueError(f"{name} must be finite and >= 0, got {v!r}")

    @property
    def active(self) -> bool:
        """Whether anything is recorded."""
        return self.events != "none"

    def cost(self, nbytes: _F) -> _F:
        """CPU seconds of writing records of ``nbytes`` bytes into memory."""
        return self.fixed_cost + np.asarray(nbytes, np.float64) * self.copy_cost


@dataclass(frozen=True)
class Records:
    """The records a tracer writes, sorted by ``(rank, pos)``.

    Attributes
    ----------
    rank : int64 array
    row : int64 array
        Row of the recorded operation in the operation table.
    pos : int64 array
        Insertion key ``8 * before_seq + 2 * sub`` (see module docs).
    bytes : float64 array
        Record size.
    """

    rank: _I
    row: _I
    pos: _I
    bytes: _F

    def __len__(self) -> int:
        return int(self.rank.size)


def _action_codes(names: frozenset[str] | set[str] | tuple[str, ...]) -> npt.NDArray[np.int8]:
    return codes_of(names)


class OnlySelectsNothing(Picklable, ValueError):
    """``only`` names something the ``events`` setting never records; ``fix`` says what to change."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}; {fix}")
        self.problem, self.fix = problem, fix


def select_records(ops: OpTable, inst: Instrumentation) -> Records:
    """Every record ``inst`` writes for ``ops`` (vectorised).

    Raises
    ------
    ValueError
        If ``only`` names an action that is not an MPI action; :class:`OnlySelectsNothing` if it names something
        that would select nothing (a name the ``events`` setting never records, an MPI action the application never
        calls).
    """
    empty = Records(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    if not inst.active or len(ops) == 0:
        return empty
    only = set(inst.only)
    rows: list[_I] = []
    pos: list[_I] = []
    nbytes: list[_F] = []
    seq = ops.seq.astype(np.int64)
    unknown = {n for n in only if n not in MPI_ACTIONS and n not in ops.names}
    if unknown:
        raise ValueError(f"instrumentation.only names neither MPI actions nor regions of the application: "
                         f"{', '.join(sorted(unknown))}")
    # a name the events setting never records selects nothing (as an empty only would select everything)
    never = {n for n in only if n not in MPI_ACTIONS} if inst.events == "mpi" else \
        {n for n in only if n not in ops.names} if inst.events == "regions" else set()
    if never:
        what = "MPI calls" if inst.events == "mpi" else "region enter and leave"
        names_ = ", ".join(sorted(never))
        other, kind = ('"regions"', "MPI actions such as recv") if inst.events == "mpi" else ('"mpi"', "regions")
        raise OnlySelectsNothing(f"{names_}: events = {inst.events!r} records only {what}, so this selects nothing",
                                 f'set events = "all" (or {other}) to record {names_}, or name only {kind} in only')
    # an MPI action the application never calls (and no region of that name) selects nothing too
    used = np.unique(ops.code)
    unused = sorted(n for n in only if n in MPI_ACTIONS and n not in ops.names
                    and not np.isin(_action_codes((n,)), used).any())
    if unused:
        called = sorted(n for n in MPI_ACTIONS if np.isin(_action_codes((n,)), used).any())
        names_ = ", ".join(unused)
        raise OnlySelectsNothing(f"{names_}: the application never calls {'it' if len(unused) == 1 else 'them'}, "
                                 "so this selects nothing", "name MPI actions it calls ("
                                 + (", ".join(called) if called else "none") + ") or its regions, or leave "
                                 f"{names_} out")
    if inst.events in ("mpi", "all"):
        names = (only & set(MPI_ACTIONS)) if only else set(MPI_ACTIONS)
        r = np.flatnonzero(np.isin(ops.code, _action_codes(names)))
        moved = np.where(np.isin(ops.code[r], _action_codes(_BYTES_ACTIONS)), ops.value[r], 0.0)
        size = inst.record_bytes + inst.payload * moved
        if inst.where in ("after", "both"):
            rows.append(r)
            pos.append(key(seq[r] + 1, 2 * SUB_AFTER))
            nbytes.append(size)
        if inst.where in ("before", "both"):
            rows.append(r)
            pos.append(key(seq[r], 2 * SUB_BEFORE))
            nbytes.append(np.full(r.size, float(inst.record_bytes)) if inst.where == "both" else size)
    if inst.events in ("regions", "all"):
        is_marker = np.isin(ops.code, [CODE["enter"], CODE["leave"]])
        if only and (only & set(ops.names)):
            wanted = np.array([i for i, n in enumerate(ops.names) if n in only], np.int32)
            is_marker &= np.isin(ops.name, wanted)
        elif only:
            is_marker &= False
        r = np.flatnonzero(is_marker)
        enter = ops.code[r] == CODE["enter"]
        rows.append(r)
        pos.append(np.where(enter, key(seq[r] + 1, 2 * SUB_AFTER), key(seq[r], 2 * SUB_BEFORE)))
        nbytes.append(np.full(r.size, float(inst.record_bytes)))
    if not rows:
        return empty
    row = np.concatenate(rows).astype(np.int64)
    p = np.concatenate(pos).astype(np.int64)
    b = np.concatenate(nbytes).astype(np.float64)
    rank = ops.rank[row].astype(np.int64)
    order = np.lexsort((row, p, rank))
    return Records(rank[order], row[order], p[order], b[order])


def collective_points(ops: OpTable) -> tuple[_I, _I, _I]:
    """Synchronisation points after collectives: ``(rank, instance, pos)`` sorted by (instance, rank).

    ``pos`` is the insertion key just after the collective and its records
    (sub-position :data:`SUB_FLUSH`).  Every rank must call the same number of collectives.
    """
    rows = np.flatnonzero(np.isin(ops.code, _action_codes(COLLECTIVE_ACTIONS)))
    rank = ops.rank[rows].astype(np.int64)
    counts = np.bincount(rank, minlength=ops.n_ranks)
    if rows.size and not np.all(counts == counts[0]):
        raise ValueError(f"rank {int(np.argmin(counts))} calls {int(counts.min())} collectives but another calls "
                         f"{int(counts.max())}")
    inst = np.arange(rows.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    pos = key(ops.seq[rows].astype(np.int64) + 1, 2 * SUB_FLUSH)
    order = np.lexsort((rank, inst))
    return rank[order], inst[order], pos[order]


def step_points(ops: OpTable) -> tuple[_I, _I, _I]:
    """Synchronisation-free points at the end of every step: ``(rank, step, pos)`` sorted by (step, rank).

    ``pos`` is just after the last operation of the step on that rank.  Steps
    are the ``step`` column (>= 0); a rank without operations in a step gets
    no point for it.
    """
    ok = np.flatnonzero(ops.step >= 0)
    if ok.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    rank = ops.rank[ok].astype(np.int64)
    step = ops.step[ok].astype(np.int64)
    # last row of each (rank, step) group: rows are in (rank, seq) order
    order = np.lexsort((ok, step, rank))
    r, s, rw = rank[order], step[order], ok[order]
    last = np.ones(r.size, bool)
    last[:-1] = (r[1:] != r[:-1]) | (s[1:] != s[:-1])
    r, s, rw = r[last], s[last], rw[last]
    pos = key(ops.seq[rw].astype(np.int64) + 1, 2 * SUB_FLUSH)
    o = np.lexsort((r, s))
    return r[o], s[o], pos[o]
