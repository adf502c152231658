"""Allreduce written as point-to-point operations, so that no rank completes P requests at once (issue 15).

SimGrid 3.32's default allreduce is a linear reduce to rank 0 followed by a binomial broadcast: the root
posts P-1 receives and completes them through P-1 ``waitany`` calls over all of them, O(P) per
completion and O(P^2) per allreduce (docs/performance.md, "Scale").  :func:`expand_allreduce` replaces
every ``allreduce`` of ``MPI_COMM_WORLD`` in an operation table by one of two schedules in which each
rank waits on at most two requests at a time:

``"binomial"``
    MPICH's binomial reduce to rank 0 (rank ``r`` receives from ``r + m`` for every power of two
    ``m`` below its lowest set bit, in increasing ``m``, then sends to ``r - lowbit(r)``), then the
    binomial broadcast from rank 0 (the reverse tree, children in decreasing ``m``).  Blocking
    ``send``/``recv``: 2 (P - 1) messages, depth 2 ceil(log2 P).
``"rdb"``
    Recursive doubling (P a power of two): in round ``k`` rank ``r`` exchanges with ``r xor 2^k``
    (``irecv``, ``isend``, ``waitall``): P log2 P messages, depth log2 P.

The reduction's flops (the allreduce's ``value2``) become a ``compute`` of ``flops / core_speed``
seconds after the schedule, as SMPI's replay executes them after the collective.  These are other
algorithms than SimGrid's default, so simulated times differ slightly (the messages are the same
size; the tree differs): the benchmark shows by how much.

Examples
--------
>>> from waitlab.models.ops import ACTIONS, OpBuilder
>>> b = OpBuilder(4)
>>> b.add("allreduce", [0, 1, 2, 3], value=8, value2=0.0)
>>> t = expand_allreduce(b.build(), "binomial", core_speed=1e9)
>>> [(ACTIONS[c], int(p)) for c, p in zip(t.code[t.rank == 0], t.peer[t.rank == 0])]
[('recv', 1), ('recv', 2), ('send', 2), ('send', 1)]
>>> [(ACTIONS[c], int(p)) for c, p in zip(t.code[t.rank == 3], t.peer[t.rank == 3])]
[('send', 2), ('recv', 2)]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.models.ops import CODE, OpTable

__all__ = ["ALGORITHMS", "REDUCE_TAG", "expand_allreduce", "schedule"]

#: Schedules :func:`expand_allreduce` knows.
ALGORITHMS = ("binomial", "rdb")
#: Tags of the expanded messages (reduce, broadcast / exchange); far from the applications' tags.
REDUCE_TAG = 1 << 20

_Rows = dict[str, npt.NDArray[np.int64]]


def _lowbit(r: npt.NDArray[np.int64], n_ranks: int) -> npt.NDArray[np.int64]:
    """Lowest set bit of each rank; rank 0 gets the first power of two >= ``n_ranks``."""
    top = 1 << max(0, (n_ranks - 1).bit_length())
    return np.where(r == 0, top, r & -r)


def _binomial(n_ranks: int) -> _Rows:
    r = np.arange(n_ranks, dtype=np.int64)
    low = _lowbit(r, n_ranks)
    levels = max(1, (n_ranks - 1).bit_length())
    parts: list[tuple[npt.NDArray[np.int64], ...]] = []  # (rank, slot, code, peer, tag)

    def emit(mask: npt.NDArray[np.bool_], slot: int, action: str, peer: npt.NDArray[np.int64], tag: int) -> None:
        k = np.flatnonzero(mask)
        parts.append((r[k], np.full(k.size, slot), np.full(k.size, CODE[action]), peer[k], np.full(k.size, tag)))

    for k in range(levels):  # reduce: receive from the children, increasing mask
        m = 1 << k
        emit((m < low) & (r + m < n_ranks), k, "recv", r + m, REDUCE_TAG)
    emit(r > 0, levels, "send", r - low, REDUCE_TAG)
    emit(r > 0, levels + 1, "recv", r - low, REDUCE_TAG + 1)
    for k in reversed(range(levels)):  # broadcast: send to the children, decreasing mask
        m = 1 << k
        emit((m < low) & (r + m < n_ranks), 2 * levels + 1 - k, "send", r + m, REDUCE_TAG + 1)
    cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
    return dict(zip(("rank", "slot", "code", "peer", "tag"), cols, strict=True))


def _rdb(n_ranks: int) -> _Rows:
    if n_ranks & (n_ranks - 1):
        raise ValueError(f"recursive doubling needs a power-of-two number of ranks, not {n_ranks}")
    r = np.arange(n_ranks, dtype=np.int64)
    parts: list[tuple[npt.NDArray[np.int64], ...]] = []
    for k in range(max(0, (n_ranks - 1).bit_length())):
        peer = r ^ (1 << k)
        for j, action in enumerate(("irecv", "isend", "waitall")):
            parts.append((r, np.full(n_ranks, 3 * k + j), np.full(n_ranks, CODE[action]),
                          np.where(action == "waitall", -1, peer), np.full(n_ranks, REDUCE_TAG + k)))
    cols = [np.concatenate(c) for c in zip(*parts, strict=True)] if parts else [np.zeros(0, np.int64)] * 5
    return dict(zip(("rank", "slot", "code", "peer", "tag"), cols, strict=True))


def schedule(n_ranks: int, algorithm: str) -> _Rows:
    """Point-to-point rows of one allreduce, sorted by (rank, position): columns rank, code, peer, tag."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown allreduce schedule {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    rows = _binomial(n_ranks) if algorithm == "binomial" else _rdb(n_ranks)
    order = np.lexsort((rows["slot"], rows["rank"]))
    return {k: rows[k][order] for k in ("rank", "code", "peer", "tag")}


