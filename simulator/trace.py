"""Write an :class:`~waitlab.models.ops.OpTable` as SMPI time-independent trace files.

One file per rank (``rank<r>.txt``) and an index file listing them, which is
what ``smpirun -replay INDEX`` expects.  Every rank's trace starts with
``init`` and ends with ``finalize``; every line ends with a newline (SMPI
silently drops a last line without one).  Compute durations are converted from
seconds to flops with the core speed of the rendered platform, printed with
``repr`` so the conversion is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError
from waitlab.models.ops import OpTable, channel_tags
from waitlab.models.vocabulary import (
    ACTION,
    ACTIONS,
    CODE,
    COLLECTIVE_ACTIONS,
    EXCHANGE_ARGS,
    NBC_TWIN,
    NBC_TWINS,
    REDUCTION_ARGS,
    REGION_ARGS,
    ROOTED_EXCHANGE_ARGS,
    SECONDS_ACTIONS,
    V_ACTIONS,
    VOCABULARY,
    lut,
)
from waitlab.simulator.native_text import IfInt, IfRepr, Int, Label, Lit, Part, Text, text_bytes
from waitlab.simulator.nbc_capture import NBC_PREFIX
from waitlab.simulator.ti_vectors import VectorStore, occurrence, occurrence_of, v_line
from waitlab.simulator.trace_rma import RMA_TI_ACTIONS, format_rma

_IS_COLLECTIVE = lut(COLLECTIVE_ACTIONS)
_IS_V = lut(V_ACTIONS)
_IS_RMA = lut(RMA_TI_ACTIONS)
_IS_POST = lut(NBC_TWIN)
_IS_NBC_TWIN = lut(NBC_TWINS)
(_NONE, _P2P, _WAIT, _COMPUTE, _SECONDS, _BCAST, _REDUCE, _REDUCTION, _EXCHANGE, _ROOTED_EXCHANGE, _FLUSH, _REGION,
 _TEST, _OTHER) = range(14)


def _shape_of(action: str) -> int:
    """How a line of ``action`` goes on after its name: actions of one TI argument shape are written alike, and a
    nonblocking collective's post as its blocking twin."""
    a = ACTION[NBC_TWIN.get(action, action)]
    named = {"wait": _WAIT, "test": _TEST, "compute": _COMPUTE, "bcast": _BCAST, "reduce": _REDUCE, "flush": _FLUSH}
    if a.kind in ("send", "recv"):
        return _P2P
    if a.name in named:
        return named[a.name]
    if a.name in SECONDS_ACTIONS:
        return _SECONDS
    if not a.ti_args:
        return _NONE
    return {REDUCTION_ARGS: _REDUCTION, EXCHANGE_ARGS: _EXCHANGE, ROOTED_EXCHANGE_ARGS: _ROOTED_EXCHANGE,
            REGION_ARGS: _REGION}.get(a.ti_args, _OTHER)


#: The line shape of each action code, and the code of its blocking twin (its own for all but posts).
_SHAPE = np.array([_shape_of(a) for a in ACTIONS], np.int8)
_TWIN_CODE = np.array([CODE[NBC_TWIN.get(a, a)] for a in ACTIONS], np.int64)
#: The arguments after an action's name, per line shape, each written after a space: the columns of :func:`_parts`
#: ("six": MPI_BYTE's datatype code 6; a column named "*_repr" is a float written as Python's repr).  A shape not
#: here writes no argument (_NONE) or is not written by a template (_OTHER: v-collectives, set-up).
_ARGS: dict[int, tuple[str, ...]] = {
    _P2P: ("peer", "tag", "count"),  # send/recv dst|src tag count
    _WAIT: ("first", "second", "tag"),  # wait src dst tag
    _COMPUTE: ("flops_repr",),
    _SECONDS: ("value_repr",),
    _BCAST: ("count", "peer", "six"),  # bcast count root datatype
    _REDUCE: ("count", "value2_repr", "peer", "six"),  # reduce count flops root datatype
    _REDUCTION: ("count", "value2_repr"),  # allreduce, scan, exscan: count flops
    _EXCHANGE: ("count", "count2"),
    _ROOTED_EXCHANGE: ("count", "count2", "peer"),
    _FLUSH: ("count", "value2_repr"),
    _TEST: ("test_first", "test_second", "test_tag"),  # test src dst tag; test -1 -1 0 for a poll (peer -1)
}


