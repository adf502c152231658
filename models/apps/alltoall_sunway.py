"""He et al.'s alltoall algorithms (section 5.4.2) as point-to-point schedules, and the topology-aware choice.

He et al. built, "for large systems, the traditional ring, the 2-level ring, simple spread, pair-wise and
aggregated row-column exchange", and choose among them "from the topology shape of the physical nodes and
the network routing: how tightly or loosely the job's nodes are coupled" (section 5.4.2).  The paper gives
no pseudo-code; the schedules below are the textbook forms of those names:

``ring``
    Step ``i = 1 .. p-1``: rank ``r`` sends its block to ``(r + i) % p`` and receives from ``(r - i) % p``
    (MVAPICH's large-message alltoall, the paper's baseline; SMPI's ``ring`` does the same with sendrecv).
``two_level_ring``
    Ranks are grouped by supernode.  Level 1: a ring inside every supernode.  Level 2: for supernode offset
    ``j = 1 .. k-1`` and ``t = 0 .. M-1`` (``M`` = largest group), member ``l`` of supernode ``g`` sends to
    member ``(l + t) % M`` of supernode ``(g + j) % k`` (skipped when that member does not exist): every
    level-2 step crosses supernodes, every level-1 step stays inside one.
``pairwise``
    Step ``i``: partner ``r XOR i`` when ``p`` is a power of two, else the ring order (as MPICH does).
``simple_spread``
    MPICH's "scattered" algorithm: ``isend``/``irecv`` to ``(r + i)`` / from ``(r - i)`` for a window of
    ``window`` offsets at a time, then ``waitall``.
``row_column``
    Aggregated row-column exchange: ranks form an ``R x C`` grid (``C`` the largest divisor of ``p`` not
    above ``sqrt p``); a ring inside each row carries, to row-mate in column ``c``, the ``R`` blocks bound
    for column ``c`` (``R x n`` bytes); then a ring inside each column carries ``C x n`` bytes per message.

A :class:`Schedule` is a list of steps, each a set of messages ``(src, dst, bytes)``; :func:`emit_schedule`
writes one as ``irecv``/``isend``/``waitall`` per step and rank, and :func:`predict_seconds` prices it with a
step model of the platform (per step: the busiest link, plus one start-up per message of the busiest rank).
With static D-mod-k routes (``NetworkShape.uplinks > 0``, :mod:`waitlab.models.apps.dmodk_routes`) the links
are the node links and every supernode up-port and top-switch down-port, so two messages to destinations
congruent modulo the port count collide as they do in the simulator; otherwise a supernode's uplink is one
aggregated link.  :func:`choose_algorithm` is the topology-aware choice: the candidate with the lowest
predicted time for this placement.  Nothing in it is fitted to simulated or measured alltoall times.

Examples
--------
>>> s = schedule("ring", np.zeros(4, np.int64), 8)
>>> len(s.steps), s.steps[0][1].tolist()
(3, [1, 2, 3, 0])
>>> sn = np.array([0, 0, 1, 1])
>>> [st[1].tolist() for st in schedule("two_level_ring", sn, 8).steps]
[[1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]]
>>> check_complete(schedule("row_column", np.zeros(6, np.int64), 8), 6, 8)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from waitlab.models.apps.dmodk_routes import max_link_bytes
from waitlab.models.ops import OpBuilder

__all__ = ["SUNWAY_ALLTOALL_ALGORITHMS", "NetworkShape", "Schedule", "check_complete", "choose_algorithm",
           "emit_schedule", "predict_seconds", "schedule"]

#: He et al.'s alltoall algorithms (section 5.4.2), as point-to-point schedules.
SUNWAY_ALLTOALL_ALGORITHMS: tuple[str, ...] = ("ring", "two_level_ring", "simple_spread", "pairwise", "row_column")
#: Tag of their messages.
SUNWAY_TAG = 7002

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Schedule:
    """An alltoall as steps of messages; ``steps[i] = (src, dst, nbytes)`` arrays of one step."""

    algorithm: str
    n_ranks: int
    steps: list[tuple[IntArray, IntArray, npt.NDArray[np.float64]]] = field(default_factory=list)

    def add(self, src: IntArray, dst: IntArray, nbytes: float | npt.NDArray[np.float64]) -> None:
        """Append one step (messages with ``src == dst`` are dropped)."""
        keep = src != dst
        if keep.any():
            b = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), src.shape)[keep]
            self.steps.append((src[keep].astype(np.int64), dst[keep].astype(np.int64), b.copy()))


def _groups(supernode_of_rank: IntArray) -> list[IntArray]:
    ids = np.unique(supernode_of_rank)
    return [np.flatnonzero(supernode_of_rank == g).astype(np.int64) for g in ids]


def _grid(p: int) -> tuple[int, int]:
    c = max(d for d in range(1, math.isqrt(p) + 1) if p % d == 0)
    return p // c, c


def schedule(algorithm: str, supernode_of_rank: npt.ArrayLike, nbytes: float, *, window: int = 8) -> Schedule:
    """The schedule of ``algorithm`` for ranks in the given supernodes, ``nbytes`` per rank pair.

    Raises
    ------
    ValueError
        Unknown algorithm or a window below 1.
    """
    sn = np.asarray(supernode_of_rank, dtype=np.int64)
    p = len(sn)
    ranks = np.arange(p, dtype=np.int64)
    out = Schedule(algorithm, p)
    if algorithm == "ring" or (algorithm == "pairwise" and p & (p - 1)):
        for i in range(1, p):
            out.add(ranks, (ranks + i) % p, nbytes)
    elif algorithm == "pairwise":
        for i in range(1, p):
            out.add(ranks, ranks ^ i, nbytes)
    elif algorithm == "simple_spread":
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        for first in range(1, p, window):
            offs = np.arange(first, min(p, first + window), dtype=np.int64)
            out.add(np.repeat(ranks, len(offs)), (ranks[:, None] + offs[None, :]).ravel() % p, nbytes)
    elif algorithm == "two_level_ring":
        groups = _groups(sn)
        depth = max(len(g) for g in groups)
        for i in range(1, depth):  # level 1: rings inside the supernodes, run side by side
            src = np.concatenate([g for g in groups if len(g) > i] or [np.zeros(0, np.int64)])
            dst = np.concatenate([g[(np.arange(len(g)) + i) % len(g)] for g in groups if len(g) > i]
                                 or [np.zeros(0, np.int64)])
            out.add(src, dst, nbytes)
        k = len(groups)
        for j in range(1, k):  # level 2: supernode g -> g + j, members matched round robin
            for t in range(depth):
                src_l, dst_l = [], []
                for g, members in enumerate(groups):
                    target = groups[(g + j) % k]
                    slot = (np.arange(len(members)) + t) % depth
                    ok = slot < len(target)
                    src_l.append(members[ok])
                    dst_l.append(target[slot[ok]])
                out.add(np.concatenate(src_l), np.concatenate(dst_l), nbytes)
    elif algorithm == "row_column":
        rows, cols = _grid(p)
        row, col = ranks // cols, ranks % cols
        for i in range(1, cols):  # rows: to the row-mate in column c go the `rows` blocks bound for column c
            out.add(ranks, row * cols + (col + i) % cols, rows * nbytes)
        for i in range(1, rows):  # columns: `cols` blocks (one from each row-mate) bound for that row
            out.add(ranks, ((row + i) % rows) * cols + col, cols * nbytes)
    else:
        raise ValueError(f"unknown alltoall algorithm {algorithm!r}; use one of: "
                         f"{', '.join(SUNWAY_ALLTOALL_ALGORITHMS)}")
    return out


def check_complete(sched: Schedule, p: int, nbytes: float) -> None:
    """Raise AssertionError unless every rank pair's block is delivered (direct schedules) or the bytes add up.

    Direct schedules must send each ordered pair exactly once; the row-column exchange must move
    ``(C - 1) R n + (R - 1) C n`` bytes per rank.
    """
    src = np.concatenate([s for s, _, _ in sched.steps]) if sched.steps else np.zeros(0, np.int64)
    dst = np.concatenate([d for _, d, _ in sched.steps]) if sched.steps else np.zeros(0, np.int64)
    b = np.concatenate([x for _, _, x in sched.steps]) if sched.steps else np.zeros(0)
    if sched.algorithm == "row_column":
        rows, cols = _grid(p)
        sent = np.bincount(src, weights=b, minlength=p)
        assert np.allclose(sent, ((cols - 1) * rows + (rows - 1) * cols) * nbytes), sent
        return
    pairs = np.bincount(src * p + dst, minlength=p * p).reshape(p, p)
    expect = 1 - np.eye(p, dtype=np.int64)
    assert (pairs == expect).all(), "some pair is missing or sent twice"


def emit_schedule(builder: OpBuilder, sched: Schedule, *, step: int = -1, tag: int = SUNWAY_TAG) -> None:
    """Append ``sched`` to ``builder``: per schedule step, every rank's ``irecv``s, ``isend``s, ``waitall``."""
    for src, dst, nbytes in sched.steps:
        builder.add("irecv", dst, step=step, value=nbytes, peer=src, tag=tag)
        builder.add("isend", src, step=step, value=nbytes, peer=dst, tag=tag)
        builder.add("waitall", np.unique(np.concatenate([src, dst])).astype(np.int32), step=step)