def expand_allreduce(ops: OpTable, algorithm: str, core_speed: float) -> OpTable:
    """``ops`` with every world allreduce replaced by the point-to-point ``algorithm`` (module docstring)."""
    sel = np.flatnonzero((ops.code == CODE["allreduce"]) & (ops.comm == 0))
    if sel.size == 0:
        return ops
    tpl = schedule(ops.n_ranks, algorithm)
    counts = np.bincount(tpl["rank"], minlength=ops.n_ranks)
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    owner = ops.rank[sel].astype(np.int64)
    c = counts[owner]
    within = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c)
    idx = np.repeat(start[owner], c) + within
    flops = ops.value2[sel]
    rows: dict[str, npt.NDArray[Any]] = {
        "rank": tpl["rank"][idx].astype(np.int32), "code": tpl["code"][idx].astype(np.int8),
        "peer": tpl["peer"][idx].astype(np.int32), "tag": tpl["tag"][idx].astype(np.int32),
        "value": np.where(tpl["code"][idx] == CODE["waitall"], 0.0, np.repeat(ops.value[sel], c)),
        "step": np.repeat(ops.step[sel], c),
    }  # fmt: skip
    before = np.repeat(ops.seq[sel].astype(np.int64), c)
    has = flops > 0  # the reduction's flops, executed after the collective as SMPI's replay does
    n = int(has.sum())
    comp: dict[str, npt.NDArray[Any]] = {
        "rank": ops.rank[sel][has], "code": np.full(n, CODE["compute"], np.int8), "peer": np.full(n, -1, np.int32),
        "tag": np.zeros(n, np.int32), "value": flops[has] / core_speed, "step": ops.step[sel][has],
    }  # fmt: skip
    rows = {k: np.concatenate((v, comp[k])) for k, v in rows.items()}
    before = np.concatenate((before, ops.seq[sel][has].astype(np.int64)))
    grown = ops.with_inserted(rows, before)
    return grown.take(np.flatnonzero(~((grown.code == CODE["allreduce"]) & (grown.comm == 0))))