def _refuse_unwritable(ops: OpTable, rows: npt.NDArray[np.int64], code: npt.NDArray[np.int64],
                       v_lines: bool) -> None:
    """The first action of ``rows`` (by code) that a trace cannot hold, as an :class:`InputError`."""
    for c in np.unique(code).tolist():
        action = ACTIONS[c]
        if action == "compute" or _IS_RMA[c]:
            continue
        if ACTION[action].kind == "rma":  # SimGrid 3.32's smpi_replay.cpp registers no one-sided action
            raise InputError("scenario", f"operation {action}", f"the program uses one-sided MPI ({action}): "
                             "SimGrid 3.32's time-independent replay has no RMA action and waitlab's replay "
                             f"extension runs only {', '.join(RMA_TI_ACTIONS)}, so it cannot be captured or "
                             "replayed as a trace",
                             'run the program itself (application.kind = "program") instead of a trace')
        if action not in WRITABLE and not (v_lines and _IS_V[c]):
            raise InputError("scenario", f"operation {action}", "this action cannot be written to a trace yet",
                             f"use one of: {', '.join(sorted(WRITABLE))}")
        twin = ACTION[NBC_TWIN.get(action, action)]
        if twin.is_rooted and not _IS_V[c]:
            bad = rows[(code == c) & (ops.peer[rows] < 0)]
            if bad.size:
                i = int(bad.min())
                raise InputError("operations", f"rank {ops.rank[i]} {twin.name}",
                                 "a rooted collective without a root (peer -1)",
                                 "give the root rank as the operation's peer")


#: Actions :func:`format_lines` writes (v-collectives: :func:`format_ti_lines`;
#: communicator set-up and ``sendRecv`` never appear in an operation table: the reader splits ``sendRecv``).
WRITABLE = (*(a.name for a in VOCABULARY
                 if a.kind not in ("setup", "sendrecv", "rma") and not a.vector and a.name != "location"),
            *RMA_TI_ACTIONS)


