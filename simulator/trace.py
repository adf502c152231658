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
_IS_TEXT = _IS_V | _IS_RMA  # lines formatted one by one
_IS_NBC_END = _IS_POST | _IS_NBC_TWIN  # lines that end with a nonblocking collective's serial (tag > 0)
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
    for c in np.flatnonzero(np.bincount(code, minlength=len(ACTIONS))).tolist():  # the codes present, ascending
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
    labels = [*ACTIONS, "", *names]
    others = len(ACTIONS) + 1 + (name_of if name_of is not None else np.zeros(n, np.int64))  # positions without a row
    if not op.any():
        return [Label(others, labels)]
    # a position without a row reads the first row's columns: no line writes them (every part is masked to rows),
    # and its code is one the rows have (the same actions are refused)
    at = np.where(op, rows, rows[np.argmax(op)])
    code = ops.code.take(at).astype(np.int64)
    _refuse_unwritable(ops, at, code, v_lines)
    text = op & _IS_TEXT.take(code)  # formatted one by one
    plain = op & ~text
    shape = np.where(plain, _SHAPE.take(code), _NONE)
    tag = ops.tag.take(at)
    name = np.where(op, code, others)
    name[text] = len(ACTIONS)  # the whole line is in the text part
    unnumbered_post = plain & _IS_POST.take(code) & (tag <= 0)  # a post without its serial is written as its twin
    name[unnumbered_post] = _TWIN_CODE[code[unnumbered_post]]
    parts: list[Part] = [Label(name, labels)]
    if plain.any():
        value, value2, peer = ops.value.take(at), ops.value2.take(at), ops.peer.take(at)
        # count2 is a count only where an exchange writes it; elsewhere value2 may be a reduction's flops (1e19 of
        # them: beyond int64, a cast warning and a meaningless number that no line writes)
        count2 = np.where((shape == _EXCHANGE) | (shape == _ROOTED_EXCHANGE), value2, 0.0)
        columns: dict[str, npt.NDArray[Any]] = {
            "peer": peer, "tag": tag, "count": np.rint(value).astype(np.int64),
            "count2": np.rint(count2).astype(np.int64), "flops_repr": value * core_speed, "value_repr": value,
            "value2_repr": value2, "six": np.full(n, 6, np.int64)}  # fmt: skip
        if ((shape == _WAIT) | (shape == _TEST)).any():  # the source and destination of a wait's or test's message
            rank, recv = ops.rank.take(at), value2 != 0  # a wait that completes a receive: its peer is the source
            first, second = np.where(recv, peer, rank), np.where(recv, rank, peer)
            # a test of a request (a stock trace's) names it as a wait does; the polls of waitlab's layer (MPI time
            # of no request it completes, peer -1) name none, which SimGrid's TestAction ignores
            polls = peer < 0
            columns.update(first=first, second=second, test_first=np.where(polls, -1, first),
                           test_second=np.where(polls, -1, second), test_tag=np.where(polls, 0, tag))
        for sh, args in _ARGS.items():
            mask = shape == sh
            if mask.any():
                parts += [IfRepr(" ", columns[a], mask) if a.endswith("_repr") else IfInt(" ", columns[a], mask)
                          for a in args]
        region = shape == _REGION
        if region.any():  # enter / leave: the region's name (-1: none)
            label = np.where(region, ops.name.take(at) + 1, 0)
            label[region & (label == 0)] = len(ops.names) + 1
            parts.append(Label(label, ["", *(f" {nm}" for nm in ops.names), " "]))
        nbc = plain & _IS_NBC_END.take(code) & (tag > 0)
        if nbc.any():  # a nonblocking collective's post and completion end with its serial
            parts.append(IfInt(f" {NBC_PREFIX}", tag, nbc))
        if ops.comms:  # a collective on a sub-communicator ends with its members (subcomm_arg)
            comm = np.where(plain & _IS_COLLECTIVE.take(code), ops.comm.take(at), 0)
            if comm.any():
                parts.append(Label(comm, ["", *(f" {subcomm_arg(c)}" for c in ops.comms)]))
    if text.any():
        parts.append(Text(np.flatnonzero(text), _one_by_one(ops, at, code, text, vectors, occurrences)))
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
    if not ops.comm.any():  # one communicator: channel_tags gives the tags themselves
        return ops
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


