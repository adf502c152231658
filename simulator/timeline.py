"""Turn the replay extension's binary log into the event table (docs/event_table.md).

The log holds one 24-byte record per replayed action: ``(rank, action code,
enter, exit)``.  Because waitlab wrote the trace itself, the n-th record of a
rank belongs to the n-th operation of that rank in the :class:`OpTable`; the
action codes are checked to prove it.  All work is vectorised with numpy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from waitlab.errors import SimulationError
from waitlab.models.analysis.rma_epochs import annotate_rma
from waitlab.models.byte_accounting import bytes_moved
from waitlab.models.columns import Coded, table
from waitlab.models.ops import CAUSE_KINDS, OpTable, comm_members, local_ranks, ref_dtype
from waitlab.models.vocabulary import (
    ACTIONS,
    CODE,
    COLLECTIVE_ACTIONS,
    REGION_MARKERS,
    VOCABULARY,
    lut,
)
from waitlab.simulator.log_reader import LOG_CHUNK_RECORDS, stream_times
from waitlab.simulator.log_reader import LOG_DTYPE as LOG_DTYPE  # the log's record type, re-exported
from waitlab.simulator.matching import group_cumcount
from waitlab.simulator.native_events import event_columns as _native_columns
from waitlab.simulator.native_matching import Links
from waitlab.simulator.native_matching import links as _links
from waitlab.simulator.native_tables import Regions
from waitlab.simulator.native_tables import regions as _regions

SCHEMA_VERSION = 1

#: Event-table columns holding row numbers (or ids below the row count).  In memory they are int32 for tables
#: under 2**31 rows (16 B per event less, issue 15); the files keep int64 (:func:`~waitlab.simulator.export.
#: write_table`'s ``int64``), so results folders do not depend on it.
ROW_REFERENCES: tuple[str, ...] = ("match", "done", "parent", "cause")

#: Event kinds (the ``kind`` column's categories, in this order): regions, each local action, MPI, other.
KINDS: tuple[str, ...] = ("region", "compute", "mpi", "overhead", "noise", "delay", "flush", "swap", "sleep",
                          "other")
_KIND_OF_CODE = np.array([KINDS.index(a.event_kind) for a in VOCABULARY], np.int8)

#: The ``op`` column's categories: every TI action, then "region".
OPS: tuple[str, ...] = (*ACTIONS, "region")
REGION_OP = len(ACTIONS)

_HAS_PEER = lut(a.name for a in VOCABULARY if a.peer_role is not None)
_IS_COLLECTIVE = lut(COLLECTIVE_ACTIONS)
_IS_MARKER = lut(REGION_MARKERS)


def read_log(path: Path, ops: OpTable, chunk_records: int = LOG_CHUNK_RECORDS
             ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Enter and exit times of every operation of ``ops`` (in its row order).

    Operations whose action is a region marker (``enter``/``leave``) may be absent from the log: they
    take no simulated time and a rank's actions run back to back, so a marker's time is exactly the
    exit time of the rank's previous action (or of its ``init``).  :func:`waitlab.simulator.replay.replay_ops`
    keeps markers out of the SMPI trace for speed and this function fills their times in.

    A log written rank after rank (the replay extension's) is read ``chunk_records`` records at a time
    (:mod:`waitlab.simulator.log_reader`); any other is read whole.

    Raises :class:`SimulationError` when the log does not cover every operation
    (a replay that stopped early) or its actions do not match the trace.
    """
    if not path.exists():
        raise SimulationError(f"the replay wrote no event log ({path}); the simulation did not start")
    marker = (ops.code == CODE["enter"]) | (ops.code == CODE["leave"])
    if marker.any():  # the usual case: markers left out of the trace
        got = stream_times(path, ops.code, ops.rank, ops.n_ranks, ~marker, chunk_records)
        if got is not None:
            return got
    got = stream_times(path, ops.code, ops.rank, ops.n_ranks, None, chunk_records)
    if got is not None:
        return got
    log = np.fromfile(path, dtype=LOG_DTYPE)  # another order (or a problem to name): read it whole
    if marker.any() and log.size and not _IS_MARKER[log["code"]].any():
        keep = np.flatnonzero(~marker)
        return _fill_markers(_read_aligned(log, ops.code[keep], ops.rank[keep], ops.seq[keep], ops.n_ranks),
                             keep, ops, marker)
    te, tx, _ = _read_aligned(log, ops.code, ops.rank, ops.seq, ops.n_ranks)
    return te, tx