def _parts(ops: OpTable, rows: npt.NDArray[np.int64], core_speed: float, *, vectors: VectorStore | None = None,
           occurrences: npt.NDArray[np.int64] | None = None, v_lines: bool = False, names: Sequence[str] = (),
           name_of: npt.NDArray[np.int64] | None = None) -> list[Part]:
    """The template (:mod:`waitlab.simulator.native_text`) of the TI lines, without rank prefix, of ``ops`` rows
    ``rows`` in that order.  A position where ``rows`` is -1 is the line ``names[name_of[i]]`` alone (the shared
    trace's ``init`` and ``finalize``).  ``v_lines``: v-collectives are written (:func:`v_line`; exact with
    ``vectors`` and the rows' ``occurrences``), else refused; one-sided actions by :func:`format_rma`.

    Compute durations are converted to flops with ``core_speed`` and, like every float of a line, written as
    Python's ``repr`` writes them (the shortest text that reads back exactly)."""
    n = rows.size
    op = rows >= 0
    at = rows[op]
    code = np.full(n, -1, np.int64)
    code[op] = ops.code[at]
    _refuse_unwritable(ops, at, code[op], v_lines)

    def col(values: npt.NDArray[Any], fill: float = 0) -> npt.NDArray[Any]:
        out = np.full(n, fill, values.dtype)
        out[op] = values[at]
        return out

    known = np.maximum(code, 0)  # the lookup tables' index (positions without an operation are masked out)
    text = op & (_IS_V[known] | _IS_RMA[known])  # formatted one by one
    plain = op & ~text
    shape = np.where(plain, _SHAPE[known], _NONE)
    tag = col(ops.tag)
    post = plain & _IS_POST[known]
    name = np.where(op, code, len(ACTIONS) + 1 + (name_of if name_of is not None else np.zeros(n, np.int64)))
    name[text] = len(ACTIONS)  # the whole line is in the text part
    unnumbered_post = post & (tag <= 0)  # a post without its serial is written as its twin
    name[unnumbered_post] = _TWIN_CODE[code[unnumbered_post]]
    parts: list[Part] = [Label(name, [*ACTIONS, "", *names])]
    if plain.any():
        value, value2, peer = col(ops.value), col(ops.value2), col(ops.peer)
        recv = value2 != 0  # a wait that completes a receive: its peer is the source
        rank = col(ops.rank)
        # count2 is a count only where an exchange writes it; elsewhere value2 may be a reduction's flops (1e19 of
        # them: beyond int64, a cast warning and a meaningless number that no line writes)
        count2 = np.where(np.isin(shape, (_EXCHANGE, _ROOTED_EXCHANGE)), value2, 0.0)
        columns = {"peer": peer, "tag": tag, "count": np.rint(value).astype(np.int64),
                   "count2": np.rint(count2).astype(np.int64), "first": np.where(recv, peer, rank),
                   "second": np.where(recv, rank, peer), "flops_repr": value * core_speed, "value_repr": value,
                   "value2_repr": value2, "six": np.full(n, 6, np.int64)}
        # a test of a request (a stock trace's) names it as a wait does; the polls of waitlab's layer (MPI time of
        # no request it completes, peer -1) name none, which SimGrid's TestAction ignores
        polls = peer < 0
        columns.update(test_first=np.where(polls, -1, columns["first"]), test_second=np.where(polls, -1,
                       columns["second"]), test_tag=np.where(polls, 0, tag))
        for sh, args in _ARGS.items():
            mask = shape == sh
            if mask.any():
                parts += [IfRepr(" ", columns[a], mask) if a.endswith("_repr") else IfInt(" ", columns[a], mask)
                          for a in args]
        region = shape == _REGION
        if region.any():  # enter / leave: the region's name (-1: none)
            label = np.where(region, col(ops.name, -1) + 1, 0)
            label[region & (label == 0)] = len(ops.names) + 1
            parts.append(Label(label, ["", *(f" {nm}" for nm in ops.names), " "]))
        nbc = (post | (plain & _IS_NBC_TWIN[known])) & (tag > 0)
        if nbc.any():  # a nonblocking collective's post and completion end with its serial
            parts.append(IfInt(f" {NBC_PREFIX}", tag, nbc))
        if ops.comms:  # a collective on a sub-communicator ends with its members (subcomm_arg)
            comm = np.where(plain & _IS_COLLECTIVE[known], col(ops.comm), 0)
            if comm.any():
                parts.append(Label(comm, ["", *(f" {subcomm_arg(c)}" for c in ops.comms)]))
    if text.any():
        parts.append(Text(np.flatnonzero(text), _one_by_one(ops, rows, code, text, vectors, occurrences)))
    return parts


def _one_by_one(ops: OpTable, rows: npt.NDArray[np.int64], code: npt.NDArray[np.int64],
                text: npt.NDArray[np.bool_], vectors: VectorStore | None,
                occurrences: npt.NDArray[np.int64] | None) -> list[str]:
    """The lines of the positions ``text`` (one-sided actions, v-collectives), in position order."""
    where = np.flatnonzero(text)
    out: list[str] = [""] * where.size
    if occurrences is None and _IS_V[code[where]].any():  # the whole table's: ops is all of the trace
        occurrences = occurrence(ops)[rows]
    for c in np.unique(code[where]).tolist():
        pick = np.flatnonzero(code[where] == c)
        idx = rows[where[pick]]
        action = ACTIONS[c]
        if _IS_RMA[c]:  # waitlab's replay extension runs them (native/waitlab_replay_rma.cpp)
            got = format_rma(action, ops, idx)
        else:
            assert occurrences is not None
            k = occurrences[where[pick]]
            got = [v_line(action, int(ops.rank[i]), float(ops.value[i]), float(ops.value2[i]), int(ops.peer[i]),
                          ops.n_ranks, vectors.get(int(ops.rank[i]), c, int(j)) if vectors is not None else None)
                   for i, j in zip(idx.tolist(), k.tolist(), strict=True)]
        for j, line in zip(pick.tolist(), got, strict=True):
            out[j] = line
    return out


