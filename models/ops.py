"""Per-rank operation lists in columnar form, and the cause ledger.

An application model emits, for every rank, the ordered list of activities it
performs (region markers, compute, MPI operations).  Perturbation models insert
more (noise, overhead, flush, swap).  Everything is kept as numpy columns, one
row per operation, sorted by ``(rank, seq)``; no per-operation Python objects.

Actions and their codes come from :mod:`waitlab.models.vocabulary` (declared
once; the native parts include the header generated from it).

Examples
--------
>>> b = OpBuilder(n_ranks=2)
>>> b.add("compute", ranks=[0, 1], value=[2.0, 1.0], region="solve")
>>> b.add("send", ranks=0, peer=1, value=8)
>>> b.add("recv", ranks=1, peer=0, value=8)
>>> ops = b.build()
>>> ops.per_rank_counts().tolist()
[2, 2]
>>> [ACTIONS[c] for c in ops.code[ops.rank == 1]]
['compute', 'recv']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.models.vocabulary import (
    ACTIONS,
    CODE,
    COLLECTIVE_ACTIONS,
    LOCAL_ACTIONS,
    MPI_ACTIONS,
    RECV_ACTIONS,
    SEND_ACTIONS,
)

__all__ = [
    "ACTIONS",
    "ANY_TAG",
    "CAUSE_KINDS",
    "CODE",
    "COLLECTIVE_ACTIONS",
    "LOCAL_ACTIONS",
    "MPI_ACTIONS",
    "Ledger",
    "OpBuilder",
    "OpTable",
    "channel_tags",
    "seq_within_rank",
]

#: MPI_ANY_TAG as SMPI's tracer writes it: the tag of a receive of any tag, and of its request's wait and test lines.
ANY_TAG = -444
#: Actions whose tag names a point-to-point channel (:func:`channel_tags`).
_CHANNEL_ACTIONS = (*SEND_ACTIONS, *RECV_ACTIONS, "wait", "test")

#: Kinds of cause in the ledger (DESIGN.md section 8).
CAUSE_KINDS: tuple[str, ...] = ("imbalance", "noise", "overhead", "swap", "flush", "link")


def seq_within_rank(rank: npt.NDArray[np.int32], n_ranks: int,
                    counts: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.int32]:
    """Position of each row within its rank, for rows already sorted by rank (``counts``: the rows of each rank,
    when known).

    >>> seq_within_rank(np.array([0, 0, 1, 1, 1], np.int32), 3).tolist()
    [0, 1, 0, 1, 2]
    """
    if counts is None:
        counts = np.bincount(rank, minlength=n_ranks)
    seq = np.arange(rank.size, dtype=ref_dtype(rank.size))
    seq -= np.repeat((np.cumsum(counts) - counts).astype(seq.dtype), counts)
    return seq.astype(np.int32, copy=False)


def _code_mask(codes: npt.NDArray[np.int8], names: Sequence[str] | frozenset[str]) -> npt.NDArray[np.bool_]:
    return np.isin(codes, np.array([CODE[n] for n in names], dtype=np.int8))


@dataclass(frozen=True)
class Ledger:
    """Every injected excess: who, where, when, how much and why (DESIGN.md section 8).

    Columns are parallel numpy arrays; ``region`` and ``kind`` index into
    ``OpTable.names`` and :data:`CAUSE_KINDS` respectively.
    """

    rank: npt.NDArray[np.int32]
    region: npt.NDArray[np.int32]
    step: npt.NDArray[np.int32]
    seconds: npt.NDArray[np.float64]
    kind: npt.NDArray[np.int8]

    def __len__(self) -> int:
        return int(self.rank.size)

    @classmethod
    def empty(cls) -> Ledger:
        """A ledger with no injected cause.

        >>> len(Ledger.empty())
        0
        """
        return cls(rank=np.zeros(0, np.int32), region=np.zeros(0, np.int32), step=np.zeros(0, np.int32),
                   seconds=np.zeros(0), kind=np.zeros(0, np.int8))

    def total(self, kind: str | None = None) -> float:
        """Total injected seconds, optionally of one cause kind."""
        if kind is None:
            return float(self.seconds.sum())
        return float(self.seconds[self.kind == CAUSE_KINDS.index(kind)].sum())


@dataclass(frozen=True)
class OpTable:
    """All operations of all ranks, sorted by (rank, seq).

    Attributes
    ----------
    n_ranks : int
    rank, seq : int32 arrays
        Owner rank and position within that rank's list.
    code : int8 array
        Index into :data:`ACTIONS`.
    step : int32 array
        BSP step (iteration) the operation belongs to, -1 outside steps.
    name : int32 array
        Index into ``names``: the region of enter/leave and of compute; -1 if none.
    value : float64 array
        Seconds for compute/overhead/noise/delay/swap/sleep; bytes for messages
        and collectives (send count of alltoall); bytes for flush.
    value2 : float64 array
        Second numeric argument: receive bytes (alltoall, sendRecv), flops of
        reductions, flush rate (bytes/s).
    peer : int32 array
        Destination (send), source (recv), root (rooted collectives), else -1.
    tag : int32 array
    cause : int64 array
        Row of ``ledger`` this operation's excess belongs to, -1 if none.
    excess : float64 array
        Seconds of ``value`` that were injected as a cause (removed by counterfactuals).
    names : tuple of str
        String table for ``name`` and ``ledger.region``.
    ledger : Ledger
    comm : int32 array
        Communicator of MPI operations: 0 is MPI_COMM_WORLD (or a communicator with its ranks in its order),
        ``k >= 1`` the communicator whose world ranks, in communicator-rank order, are ``comms[k - 1]``.
        Defaults to all zeros.
    comms : tuple of tuple of int
        Members (world ranks) of communicators 1, 2, ...
    """

    n_ranks: int
    rank: npt.NDArray[np.int32]
    seq: npt.NDArray[np.int32]
    code: npt.NDArray[np.int8]
    step: npt.NDArray[np.int32]
    name: npt.NDArray[np.int32]
    value: npt.NDArray[np.float64]
    value2: npt.NDArray[np.float64]
    peer: npt.NDArray[np.int32]
    tag: npt.NDArray[np.int32]
    cause: npt.NDArray[np.int64]
    excess: npt.NDArray[np.float64]
    names: tuple[str, ...]
    ledger: Ledger
    comm: npt.NDArray[np.int32] = None  # type: ignore[assignment]  # filled with zeros by __post_init__
    comms: tuple[tuple[int, ...], ...] = ()

    COLUMNS = ("rank", "seq", "code", "step", "name", "value", "value2", "peer", "tag", "cause", "excess", "comm")

    def __post_init__(self) -> None:
        if self.comm is None:
            object.__setattr__(self, "comm", np.zeros(self.rank.size, np.int32))

    def __len__(self) -> int:
        return int(self.rank.size)

    def per_rank_counts(self) -> npt.NDArray[np.int64]:
        """Number of operations of each rank."""
        return np.bincount(self.rank, minlength=self.n_ranks)

    def mask(self, actions: Sequence[str] | frozenset[str]) -> npt.NDArray[np.bool_]:
        """Boolean mask of rows whose action is one of ``actions``."""
        return _code_mask(self.code, actions)

    def columns(self) -> dict[str, npt.NDArray[Any]]:
        return {c: getattr(self, c) for c in self.COLUMNS}

    def replace_columns(self, **cols: npt.NDArray[Any]) -> OpTable:
        """A copy with some columns replaced (same rows)."""
        data: dict[str, Any] = self.columns()
        data.update(cols)
        return OpTable(n_ranks=self.n_ranks, names=self.names, ledger=self.ledger, comms=self.comms, **data)

    def take(self, index: npt.NDArray[np.int64]) -> OpTable:
        """Rows ``index`` (a selection or reordering); ``seq`` is renumbered per rank."""
        data = {c: a[index] for c, a in self.columns().items()}
        out = OpTable(n_ranks=self.n_ranks, names=self.names, ledger=self.ledger, comms=self.comms, **data)
        return out.renumbered()

    def renumbered(self) -> OpTable:
        """Sort stably by (rank, seq) and renumber ``seq`` as 0..n-1 within each rank."""
        order = np.lexsort((self.seq, self.rank))
        data = {c: a[order] for c, a in self.columns().items()}
        data["seq"] = seq_within_rank(data["rank"], self.n_ranks)
        return OpTable(n_ranks=self.n_ranks, names=self.names, ledger=self.ledger, comms=self.comms, **data)

    def without_causes(self, cause_mask: npt.NDArray[np.bool_]) -> OpTable:
        """The same operations with the excess of the selected ledger rows removed.

        ``cause_mask`` is a boolean array over ledger rows.  Operations whose
        whole value was the excess (noise, overhead, ...) keep a zero duration,
        so the operation structure (and message matching) is unchanged.
        """
        hit = self.cause >= 0
        hit[hit] = np.asarray(cause_mask, dtype=bool)[self.cause[hit]]  # (an empty ledger has no rows to index)
        # a flush's value is bytes and its excess seconds: removing its cause removes the whole flush
        removed = np.where(self.code == CODE["flush"], self.value, self.excess)
        value = np.where(hit, np.maximum(self.value - removed, 0.0), self.value)
        excess = np.where(hit, 0.0, self.excess)
        return self.replace_columns(value=value, excess=excess)

    def with_inserted(self, rows: dict[str, npt.NDArray[Any]], before_seq: npt.NDArray[np.int64],
                      names: tuple[str, ...] | None = None, ledger: Ledger | None = None) -> OpTable:
        """Insert new operations, each before operation ``before_seq`` of its rank.

        ``rows`` holds columns of the new operations (``rank`` required, missing
        columns get defaults).  Several rows inserted before the same operation
        keep their given order.  ``before_seq`` equal to the rank's length appends.
        """
        n = int(np.asarray(rows["rank"]).size)
        new = _defaults(n)
        new.update({k: np.asarray(v) for k, v in rows.items()})
        # Sort key: existing op i of a rank -> 2*i+1; inserted before op i -> 2*i, stable by input order.
        old_key = 2 * self.seq.astype(np.int64) + 1
        new_key = 2 * np.asarray(before_seq, dtype=np.int64)
        data = {c: np.concatenate((getattr(self, c), new[c].astype(getattr(self, c).dtype)))
                for c in self.COLUMNS}
        key = np.concatenate((old_key, new_key))
        tie = np.concatenate((np.ones(len(self), dtype=np.int64), np.zeros(n, dtype=np.int64)))
        order = np.lexsort((np.arange(key.size), tie, key, data["rank"]))
        data = {c: a[order] for c, a in data.items()}
        data["seq"] = seq_within_rank(data["rank"], self.n_ranks)
        return OpTable(n_ranks=self.n_ranks, names=names or self.names, ledger=ledger or self.ledger,
                       comms=self.comms, **data)


def _defaults(n: int) -> dict[str, npt.NDArray[Any]]:
    return {
        "rank": np.zeros(n, np.int32), "seq": np.zeros(n, np.int32), "code": np.zeros(n, np.int8),
        "step": np.full(n, -1, np.int32), "name": np.full(n, -1, np.int32),
        "value": np.zeros(n, np.float64), "value2": np.zeros(n, np.float64),
        "peer": np.full(n, -1, np.int32), "tag": np.zeros(n, np.int32),
        "cause": np.full(n, -1, np.int64), "excess": np.zeros(n, np.float64), "comm": np.zeros(n, np.int32),
    }  # fmt: skip


#: dtype of every column of an :class:`OpTable`, and of every column of a :class:`Ledger`.
_DTYPES: dict[str, np.dtype[Any]] = {c: a.dtype for c, a in _defaults(0).items()}
_LEDGER_DTYPES: dict[str, np.dtype[Any]] = {c: getattr(Ledger.empty(), c).dtype
                                            for c in ("rank", "region", "step", "seconds", "kind")}
#: A block's cause and excess when it records none.
_NO_CAUSE = np.asarray(-1, np.int64)
_NO_EXCESS = np.asarray(0.0, np.float64)


def _column(x: npt.ArrayLike, dtype: type[np.generic], n: int) -> npt.NDArray[Any]:
    """Argument ``x`` of :meth:`OpBuilder.add` as ``dtype``: a 0-d array for a scalar (one value for the block),
    else a copy spread to ``n`` rows (numpy's broadcasting rules and errors).

    >>> _column(2, np.int32, 3).shape, _column([1.0], np.float64, 3).tolist()
    ((), [1.0, 1.0, 1.0])
    """
    a = np.array(x, dtype=dtype)
    if a.ndim == 0 or a.shape == (n,):
        return a
    return np.broadcast_to(a, (n,)).copy()


def _spread(parts: Sequence[npt.NDArray[Any]], sizes: Sequence[int], dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """The concatenation of ``parts``, a 0-d part standing for ``sizes[i]`` copies of its value.

    >>> _spread([np.asarray(7), np.array([1, 2])], [3, 2], np.dtype(np.int64)).tolist()
    [7, 7, 7, 1, 2]
    """
    scalar = [p.ndim == 0 for p in parts]
    out = np.repeat(np.array([p if s else 0 for p, s in zip(parts, scalar, strict=True)], dtype=dtype), sizes)
    if not all(scalar):  # then the arrays over their rows
        end = 0
        for p, s, k in zip(parts, scalar, sizes, strict=True):
            end += k
            if not s:
                out[end - k:end] = p
    return out


@dataclass
class OpBuilder:
    """Accumulates vectorised blocks of operations, then sorts them into an :class:`OpTable`.

    Each :meth:`add` call is one *slot*: it emits one operation for each rank in
    ``ranks`` (scalars broadcast).  A rank's operations are ordered by the order
    of the ``add`` calls, so a BSP step is written as a sequence of ``add`` calls
    over all ranks.  Excess seconds passed with ``excess=`` and ``cause_kind=``
    are recorded in the cause ledger.
    """

    n_ranks: int
    _blocks: list[dict[str, npt.NDArray[Any]]] = field(default_factory=list)
    _names: dict[str, int] = field(default_factory=dict)
    _ledger: list[dict[str, npt.NDArray[Any]]] = field(default_factory=list)
    _n_ledger: int = 0
    _comms: dict[tuple[int, ...], int] = field(default_factory=dict)

    def name_id(self, name: str) -> int:
        """Index of ``name`` in the string table (added if new)."""
        if name not in self._names:
            self._names[name] = len(self._names)
        return self._names[name]

    def comm_id(self, members: Sequence[int]) -> int:
        """Id (1, 2, ...) of the sub-communicator of ``members`` (world ranks in communicator-rank order), added if
        new; the world (all ranks in order) is 0."""
        key = tuple(int(m) for m in members)
        if key == tuple(range(self.n_ranks)):
            return 0
        if key not in self._comms:
            self._comms[key] = len(self._comms) + 1
        return self._comms[key]

    def add(
        self,
        action: str,
        ranks: npt.ArrayLike,
        *,
        step: npt.ArrayLike = -1,
        value: npt.ArrayLike = 0.0,
        value2: npt.ArrayLike = 0.0,
        peer: npt.ArrayLike = -1,
        tag: npt.ArrayLike = 0,
        region: str | None = None,
        excess: npt.ArrayLike | None = None,
        cause_kind: str = "imbalance",
        comm: int = 0,
    ) -> None:
        """Emit ``action`` once for each rank in ``ranks`` (in rank order of the block); ``comm`` is the
        communicator of a collective (:meth:`comm_id`, 0: the world)."""
        if action not in CODE:
            raise ValueError(f"unknown action {action!r}")
        r = np.array(ranks, dtype=np.int32, ndmin=1)  # a copy: the block and the ledger keep it until build()
        n = r.size
        if n == 0:
            return
        if r.min() < 0 or r.max() >= self.n_ranks:
            raise ValueError(f"rank out of range 0..{self.n_ranks - 1} in {action}")
        rid = self.name_id(region) if region is not None else -1
        # every column but seq, which build() numbers; a scalar argument stays one 0-d value (build() spreads it)
        block: dict[str, npt.NDArray[Any]] = {
            "rank": r, "code": np.asarray(CODE[action], np.int8), "step": _column(step, np.int32, n),
            "value": _column(value, np.float64, n), "value2": _column(value2, np.float64, n),
            "peer": _column(peer, np.int32, n), "tag": _column(tag, np.int32, n),
            "name": np.asarray(rid, np.int32), "comm": _column(comm, np.int32, n),
            "cause": _NO_CAUSE, "excess": _NO_EXCESS,
        }  # fmt: skip
        if excess is not None:
            ex = _column(excess, np.float64, n)
            if (ex < 0).any():
                raise ValueError(f"negative excess in {action} of region {region}")
            block["excess"] = ex
            hit = ex > 0
            n_hit = int(np.count_nonzero(hit)) if ex.ndim else n * bool(hit)
            if n_hit:  # ledger rows: a 0-d column stands for n_hit copies (build() spreads them)
                first = self._n_ledger
                row: dict[str, npt.NDArray[Any]] = {
                    "rank": r, "region": np.asarray(rid, np.int32), "step": block["step"], "seconds": ex,
                    "kind": np.asarray(CAUSE_KINDS.index(cause_kind), np.int8), "size": np.asarray(n_hit),
                }  # fmt: skip
                if n_hit == n:
                    block["cause"] = np.arange(first, first + n, dtype=np.int64)
                else:
                    idx = np.flatnonzero(hit)
                    block["cause"] = ids = np.full(n, -1, np.int64)
                    ids[idx] = np.arange(first, first + n_hit, dtype=np.int64)
                    row.update(rank=r[idx], seconds=ex[idx])
                    if row["step"].ndim:
                        row["step"] = row["step"][idx]
                self._ledger.append(row)
                self._n_ledger += n_hit
        block["size"] = np.asarray(n)
        self._blocks.append(block)

    def build(self) -> OpTable:
        """Sort all blocks into one table ordered by (rank, slot).

        The builder hands its blocks over: it is empty afterwards (its string table and ledger stay).
        """
        if not self._blocks:
            cols = _defaults(0)
        else:
            # Blocks are in slot order, so a stable sort by rank is the (rank, slot) order (a radix sort of 16-bit
            # keys when the ranks fit).  One column at a time, each block's part dropped as soon as it is gathered:
            # the peak stays near one table (issue 15), not the blocks, their concatenation and the sorted copy.
            blocks, self._blocks = self._blocks, []
            sizes = np.array([int(b.pop("size")) for b in blocks], dtype=np.int64)
            sizes_list = sizes.tolist()
            n_rows = int(sizes.sum())
            rank = np.concatenate([b.pop("rank") for b in blocks])
            order = np.argsort(rank.astype(np.uint16) if self.n_ranks <= 1 << 16 else rank, kind="stable")
            counts = np.bincount(rank, minlength=self.n_ranks)
            del rank
            cols = {"rank": np.repeat(np.arange(self.n_ranks, dtype=np.int32), counts)}
            cols["seq"] = seq_within_rank(cols["rank"], self.n_ranks, counts)
            per_block: dict[str, npt.NDArray[Any]] = {}  # columns of one value in every block: that value
            for c in OpTable.COLUMNS[2:]:
                if any(b[c].ndim for b in blocks):
                    cols[c] = _spread([b.pop(c) for b in blocks], sizes_list, _DTYPES[c])[order]
                else:
                    per_block[c] = np.array([b.pop(c) for b in blocks], dtype=_DTYPES[c])
            for c, v in list(per_block.items()):
                bits = v.view(f"u{v.itemsize}")
                if (bits == bits[0]).all():  # the same value, bit for bit, everywhere
                    cols[c] = np.zeros(n_rows, v.dtype) if bits[0] == 0 else np.full(n_rows, v[0], v.dtype)
                    del per_block[c]
            if per_block:  # the others by the block of each sorted row (order dropped first: one of the two is held)
                slot = np.repeat(np.arange(len(blocks)), sizes)[order]
                del order
                cols.update({c: v[slot] for c, v in per_block.items()})
        if self._ledger:
            sizes_l = [int(x["size"]) for x in self._ledger]
            led = {k: _spread([x[k] for x in self._ledger], sizes_l, dt) for k, dt in _LEDGER_DTYPES.items()}
        else:
            led = {"rank": np.zeros(0, np.int32), "region": np.zeros(0, np.int32), "step": np.zeros(0, np.int32),
                   "seconds": np.zeros(0), "kind": np.zeros(0, np.int8)}  # fmt: skip
        names = tuple(sorted(self._names, key=self._names.__getitem__))
        data: dict[str, Any] = cols  # numpy columns (Any: OpTable also takes comms)
        comms = tuple(sorted(self._comms, key=self._comms.__getitem__))
        return OpTable(n_ranks=self.n_ranks, names=names, ledger=Ledger(**led), comms=comms, **data)


def comm_members(ops: OpTable) -> list[npt.NDArray[np.int64]]:
    """World ranks of every communicator of ``ops``, by id (0 = MPI_COMM_WORLD)."""
    return [np.arange(ops.n_ranks, dtype=np.int64), *(np.asarray(c, np.int64) for c in ops.comms)]


def local_ranks(ops: OpTable) -> npt.NDArray[np.int64]:
    """Table ``[comm id, world rank] -> rank within the communicator`` (-1 for non-members)."""
    members = comm_members(ops)
    table = np.full((len(members), ops.n_ranks), -1, np.int64)
    for c, m in enumerate(members):
        table[c, m] = np.arange(m.size)
    return table


def channel_tags(ops: OpTable) -> npt.NDArray[np.int32]:
    """The tag of each row as a key of its channel: ``ops.tag`` itself when at most one communicator carries
    point-to-point traffic, else one distinct tag 0, 1, ... per (communicator, tag) pair of the point-to-point,
    ``wait`` and ``test`` rows (MPI matches a message only on its own communicator; a duplicate of MPI_COMM_WORLD is
    another communicator).  MPI_ANY_TAG (:data:`ANY_TAG`) stays.  The trace writer writes these tags, since SimGrid's
    replay pairs ``send``/``recv`` lines by (source, destination, tag) on one communicator.

    >>> b = OpBuilder(2)
    >>> b.add("send", 0, peer=1, value=8, tag=5, comm=1)
    >>> b.add("send", 0, peer=1, value=8, tag=5)
    >>> b.add("recv", 1, peer=0, value=8, tag=5)
    >>> b.add("recv", 1, peer=0, value=8, tag=5, comm=1)
    >>> channel_tags(b.build()).tolist()
    [1, 0, 0, 1]
    """
    p2p = _code_mask(ops.code, _CHANNEL_ACTIONS)
    comm = ops.comm[p2p]
    if comm.size == 0 or (comm == comm[0]).all():
        return ops.tag
    rows = np.flatnonzero(p2p & (ops.tag != ANY_TAG))
    key = ops.comm[rows].astype(np.int64) * (1 << 32) + ops.tag[rows].astype(np.int64)
    out = ops.tag.copy()
    out[rows] = np.unique(key, return_inverse=True)[1].ravel()
    return out


def ref_dtype(n_rows: int) -> type[np.signedinteger[Any]]:
    """Type of the row-reference columns of a table of ``n_rows`` rows (ids stay below the row count)."""
    return np.int32 if n_rows < np.iinfo(np.int32).max else np.int64