def _shared_order(rank: npt.NDArray[np.int32], code: npt.NDArray[np.int8],
                  n_ranks: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """The lines of the shared trace in file order: positions in (``n_ranks`` inits, the written rows, ``n_ranks``
    finalizes), and the rank of each.

    The written rows (ranks ``rank``, codes ``code``, in (rank, seq) order) are ordered by superstep (collectives of
    their rank before them), then rank, then sequence; a rank's init comes before superstep 0, its finalize after its
    last superstep (superstep 1 for a rank without rows).  A rank's rows of one superstep are a run that ends at a
    collective or at the rank's last row, so the runs, and not the rows, are sorted.

    >>> order, rank = _shared_order(np.array([0, 0, 1], np.int32), np.array([CODE["compute"], CODE["barrier"],
    ...                             CODE["compute"]], np.int8), 3)
    >>> order.tolist(), rank.tolist()
    ([0, 1, 2, 3, 4, 5, 6, 7, 8], [0, 1, 2, 0, 0, 1, 0, 1, 2])
    """
    n, m = n_ranks, rank.size
    cut = np.ones(m, np.bool_)  # a run starts at a row whose rank's previous row is a collective, or at a new rank
    if m > 1:
        np.not_equal(rank[1:], rank[:-1], out=cut[1:])
        cut[1:] |= _IS_COLLECTIVE.take(code[:-1])
    start = np.flatnonzero(cut)
    run_rank = rank[start]
    runs = np.bincount(run_rank, minlength=n)  # of each rank
    step = np.arange(start.size) - np.repeat(np.cumsum(runs) - runs, runs)
    ranks = np.arange(n, dtype=np.int32)
    # (superstep + 1, rank) of the inits, the runs and the finalizes, distinct: one key each
    key = np.concatenate((ranks, (step + 1) * n + run_rank, (np.maximum(runs, 1) + 1) * n + ranks), dtype=np.int64)
    first = np.concatenate((ranks, n + start, n + m + ranks), dtype=np.int64)
    size = np.concatenate((np.ones(n, np.int64), np.diff(start, append=m), np.ones(n, np.int64)))
    rank_of = np.concatenate((ranks, run_rank, ranks))
    by = np.argsort(key, kind="stable")
    first, size = first[by], size[by]
    order = np.repeat(first - (np.cumsum(size) - size), size) + np.arange(2 * n + m, dtype=np.int64)
    return order, np.repeat(rank_of[by], size)


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
        """The arguments of :func:`_parts`; ``written`` may be out of range where ``rows`` is -1 (clipped)."""
        occ = (None if self.occurrences is None or not self.occurrences.size else
               self.occurrences.take(written, mode="clip"))
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
    code = ops.code if rows is None else ops.code[sel]
    has_v = vectors is not None or bool(_IS_V[np.flatnonzero(np.bincount(code, minlength=len(ACTIONS)))].any())
    k = occurrence_of(ops.rank[sel], code, ops.seq[sel]) if has_v else None
    lines = _Lines(ops, core_speed, vectors, k)
    head = "".join(f"# {h}\n" for h in header.splitlines()) if header else ""
    if shared:
        return _write_shared(ops, sel, code, lines, folder, head, relative)
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
    if not (ops.value < 0).any():  # the whole table's first (most tables have no negative value)
        return
    negative = np.flatnonzero(ops.value[sel] < 0)
    if negative.size:
        bad = int(sel[negative[0]])
        raise InputError("scenario", f"rank {ops.rank[bad]} operation {ops.seq[bad]}",
                         f"negative value {ops.value[bad]} for {ACTIONS[ops.code[bad]]}",
                         "durations and sizes must be >= 0")


def _write_shared(ops: OpTable, sel: npt.NDArray[np.int64], code: npt.NDArray[np.int8], lines: _Lines, folder: Path,
                  head: str, relative: bool) -> Path:
    """One trace file for every rank, ordered by (superstep, rank, sequence) (:func:`_shared_order`; ``code``: the
    codes of the rows ``sel``); a one-line index."""
    n, m = ops.n_ranks, sel.size
    order, rank_of = _shared_order(ops.rank[sel], code, n)
    path = folder / "trace.txt"
    with path.open("wb") as fh:
        fh.write(head.encode())
        for i in range(0, order.size, TRACE_CHUNK_ROWS):
            written = order[i:i + TRACE_CHUNK_ROWS] - n  # < 0: an init, >= m: a finalize
            body = (written >= 0) & (written < m)
            rows = np.where(body, sel.take(written, mode="clip"), -1) if m else np.full(written.size, -1, np.int64)
            fh.write(lines.text(rows, written, rank_of[i:i + TRACE_CHUNK_ROWS], ("init", "finalize"),
                                (written >= m).astype(np.int64)))
            fh.write(b"\n")
    index = folder / "index.txt"
    index.write_text((path.name if relative else str(path.resolve())) + "\n")
    return index