def _lines(ops: OpTable, rows: npt.NDArray[np.int64], core_speed: float, **kw: Any) -> list[str]:
    """The TI lines (without rank prefix) of ``ops`` rows ``rows``, as a list."""
    if rows.size == 0:
        return []
    return bytes(text_bytes(_parts(ops, rows, core_speed, **kw), rows.size, sep="\n")).decode().split("\n")


def format_lines(ops: OpTable, core_speed: float) -> list[str]:
    """One TI trace line (without the rank prefix and newline) per operation.

    Examples
    --------
    >>> from waitlab.models.ops import OpBuilder
    >>> b = OpBuilder(2)
    >>> b.add("compute", [0, 1], value=0.5, region="a")
    >>> b.add("send", 0, peer=1, value=8, tag=3)
    >>> b.add("recv", 1, peer=0, value=8, tag=3)
    >>> format_lines(b.build(), core_speed=1e9)
    ['compute 500000000.0', 'send 1 3 8', 'compute 500000000.0', 'recv 0 3 8']
    """
    for nm in ops.names:
        if not nm or any(ch.isspace() for ch in nm):
            raise InputError("scenario", f"region name {nm!r}", "region names cannot be empty or contain spaces",
                             "use '_' or '>' instead of spaces")
    if len(ops) and (ops.value < 0).any():
        bad = int(np.flatnonzero(ops.value < 0)[0])
        raise InputError("scenario", f"rank {ops.rank[bad]} operation {ops.seq[bad]}",
                         f"negative value {ops.value[bad]} for {ACTIONS[ops.code[bad]]}",
                         "durations and sizes must be >= 0")
    return _lines(replay_tags(ops), np.arange(len(ops), dtype=np.int64), core_speed)


def replay_tags(ops: OpTable) -> OpTable:
    """``ops`` with the tags the trace is written with: a TI ``send``/``recv``/``wait`` line names no communicator
    (SMPI's replay pairs them by source, destination and tag on one communicator), so when point-to-point traffic
    uses more than one communicator every (communicator, tag) pair gets a tag of its own
    (:func:`waitlab.models.ops.channel_tags`) and the replay pairs messages as MPI did; else ``ops`` itself (its
    tags are written as they are).  The event table keeps the program's tags."""
    tags = channel_tags(ops)
    return ops if tags is ops.tag else ops.replace_columns(tag=tags)


#: Start of the last argument of a collective line on a sub-communicator (:func:`subcomm_arg`).
SUBCOMM_PREFIX = "comm="


def subcomm_arg(members: tuple[int, ...]) -> str:
    """The last argument of a collective line on a sub-communicator: its members' world ranks, in communicator-rank
    order (read by waitlab's replay extension, ``native/waitlab_replay.cpp``, and by the TI reader).

    Examples
    --------
    >>> subcomm_arg((1, 0))
    'comm=1,0'
    """
    return SUBCOMM_PREFIX + ",".join(str(int(m)) for m in members)


def format_ti_lines(ops: OpTable, core_speed: float, vectors: VectorStore | None = None, *,
                    occurrences: npt.NDArray[np.int64] | None = None) -> list[str]:
    """One TI line (without rank prefix) per operation, v-collectives exact when ``vectors`` has them.

    ``occurrences`` (:func:`occurrence` of the whole trace) is given when ``ops`` is a part of it.
    """
    return _lines(ops, np.arange(len(ops), dtype=np.int64), core_speed, vectors=vectors, occurrences=occurrences,
                  v_lines=True)


