"""Write an :class:`~waitlab.models.ops.OpTable` as SMPI time-independent trace files.

One file per rank (``rank<r>.txt``) and an index file listing them, which is
what ``smpirun -replay INDEX`` expects.  Every rank's trace starts with
``init`` and ends with ``finalize``; every line ends with a newline (SMPI
silently drops a last line without one).  Compute durations are converted from
seconds to flops with the core speed of the rendered platform, printed with
``repr`` so the conversion is exact.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import InputError
from waitlab.models.ops import OpTable
from waitlab.models.vocabulary import (
    ACTION,
    ACTIONS,
    COLLECTIVE_ACTIONS,
    EXCHANGE_ARGS,
    NBC_TWIN,
    REDUCTION_ARGS,
    REGION_ARGS,
    ROOTED_EXCHANGE_ARGS,
    SECONDS_ACTIONS,
    V_ACTIONS,
    VOCABULARY,
    lut,
)
from waitlab.simulator.nbc_capture import nbc_lines
from waitlab.simulator.ti_vectors import VectorStore, occurrence, occurrence_of, v_line
from waitlab.simulator.trace_rma import RMA_TI_ACTIONS, format_rma

_Cols = dict[str, list[Any]]
_IS_COLLECTIVE = lut(COLLECTIVE_ACTIONS)
_IS_V = lut(V_ACTIONS)


def _ints(values: npt.NDArray[np.float64]) -> list[int]:
    return np.rint(values).astype(np.int64).tolist()


def _fmt(action: str, cols: _Cols) -> list[str]:
    """Lines of one action for a subset of rows (columns as Python lists)."""
    v, v2, peer, tag, rank, name = (cols[k] for k in ("count", "value2", "peer", "tag", "rank", "name"))
    shape = ACTION[action].ti_args  # actions of one TI argument shape are written alike
    if ACTION[action].kind in ("send", "recv"):
        return [f"{action} {p} {t} {c}" for p, t, c in zip(peer, tag, v, strict=True)]
    if action == "wait":  # wait src dst tag; value2 = 1 when it completes a receive (peer is then the source)
        return [f"wait {p} {r} {t}" if rc else f"wait {r} {p} {t}"
                for p, r, t, rc in zip(peer, rank, tag, v2, strict=True)]
    if not shape:
        return [action] * len(rank)
    root = peer
    if ACTION[action].is_rooted and any(p < 0 for p in peer):
        i = next(j for j, p in enumerate(peer) if p < 0)
        raise InputError("operations", f"rank {rank[i]} {action}", "a rooted collective without a root (peer -1)",
                         "give the root rank as the operation's peer")
    if action == "bcast":
        return [f"bcast {c} {q} 6" for c, q in zip(v, root, strict=True)]  # datatype 6 = MPI_BYTE
    if action == "reduce":
        return [f"reduce {c} {f!r} {q} 6" for c, f, q in zip(v, v2, root, strict=True)]
    if shape == REDUCTION_ARGS:
        return [f"{action} {c} {f!r}" for c, f in zip(v, v2, strict=True)]
    if shape == EXCHANGE_ARGS:
        return [f"{action} {c} {c2}" for c, c2 in zip(v, cols["count2"], strict=True)]
    if shape == ROOTED_EXCHANGE_ARGS:
        return [f"{action} {c} {c2} {q}" for c, c2, q in zip(v, cols["count2"], root, strict=True)]
    if action in SECONDS_ACTIONS:
        return [f"{action} {x!r}" for x in cols["value"]]
    if action == "flush":
        return [f"flush {c} {f!r}" for c, f in zip(v, v2, strict=True)]
    if shape == REGION_ARGS:
        return [f"{action} {n}" for n in name]
    if action == "test":
        return ["test -1 -1 0"] * len(rank)
    raise KeyError(action)


#: Actions :func:`format_lines` writes (v-collectives: :func:`format_ti_lines`;
#: communicator set-up and ``sendRecv`` never appear in an operation table: the reader splits ``sendRecv``).
WRITABLE = (*(a.name for a in VOCABULARY
                 if a.kind not in ("setup", "sendrecv", "rma") and not a.vector and a.name != "location"),
            *RMA_TI_ACTIONS)


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
    names = ops.names
    for nm in names:
        if not nm or any(ch.isspace() for ch in nm):
            raise InputError("scenario", f"region name {nm!r}", "region names cannot be empty or contain spaces",
                             "use '_' or '>' instead of spaces")
    if len(ops) and (ops.value < 0).any():
        bad = int(np.flatnonzero(ops.value < 0)[0])
        raise InputError("scenario", f"rank {ops.rank[bad]} operation {ops.seq[bad]}",
                         f"negative value {ops.value[bad]} for {ACTIONS[ops.code[bad]]}",
                         "durations and sizes must be >= 0")
    lines = np.empty(len(ops), dtype=object)
    name_table = np.array([*names, ""], dtype=object)
    for code in np.unique(ops.code).tolist():
        action = ACTIONS[code]
        idx = np.flatnonzero(ops.code == code)
        if action == "compute":
            lines[idx] = [f"compute {f!r}" for f in (ops.value[idx] * core_speed).tolist()]
            continue
        if action in RMA_TI_ACTIONS:  # waitlab's replay extension runs them (native/waitlab_replay_rma.cpp)
            lines[idx] = format_rma(action, ops, idx)
            continue
        if ACTION[action].kind == "rma":  # SimGrid 3.32's smpi_replay.cpp registers no one-sided action
            raise InputError("scenario", f"operation {action}", f"the program uses one-sided MPI ({action}): "
                             "SimGrid 3.32's time-independent replay has no RMA action and waitlab's replay "
                             f"extension runs only {', '.join(RMA_TI_ACTIONS)}, so it cannot be captured or "
                             "replayed as a trace",
                             'run the program itself (application.kind = "program") instead of a trace')
        if action not in WRITABLE:
            raise InputError("scenario", f"operation {action}", "this action cannot be written to a trace yet",
                             f"use one of: {', '.join(sorted(WRITABLE))}")
        cols: _Cols = {
            "count": _ints(ops.value[idx]), "count2": _ints(ops.value2[idx]), "value": ops.value[idx].tolist(),
            "value2": ops.value2[idx].tolist(), "peer": ops.peer[idx].tolist(), "tag": ops.tag[idx].tolist(),
            "rank": ops.rank[idx].tolist(), "name": name_table[ops.name[idx]].tolist(),
        }  # fmt: skip
        lines[idx] = nbc_lines(action, _fmt(NBC_TWIN.get(action, action), cols), ops.tag[idx])  # nonblocking
        if _IS_COLLECTIVE[code] and ops.comms:  # a sub-communicator's members end its line (subcomm_arg)
            sub = idx[ops.comm[idx] != 0]
            tokens = [subcomm_arg(ops.comms[k - 1]) for k in range(1, len(ops.comms) + 1)]
            lines[sub] = [f"{ln} {tokens[k - 1]}" for ln, k in zip(lines[sub].tolist(), ops.comm[sub].tolist(),
                                                                  strict=True)]
    return lines.tolist()


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
    own = ops.mask(V_ACTIONS)
    lines: list[str] = [""] * len(ops)
    rest = np.flatnonzero(~own)
    if rest.size:
        sub = ops.take(rest.astype(np.int64)) if rest.size < len(ops) else ops
        for i, ln in zip(rest.tolist(), format_lines(sub, core_speed), strict=True):
            lines[i] = ln
    idx = np.flatnonzero(own)
    if idx.size:
        k = occurrence(ops) if occurrences is None else occurrences
        for i in idx.tolist():
            action = ACTIONS[ops.code[i]]
            r, v, v2, p = int(ops.rank[i]), float(ops.value[i]), float(ops.value2[i]), int(ops.peer[i])
            vec = vectors.get(r, int(ops.code[i]), int(k[i])) if vectors is not None else None
            lines[i] = v_line(action, r, v, v2, p, ops.n_ranks, vec)
    return lines


def _epochs(rank: npt.NDArray[np.int32], code: npt.NDArray[np.int8], n_ranks: int) -> npt.NDArray[np.int32]:
    """Per row (rows in (rank, seq) order), how many collectives of its rank came before it (its BSP superstep)."""
    coll = _IS_COLLECTIVE[code].astype(np.int32)
    counts = np.bincount(rank, minlength=n_ranks)
    before = np.cumsum(coll, dtype=np.int64) - coll
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    return (before - np.repeat(before[starts] if rank.size else before[:0], counts)).astype(np.int32)


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
        order = np.argsort(rows, kind="stable")  # OpTable.take keeps (rank, seq) order: give it sorted rows
        sub = self.ops.take(rows[order])
        if self.occurrences is None:
            text = format_lines(sub, self.core_speed)
        else:
            text = format_ti_lines(sub, self.core_speed, self.vectors, occurrences=self.occurrences[written[order]])
        out = np.empty(rows.size, dtype=object)
        out[order] = text
        return list(out)


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
    prefix = np.array([f"{r} " for r in range(n)], dtype=object)  # each line starts with its rank
    with path.open("w", encoding="utf-8") as fh:
        fh.write(head)
        for i in range(0, order.size, TRACE_CHUNK_ROWS):
            o = order[i:i + TRACE_CHUNK_ROWS]
            text = np.full(o.size, "finalize", dtype=object)
            text[o < n] = "init"
            body = np.flatnonzero((o >= n) & (o < n + m))
            if body.size:
                written = o[body] - n
                text[body] = lines(sel[written], written)
            fh.write("\n".join(map(operator.add, prefix[key_rank[o]].tolist(), text.tolist())) + "\n")
    index = folder / "index.txt"
    index.write_text((path.name if relative else str(path.resolve())) + "\n")
    return index
