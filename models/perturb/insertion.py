"""Insert perturbation operations into an :class:`~waitlab.models.ops.OpTable`, with their ledger rows.

Perturbation models (noise jitter, instrumentation records, swap, flushes)
describe the operations they add as :class:`Insertions`: for each new
operation its rank, its *insertion key* ``8 * before_seq + r`` (it goes in
front of operation ``before_seq`` of its rank; ``r`` in 0..7 orders the rows
inserted at one place), an extra tie-breaker, the action and its values, and
the cause kind.  :func:`apply_insertions` adds them all at once, appends one
ledger row per new operation of positive value (its whole value is the
injected excess) and returns, for every row of the new table, the row it had
in the original table (-1 for inserted rows), which is how measured and
unperturbed runs are joined.

Examples
--------
>>> from waitlab.models.ops import ACTIONS, OpBuilder
>>> b = OpBuilder(1)
>>> b.add("compute", 0, value=1.0, region="w")
>>> b.add("barrier", 0)
>>> ops = b.build()
>>> ins = Insertions.make(rank=[0], key=[key(1, 2)], action="overhead", value=[0.5], kind="overhead", ref_row=[0])
>>> new, origin = apply_insertions(ops, ins)
>>> [ACTIONS[c] for c in new.code], origin.tolist(), new.ledger.total("overhead")
(['compute', 'overhead', 'barrier'], [0, -1, 1], 0.5)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.models.ops import CAUSE_KINDS, CODE, Ledger, OpTable

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]

#: Insertion keys per operation slot.
KEY_SCALE = 8


def key(before_seq: npt.ArrayLike, sub: int) -> _I:
    """Insertion key of rows going in front of ``before_seq`` at sub-position ``sub`` (0..7)."""
    return KEY_SCALE * np.asarray(before_seq, np.int64) + sub


@dataclass(frozen=True)
class Insertions:
    """Operations to insert (parallel arrays).

    Attributes
    ----------
    rank, key, tie : int64 arrays
        Owner, insertion key, and order among rows of equal key.
    code : int8 array
        Action code.
    value, value2 : float64 arrays
        As in :class:`OpTable` (seconds; flush: bytes and bytes/s).
    kind : int8 array
        Cause kind (index in :data:`CAUSE_KINDS`).
    ref_row : int64 array
        Row of the original table whose ``step`` (and region) the new row takes.
    """

    rank: _I
    key: _I
    tie: _I
    code: npt.NDArray[np.int8]
    value: _F
    value2: _F
    kind: npt.NDArray[np.int8]
    ref_row: _I

    def __len__(self) -> int:
        return int(self.rank.size)

    @staticmethod
    def make(*, rank: npt.ArrayLike, key: npt.ArrayLike, action: str, value: npt.ArrayLike, kind: str,
             ref_row: npt.ArrayLike, value2: npt.ArrayLike = 0.0, tie: npt.ArrayLike = 0) -> Insertions:
        """Rows of one action (scalars broadcast)."""
        r = np.atleast_1d(np.asarray(rank, np.int64))
        n = r.size

        def col(x: npt.ArrayLike, dtype: Any) -> npt.NDArray[Any]:
            return np.broadcast_to(np.asarray(x, dtype), (n,)).copy()

        return Insertions(rank=r, key=col(key, np.int64), tie=col(tie, np.int64),
                          code=np.full(n, CODE[action], np.int8), value=col(value, np.float64),
                          value2=col(value2, np.float64), kind=np.full(n, CAUSE_KINDS.index(kind), np.int8),
                          ref_row=col(ref_row, np.int64))

    @staticmethod
    def empty() -> Insertions:
        """No rows."""
        return Insertions.make(rank=np.zeros(0, np.int64), key=0, action="overhead", value=0.0, kind="overhead",
                               ref_row=0)

    def where(self, mask: npt.NDArray[np.bool_] | npt.NDArray[np.int64]) -> Insertions:
        """The rows selected by ``mask`` (a boolean mask or an index array)."""
        return Insertions(**{f.name: getattr(self, f.name)[mask] for f in fields(self)})


def concat(parts: list[Insertions]) -> Insertions:
    """All rows of several :class:`Insertions`."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return Insertions.empty()
    return Insertions(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(Insertions)})


def rank_starts(ops: OpTable) -> _I:
    """Row of the first operation of every rank."""
    counts = ops.per_rank_counts()
    return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)


def row_of(ops: OpTable, rank: npt.ArrayLike, seq: npt.ArrayLike) -> _I:
    """Row of operation ``seq`` of ``rank`` (clipped to the rank's rows)."""
    r = np.asarray(rank, np.int64)
    counts = ops.per_rank_counts()
    s = np.clip(np.asarray(seq, np.int64), 0, np.maximum(counts[r] - 1, 0))
    return rank_starts(ops)[r] + s


def apply_insertions(ops: OpTable, ins: Insertions,
                     region_of_row: npt.NDArray[np.int32] | None = None) -> tuple[OpTable, _I]:
    """Insert ``ins`` into ``ops``; return the new table and the original row of every new row.

    Every inserted operation with a positive value gets a ledger row
    (``seconds`` = its value, or its duration for a flush) and carries it as its
    ``cause`` and ``excess``.  ``region_of_row`` gives the ledger region of the
    referenced original rows (default: the row's own ``name``).
    """
    if len(ins) == 0:
        return ops, np.arange(len(ops), dtype=np.int64)
    keep = ins.value > 0
    ins = ins.where(keep)
    if len(ins) == 0:
        return ops, np.arange(len(ops), dtype=np.int64)
    order = np.lexsort((ins.tie, ins.key, ins.rank))
    ins = ins.where(order)
    seconds = np.where(ins.code == CODE["flush"], ins.value / np.where(ins.value2 > 0, ins.value2, np.inf),
                       ins.value)
    region = (region_of_row if region_of_row is not None else ops.name)[ins.ref_row]
    n0 = len(ops.ledger)
    led = ops.ledger
    ledger = Ledger(
        rank=np.concatenate((led.rank, ins.rank.astype(np.int32))),
        region=np.concatenate((led.region, region.astype(np.int32))),
        step=np.concatenate((led.step, ops.step[ins.ref_row].astype(np.int32))),
        seconds=np.concatenate((led.seconds, seconds)),
        kind=np.concatenate((led.kind, ins.kind)),
    )  # fmt: skip
    rows: dict[str, npt.NDArray[Any]] = {
        "rank": ins.rank.astype(np.int32), "code": ins.code, "step": ops.step[ins.ref_row],
        "name": np.full(len(ins), -1, np.int32), "value": ins.value, "value2": ins.value2,
        "cause": n0 + np.arange(len(ins), dtype=np.int64), "excess": seconds,
    }  # fmt: skip
    before = ins.key // KEY_SCALE
    # carry the original row index through the insertion in the ``tag`` column of a scratch copy
    marker = ops.replace_columns(tag=np.arange(len(ops), dtype=np.int32))
    rows["tag"] = np.full(len(ins), -1, np.int32)
    new = marker.with_inserted(rows, before, ledger=ledger)
    origin = new.tag.astype(np.int64)
    tag = np.where(origin >= 0, ops.tag[np.maximum(origin, 0)], 0).astype(np.int32)
    return new.replace_columns(tag=tag), origin