def _epochs(rank: npt.NDArray[np.int32], code: npt.NDArray[np.int8], n_ranks: int) -> npt.NDArray[np.int32]:
    """Per row (rows in (rank, seq) order), how many collectives of its rank came before it (its BSP superstep)."""
    if rank.size == 0:  # no rank has an operation
        return np.zeros(0, np.int32)
    coll = _IS_COLLECTIVE[code].astype(np.int32)
    counts = np.bincount(rank, minlength=n_ranks)
    before = np.cumsum(coll, dtype=np.int64) - coll
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    starts = np.minimum(starts, rank.size - 1)  # a rank without rows repeats its start 0 times (may be past the end)
    return (before - np.repeat(before[starts], counts)).astype(np.int32)


#: Operations formatted at a time: the trace's text is never held whole (issue 15, waitlab's memory at scale).
TRACE_CHUNK_ROWS = 1 << 16


@dataclass(frozen=True)
class _Lines:
    """Formats chunks of the written rows of one trace."""

    ops: OpTable
    core_speed: float
    vectors: VectorStore | None
    occurrences: npt.NDArray[np.int64] | None  # per written row, when the trace has v-collectives

    def __call__(self, rows: npt.NDArray[np.int64], written: npt.NDArray[np.int64]) -> list[str]:
        """Lines of ``ops`` rows ``rows`` (positions ``written`` among the written rows), in that order."""
        return _lines(self.ops, rows, self.core_speed, **self._kw(written))

    def text(self, rows: npt.NDArray[np.int64], written: npt.NDArray[np.int64], ranks: npt.NDArray[np.int32],
             names: Sequence[str], name_of: npt.NDArray[np.int64]) -> memoryview:
        """The lines ``"<rank> <line>"`` of ``rows`` (``written``: their positions among the written rows), joined by
        newlines; where ``rows`` is -1 the line is ``"<rank> <names[name_of]>"``."""
        parts = [Int(ranks), Lit(" "), *_parts(self.ops, rows, self.core_speed, names=names, name_of=name_of,
                                               **self._kw(written))]
        return text_bytes(parts, rows.size, sep="\n")

    def _kw(self, written: npt.NDArray[np.int64]) -> dict[str, Any]:
        occ = None if self.occurrences is None or not self.occurrences.size else self.occurrences[written]
        return {"vectors": self.vectors, "occurrences": occ, "v_lines": True}