@dataclass(frozen=True)
class NetworkShape:
    """What the step model needs of a platform (MPI-level figures, B/s and s).

    Attributes
    ----------
    node_bandwidth : float
        One node's network bandwidth (each direction).
    uplink_bandwidth : float
        One supernode's uplink to the central network (each direction).
    latency : float
        Start-up time of one message (its latency plus the per-message overheads); a rank pays it once per
        message it sends or receives in a step, one after the other (SMPI charges ``smpi/os``/``smpi/or`` as
        CPU time of the rank).
    uplinks : int
        0: one aggregated uplink per supernode of ``uplink_bandwidth``, shared perfectly (the "balanced"
        rendering).  ``U > 0``: ``U`` parallel up-ports of ``node_bandwidth`` each, chosen per message by the
        static D-mod-k rule (:mod:`waitlab.models.apps.dmodk_routes`; the "d_mod_k" rendering).
    """

    node_bandwidth: float
    uplink_bandwidth: float
    latency: float
    uplinks: int = 0


def predict_seconds(sched: Schedule, node_of_rank: npt.ArrayLike, leaf_size: int, shape: NetworkShape) -> float:
    """Step-model time of ``sched``: per step, latencies + the busiest node link or supernode uplink.

    A step costs ``shape.latency`` times the most messages one rank sends (or receives) in it, plus the bytes
    of the busiest link over its bandwidth.

    Messages inside a node cost nothing here (shared memory); a node link carries the bytes its ranks
    send to (or receive from) other nodes; an uplink carries the bytes that leave (or enter) its supernode.
    With ``shape.uplinks > 0`` every message follows its D-mod-k route and the busiest single link (node
    link, leaf up-port or top-switch down-port, all of ``node_bandwidth``) sets the step's time.
    """
    node = np.asarray(node_of_rank, dtype=np.int64)
    n_nodes = int(node.max()) + 1
    n_sn = n_nodes // leaf_size + 1
    total = 0.0
    for src, dst, b in sched.steps:
        ns, nd = node[src], node[dst]
        off = ns != nd
        ss, sd = ns // leaf_size, nd // leaf_size
        cross = ss != sd
        per_rank = max(np.bincount(src).max(initial=0), np.bincount(dst).max(initial=0))
        start = shape.latency * float(per_rank)
        if shape.uplinks > 0:
            total += start + max_link_bytes(ns, nd, b, leaf_size, shape.uplinks) / shape.node_bandwidth
            continue
        t_node = max(np.bincount(ns[off], b[off], n_nodes).max(initial=0.0),
                     np.bincount(nd[off], b[off], n_nodes).max(initial=0.0)) / shape.node_bandwidth
        t_up = max(np.bincount(ss[cross], b[cross], n_sn).max(initial=0.0),
                   np.bincount(sd[cross], b[cross], n_sn).max(initial=0.0)) / shape.uplink_bandwidth
        total += start + max(t_node, t_up)
    return total


def choose_algorithm(node_of_rank: npt.ArrayLike, leaf_size: int, shape: NetworkShape, nbytes: float,
                     candidates: tuple[str, ...] = SUNWAY_ALLTOALL_ALGORITHMS) -> tuple[str, dict[str, float]]:
    """The topology-aware choice: the candidate with the lowest :func:`predict_seconds` on this placement.

    Ties go to the earlier candidate (``ring`` first: the choice only leaves ring when the model predicts
    a gain).  Returns the chosen name and every candidate's predicted seconds.
    """
    node = np.asarray(node_of_rank, dtype=np.int64)
    sn = node // leaf_size
    pred = {a: predict_seconds(schedule(a, sn, nbytes), node, leaf_size, shape) for a in candidates}
    best = min(candidates, key=lambda a: (round(pred[a], 12), candidates.index(a)))
    return best, pred