def _fill_markers(kept: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]],
                  keep: npt.NDArray[np.int64], ops: OpTable, marker: npt.NDArray[np.bool_]
                  ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Times of all operations from those of the non-marker ones (``keep``) and each rank's start."""
    te_k, tx_k, start = kept
    n = len(ops)
    t_enter = np.empty(n)
    t_exit = np.empty(n)
    t_enter[keep], t_exit[keep] = te_k, tx_k
    del kept, te_k, tx_k
    last = np.arange(n)
    last[marker] = -1
    np.maximum.accumulate(last, out=last)  # last real action at or before each row
    counts = ops.per_rank_counts()
    m = np.flatnonzero(marker)
    last = last[m]
    first_row = np.concatenate(([0], np.cumsum(counts)[:-1]))[ops.rank[m]]  # rows are in (rank, seq) order
    t = np.where(last >= first_row, t_exit[np.maximum(last, 0)], start[ops.rank[m]])
    t_enter[m] = t_exit[m] = t
    return t_enter, t_exit


def _read_aligned(log: npt.NDArray[Any], code: npt.NDArray[np.int8], rank: npt.NDArray[np.int32],
                  seq: npt.NDArray[np.int32], n_ranks: int
                  ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Times of the operations (``code``, ``rank``, ``seq`` in (rank, seq) order) from a log holding exactly
    their actions, and each rank's start (init exit) time."""
    ranks = log["rank"]
    if ranks.size < 2 or bool(np.all(ranks[1:] >= ranks[:-1])):
        order = np.arange(ranks.size)  # the replay extension writes rank after rank: nothing to sort
        log_rank, log_code = ranks, log["code"]
    else:  # interleaved logs (other writers): numpy's stable sort is a radix sort for 16-bit integers
        order = np.argsort(ranks.astype(np.int16) if n_ranks <= np.iinfo(np.int16).max else ranks, kind="stable")
        log_rank, log_code = ranks[order], log["code"][order]
    per_rank = np.bincount(log_rank, minlength=n_ranks) if log.size else np.zeros(n_ranks, np.int64)
    expected = np.bincount(rank, minlength=n_ranks) + 2  # init and finalize frame every rank
    if per_rank.size != n_ranks or not np.array_equal(per_rank, expected):
        bad = int(np.flatnonzero(per_rank[:n_ranks] != expected)[0]) if per_rank.size >= n_ranks else 0
        raise SimulationError(
            f"the replay log is incomplete: rank {bad} logged {int(per_rank[bad]) if bad < per_rank.size else 0} "
            f"of {int(expected[bad])} actions (the simulation stopped early or the log file was truncated)")
    starts = np.concatenate(([0], np.cumsum(expected)[:-1]))
    ends = starts + expected - 1
    if not (np.all(log_code[starts] == CODE["init"]) and np.all(log_code[ends] == CODE["finalize"])):
        raise SimulationError("the replay log is not framed by init/finalize; was it written by this trace?")
    keep = np.ones(log.size, bool)
    keep[starts] = False
    keep[ends] = False
    body = order[keep]
    body_code = log_code[keep]
    if not np.array_equal(body_code, code.astype(np.int32)):
        i = int(np.flatnonzero(body_code != code)[0])
        raise SimulationError(f"replay log and trace disagree at rank {rank[i]} operation {seq[i]}: "
                              f"logged {ACTIONS[body_code[i]]}, trace has {ACTIONS[code[i]]}")
    start = log["t_exit"][order[starts]].astype(np.float64)
    times = log[body]  # one gather of whole 24-byte records, then contiguous field copies
    return times["t_enter"].astype(np.float64), times["t_exit"].astype(np.float64), start


def collective_instances(ops: OpTable) -> npt.NDArray[np.int64]:
    """Instance number of each collective operation, else -1.

    The k-th collective of every member of a communicator is one instance (MPI's rule: the members of a
    communicator call its collectives in the same order).  Instances of MPI_COMM_WORLD are numbered 0, 1, ...
    (the k-th collective of every rank); those of other communicators follow, communicator after communicator.
    """
    is_coll = _IS_COLLECTIVE[ops.code]
    inst = np.full(len(ops), -1, np.int64)
    idx = np.flatnonzero(is_coll)
    if idx.size == 0:
        return inst
    members = comm_members(ops)
    comm = ops.comm[idx].astype(np.int64)
    if comm.max() >= len(members) or comm.min() < 0:
        raise SimulationError(f"a collective names communicator {int(comm.max())}, but the operations know "
                              f"{len(members) - 1} besides MPI_COMM_WORLD")
    rank = ops.rank[idx].astype(np.int64)
    counts = np.bincount(comm * ops.n_ranks + rank, minlength=len(members) * ops.n_ranks).reshape(len(members), -1)
    per_comm = np.zeros(len(members), np.int64)
    for c, m in enumerate(members):
        got = counts[c]
        if not np.all(got[m] == got[m[0]]) or got.sum() != got[m[0]] * m.size:
            where = "MPI_COMM_WORLD" if c == 0 else f"the communicator of world ranks {m.tolist()[:16]}"
            if np.any(got[m] != got[m[0]]):
                r = int(m[np.argmin(got[m])])
                raise SimulationError(f"rank {r} calls {got[r]} collectives on {where} but rank {int(m[0])} calls "
                                      f"{got[m[0]]}: every member must call the same collectives")
            outside = np.setdiff1d(np.flatnonzero(got), m)
            if outside.size:
                r = int(outside[0])
                raise SimulationError(f"rank {r} calls {got[r]} collectives on {where}, of which it is not a member: "
                                      "only a communicator's members call its collectives")
            twice = np.flatnonzero(np.bincount(m, minlength=ops.n_ranks) > 1)
            raise SimulationError(f"{where} lists rank {int(twice[0])} twice: a communicator's members are distinct "
                                  "ranks")
        per_comm[c] = got[m[0]]
    k = group_cumcount([comm, rank], ops.seq[idx])
    offset = np.concatenate(([0], np.cumsum(per_comm)[:-1]))
    inst_id = offset[comm] + k
    # every member of an instance calls the same collective
    order = np.argsort(inst_id, kind="stable")
    sid, scode = inst_id[order], ops.code[idx][order]
    first = np.r_[True, sid[1:] != sid[:-1]]
    lead = np.maximum.accumulate(np.where(first, np.arange(sid.size), 0))
    bad = np.flatnonzero(scode != scode[lead])
    if bad.size:
        b, a = idx[order[bad[0]]], idx[order[lead[bad[0]]]]
        raise SimulationError(f"collective #{int(k[order[bad[0]]])}: rank {ops.rank[b]} calls {ACTIONS[ops.code[b]]} "
                              f"but rank {ops.rank[a]} calls {ACTIONS[ops.code[a]]}")
    inst[idx] = inst_id
    return inst


def build_events(ops: OpTable, t_enter: npt.NDArray[np.float64], t_exit: npt.NDArray[np.float64]) -> pa.Table:
    """The event table of docs/event_table.md from operations and their simulated times, as an Arrow table
    (categorical columns as dictionaries; :func:`waitlab.models.columns.frame` gives the pandas one).

    Two C passes over the operations: links (:func:`waitlab.simulator.native_matching.links`), then the region
    structure and every column of the table (:func:`waitlab.simulator.native_events.event_columns`);
    :func:`event_columns_numpy` (with :func:`waitlab.simulator.native_tables.regions`) is the reference they are
    tested against, and runs for a table the C pass does not take.
    """
    # one C pass: match_messages, completions and collective_instances (the numpy versions, tests compare them)
    try:
        links = _links(ops, collective_instances)
    except SimulationError:
        _regions(ops)  # a malformed region structure is named first
        raise
    # one C pass: the region structure and every column (its working memory: the links' arrays)
    got = _native_columns(ops, t_enter, t_exit, links, _KIND_OF_CODE, _HAS_PEER, KINDS.index("region"), REGION_OP)
    del links
    if got is not None:
        cols, path_names = got
    else:  # the numpy columns (the links again: the C pass may have used their arrays)
        reg = _regions(ops)
        cols = event_columns_numpy(ops, t_enter, t_exit, reg, _links(ops, collective_instances))
        path_names = reg.path_names
        del reg
    flush_rows = flush_overhead_rows(ops)
    if flush_rows.size:
        cols["kind"] = cols["kind"].copy()
        cols["kind"][flush_rows] = KINDS.index("flush")
    return event_frame(cols, ops.names, path_names, call_column(ops))


def flush_overhead_rows(ops: OpTable) -> npt.NDArray[np.int64]:
    """Event-table rows of the ``overhead`` operations that the ledger books as a flush's (the page-cache write-back
    a tracer's flush costs after it, ``[tracing] writeback_cost``): their ``kind`` is ``flush``, the ledger's, so
    every reader of the event table (condition C's spilling-only check, ``trace.json``, the time budget) counts them
    with the flush they belong to.  Other ``overhead`` rows keep kind ``overhead``.

    >>> from waitlab.models.ops import OpBuilder
    >>> from waitlab.models.perturb.insertion import Insertions, apply_insertions, concat, key
    >>> b = OpBuilder(1)
    >>> b.add("compute", 0, value=1.0)
    >>> b.add("barrier", 0)
    >>> record = Insertions.make(rank=[0], key=[key(1, 0)], action="overhead", value=[0.5], kind="overhead",
    ...                          ref_row=[0])
    >>> write_back = Insertions.make(rank=[0], key=[key(1, 1)], action="overhead", value=[0.1], kind="flush",
    ...                              ref_row=[0])
    >>> new, _ = apply_insertions(b.build(), concat([record, write_back]))
    >>> flush_overhead_rows(new).tolist()  # compute, the record, the write-back, barrier
    [2]
    """
    flush = CAUSE_KINDS.index("flush")
    led = ops.ledger
    if not len(led) or not bool((led.kind == flush).any()):
        return np.zeros(0, np.int64)
    cause = ops.cause
    booked = np.zeros(len(ops), bool)
    has = cause >= 0
    booked[has] = led.kind[cause[has]] == flush
    booked &= ops.code == CODE["overhead"]
    if not booked.any():
        return np.zeros(0, np.int64)
    src = ops.code != CODE["leave"]  # the event rows' operations, in their order
    return np.flatnonzero(booked[src]).astype(np.int64)


def call_column(ops: OpTable) -> Coded | None:
    """The ``call`` column of the event table: the MPI call the program made (``MPI_Sendrecv``) on the rows of an
    MPI operation that carry a name (waitlab runs such a call as several operations: isend, irecv, waitall), ``""``
    on every other row; None (no column) when no operation carries one, so other tables keep their bytes."""
    if not any(n.startswith("MPI_") for n in ops.names):  # a call's name always is MPI's: no pass over the rows
        return None
    named = (ops.name >= 0) & (_KIND_OF_CODE[ops.code] == KINDS.index("mpi"))
    if not named.any():
        return None
    src_rows = np.flatnonzero(ops.code != CODE["leave"])  # the event rows' operations, in their order
    name = np.where(named[src_rows], ops.name[src_rows], -1)
    used = np.unique(name[name >= 0])
    lut_ = np.full(len(ops.names) + 1, len(used), np.int64)  # last entry (-1): ""
    lut_[used] = np.arange(used.size)
    return Coded(lut_[name], [*(ops.names[i] for i in used.tolist()), ""])


def event_frame(cols: dict[str, npt.NDArray[Any]], names: tuple[str, ...], path_names: list[str],
                call: Coded | None = None) -> pa.Table:
    """The event table from its columns (``kind``, ``op``, ``region`` and ``path`` as category codes; ``region``
    code ``len(names)`` is the empty region; ``call``: the ``call`` column, when any row has one), RMA rows
    annotated."""
    out: dict[str, Any] = dict(cols)
    out["kind"] = Coded(cols["kind"], KINDS)
    out["op"] = Coded(cols["op"], OPS)
    out["region"] = Coded(cols["region"], [*names, ""])
    out["path"] = Coded(cols["path"], path_names)
    if call is not None:
        out["call"] = call
    cols.clear()
    return annotate_rma(table(out))  # RMA rows: match = epoch, done = closing call


def event_columns_numpy(ops: OpTable, t_enter: npt.NDArray[np.float64], t_exit: npt.NDArray[np.float64],
                        reg: Regions, links: Links) -> dict[str, npt.NDArray[Any]]:
    """The event table's columns, in its order (``kind``, ``op``, ``region``, ``path``: category codes), with
    numpy: the reference of :func:`waitlab.simulator.native_events.event_columns`.

    Each operation-length intermediate is taken to the output rows and freed as soon as it is used, so the
    peak stays near the table itself (issue 15: waitlab's own memory at scale).
    """
    n = len(ops)
    l_rows, enclosing = reg.l_rows, reg.enclosing
    # Output rows: region rows (at the enter marker's position) and leaf rows, in (rank, seq) order.
    src_rows = np.flatnonzero(ops.code != CODE["leave"])
    out_index = np.full(n, -1, np.int64)
    out_index[src_rows] = np.arange(src_rows.size)
    code = ops.code[src_rows]
    is_region = code == CODE["enter"]
    ref = ref_dtype(max(src_rows.size, len(ops.ledger)))  # row references (and ledger rows): int32 if they fit
    match_op, done_op, inst = (x.copy() for x in links)
    np.copyto(match_op, inst, where=inst >= 0)
    del inst
    match = match_op[src_rows].astype(ref)
    del match_op
    match[is_region] = -1
    done = done_op[src_rows]
    del done_op
    done = np.where(done >= 0, out_index[np.maximum(done, 0)], -1).astype(ref)
    enter = t_enter[src_rows]
    exit_ = t_exit[src_rows]
    exit_[is_region] = t_exit[l_rows]  # region rows appear in e_rows order, and l_rows is aligned with it
    del l_rows
    parent_src = enclosing[src_rows]
    del enclosing
    parent = np.where(parent_src >= 0, out_index[np.maximum(parent_src, 0)], -1).astype(ref)
    del out_index
    name = ops.name[src_rows]
    region_id = np.where(is_region, name, np.where(parent >= 0, ops.name[np.maximum(parent_src, 0)], -1))
    del parent_src
    depth = reg.depth[src_rows]  # number of enclosing regions
    path_id = reg.path_index[reg.path[src_rows]]
    del name
    peer = ops.peer[src_rows]
    comm = ops.comm[src_rows]
    if ops.comms:  # ranks, roots and sizes within each operation's communicator
        local = local_ranks(ops)
        size = np.array([ops.n_ranks, *(len(c) for c in ops.comms)], np.int64)[comm]
        me = local[comm, ops.rank[src_rows]]
        root = np.where(peer >= 0, local[comm, np.maximum(peer, 0)], -1)
        sent, received = bytes_moved(code, ops.value[src_rows], ops.value2[src_rows], me, root, size)
        del local, size, me, root
    else:
        sent, received = bytes_moved(code, ops.value[src_rows], ops.value2[src_rows], ops.rank[src_rows], peer,
                                     ops.n_ranks)
    sent[is_region] = 0
    received[is_region] = 0
    kind = np.where(is_region, KINDS.index("region"), _KIND_OF_CODE[code]).astype(np.int8)
    op = np.where(is_region, REGION_OP, code).astype(np.int16)
    peer = np.where(_HAS_PEER[code] & ~is_region, peer, -1).astype(np.int32)
    comm = np.where(is_region, 0, comm).astype(np.int32)
    del code
    region_codes = np.where(region_id >= 0, region_id, len(ops.names))
    del region_id
    return {
        "rank": ops.rank[src_rows],
        "seq": ops.seq[src_rows],
        "kind": kind,
        "op": op,
        "region": region_codes,
        "path": path_id,
        "step": ops.step[src_rows],
        "enter": enter,
        "exit": exit_,
        "peer": peer,
        "tag": ops.tag[src_rows],
        "comm": comm,
        "bytes": sent,
        "recv_bytes": received,
        "match": match,
        "done": done,
        "parent": parent,
        "depth": depth,
        "cause": ops.cause[src_rows].astype(ref),
        "excess": ops.excess[src_rows],
    }