def write_trace(ops: OpTable, core_speed: float, folder: Path, *, rows: npt.NDArray[np.int64] | None = None,
                vectors: VectorStore | None = None, header: str = "", relative: bool = False,
                shared: bool = False) -> Path:
    """Write the trace and its index; return the index path.

    ``rows`` are the operations to write (all by default; in table order), so a caller leaving some out
    (region markers) needs no copy of the table.  ``vectors`` holds exact per-peer counts of v-collectives
    (alltoallv, gatherv, ...; see :mod:`waitlab.simulator.ti_trace`), which are otherwise spread evenly.
    ``header`` lines become ``#`` comments at the top of every file.  The index names the files by
    absolute path (what ``smpirun -replay`` needs from any folder), or relative to the index with
    ``relative=True`` (a trace folder that can be moved).

    ``shared=True`` writes one trace file for all ranks (``trace.txt``) and a one-line index, which
    SMPI replays without opening a file per rank (so ``ulimit -n`` does not bound the ranks).  Its
    lines are ordered by superstep (collectives seen so far on the rank), then rank, then sequence,
    so SimGrid's reader, which queues the lines of other ranks it reads past, holds at most about
    one superstep of the trace in memory.  What each rank replays is the same as with per-rank files.

    Lines are formatted and written :data:`TRACE_CHUNK_ROWS` operations at a time.
    """
    folder.mkdir(parents=True, exist_ok=True)
    sel = np.arange(len(ops), dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
    _check_table(ops, sel)
    ops = replay_tags(ops)
    has_v = vectors is not None or bool(_IS_V[ops.code[sel]].any())
    k = occurrence_of(ops.rank[sel], ops.code[sel], ops.seq[sel]) if has_v else None
    lines = _Lines(ops, core_speed, vectors, k)
    head = "".join(f"# {h}\n" for h in header.splitlines()) if header else ""
    if shared:
        return _write_shared(ops, sel, lines, folder, head, relative)
    counts = np.bincount(ops.rank[sel], minlength=ops.n_ranks)
    bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
    index_lines = []
    r0 = 0
    while r0 < ops.n_ranks:  # whole ranks at a time, about TRACE_CHUNK_ROWS rows
        r1 = r0 + 1
        while r1 < ops.n_ranks and bounds[r1 + 1] - bounds[r0] <= TRACE_CHUNK_ROWS:
            r1 += 1
        part = np.arange(bounds[r0], bounds[r1], dtype=np.int64)
        text = lines(sel[part], part)
        for r in range(r0, r1):
            path = folder / f"rank{r}.txt"
            prefix = f"\n{r} "
            chunk = text[bounds[r] - bounds[r0]:bounds[r + 1] - bounds[r0]]
            body = (prefix + prefix.join(chunk)) if chunk else ""
            path.write_text(f"{head}{r} init{body}\n{r} finalize\n")
            index_lines.append(path.name if relative else str(path.resolve()))
        r0 = r1
    index = folder / "index.txt"
    index.write_text("\n".join(index_lines) + "\n")
    return index


def _check_table(ops: OpTable, sel: npt.NDArray[np.int64]) -> None:
    """The whole table's bad input, before any file is written."""
    for nm in ops.names:
        if not nm or any(ch.isspace() for ch in nm):
            raise InputError("scenario", f"region name {nm!r}", "region names cannot be empty or contain spaces",
                             "use '_' or '>' instead of spaces")
    negative = np.flatnonzero(ops.value[sel] < 0)
    if negative.size:
        bad = int(sel[negative[0]])
        raise InputError("scenario", f"rank {ops.rank[bad]} operation {ops.seq[bad]}",
                         f"negative value {ops.value[bad]} for {ACTIONS[ops.code[bad]]}",
                         "durations and sizes must be >= 0")


def _write_shared(ops: OpTable, sel: npt.NDArray[np.int64], lines: _Lines, folder: Path, head: str,
                  relative: bool) -> Path:
    """One trace file for every rank, ordered by (superstep, rank, sequence); a one-line index."""
    n, m = ops.n_ranks, sel.size
    rank = ops.rank[sel]
    epoch = _epochs(rank, ops.code[sel], n)
    counts = np.bincount(rank, minlength=n)
    last = np.zeros(n, np.int32)
    if m:
        ends = np.cumsum(counts) - 1
        has = counts > 0
        last[has] = epoch[ends[has]]
    ranks = np.arange(n, dtype=np.int32)
    # init (epoch -1), the operations, finalize (after the rank's last superstep); position p < n is rank p's
    # init, n <= p < n + m the written row p - n, then the finalizes
    key_epoch = np.concatenate((np.full(n, -1, np.int32), epoch, last + 1))
    del epoch
    key_rank = np.concatenate((ranks, rank, ranks))
    order = np.lexsort((key_rank, key_epoch))  # stable: a rank's rows stay in sequence order
    del key_epoch
    path = folder / "trace.txt"
    with path.open("wb") as fh:
        fh.write(head.encode())
        for i in range(0, order.size, TRACE_CHUNK_ROWS):
            o = order[i:i + TRACE_CHUNK_ROWS]
            body = (o >= n) & (o < n + m)
            written = np.where(body, o - n, 0)
            rows = np.full(o.size, -1, np.int64)
            rows[body] = sel[written[body]]
            fh.write(lines.text(rows, written, key_rank[o], ("init", "finalize"), (o >= n + m).astype(np.int64)))
            fh.write(b"\n")
    index = folder / "index.txt"
    index.write_text((path.name if relative else str(path.resolve())) + "\n")
    return index
