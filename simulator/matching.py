"""Message matching: which send meets which receive, and which call completes each request.

MPI's non-overtaking rule makes the k-th send of a (source, destination, tag) channel meet the k-th receive of
it; a ``wait`` completes the k-th pending request with its (rank, direction, peer, tag), and a request no ``wait``
completes is completed by the next ``waitall`` of its rank.  Everything is vectorised over the operation table.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import SimulationError
from waitlab.models.ops import OpTable
from waitlab.models.vocabulary import ACTIONS, CODE, RECV_ACTIONS, SEND_ACTIONS, VOCABULARY, lut, names_where

_IS_SEND = lut(SEND_ACTIONS)
_IS_RECV = lut(RECV_ACTIONS)
_IS_NONBLOCKING = lut(a.name for a in VOCABULARY if a.kind in ("send", "recv") and not a.blocking)
_IS_BLOCKING_P2P = lut(names_where(blocking=True))


def group_cumcount(keys: list[npt.NDArray[Any]], order_key: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """For each row, how many earlier rows (by ``order_key``) share all ``keys``."""
    order = np.lexsort((order_key, *reversed(keys)))
    n = order.size
    if n == 0:
        return np.zeros(0, np.int64)
    sorted_keys = [k[order] for k in keys]
    new_group = np.ones(n, bool)
    new_group[1:] = np.logical_or.reduce([sk[1:] != sk[:-1] for sk in sorted_keys])
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(n), 0))
    out = np.empty(n, np.int64)
    out[order] = np.arange(n) - group_start
    return out


def _channel_keys(src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64], tag: npt.NDArray[np.int64],
                  n_ranks: int) -> npt.NDArray[np.int64]:
    """One sortable integer per (source, destination, tag) channel, comparable across all given rows."""
    t0 = int(tag.min())
    span = int(tag.max()) - t0 + 1
    if n_ranks * n_ranks * span < (1 << 62):
        return (src * n_ranks + dst) * span + (tag - t0)
    return np.unique(np.stack([src, dst, tag], axis=1), axis=0, return_inverse=True)[1].ravel().astype(np.int64)


def match_messages(ops: OpTable) -> npt.NDArray[np.int64]:
    """Message id per operation: sends and receives (and the ``wait`` completing them) share it.

    The k-th send from p to q with tag t matches the k-th receive on q from p
    with tag t (MPI non-overtaking order).  ``waitall`` gets -1 (it completes
    several requests; see :func:`completions`).
    """
    n = len(ops)
    match = np.full(n, -1, np.int64)
    is_send = _IS_SEND[ops.code]
    is_recv = _IS_RECV[ops.code]
    s_idx, r_idx = np.flatnonzero(is_send), np.flatnonzero(is_recv)
    if s_idx.size != r_idx.size:
        raise SimulationError(f"{s_idx.size} sends but {r_idx.size} receives in the trace: unmatched messages")
    if s_idx.size == 0:
        return match
    keys = _channel_keys(np.concatenate((ops.rank[s_idx], ops.peer[r_idx])).astype(np.int64),
                         np.concatenate((ops.peer[s_idx], ops.rank[r_idx])).astype(np.int64),
                         np.concatenate((ops.tag[s_idx], ops.tag[r_idx])).astype(np.int64), ops.n_ranks)
    s_key, r_key = keys[: s_idx.size], keys[s_idx.size:]
    # Rows are in (rank, seq) order, so a stable sort by (src, dst, tag) keeps each channel's messages in
    # program order on both sides: the k-th send of a channel meets the k-th receive of the same channel.
    s_ord = np.argsort(s_key, kind="stable")
    r_ord = np.argsort(r_key, kind="stable")
    ok = s_key[s_ord] == r_key[r_ord]
    if not ok.all():
        j = int(np.flatnonzero(~ok)[0])
        bad = int(s_idx[s_ord[j]]) if s_key[s_ord[j]] < r_key[r_ord[j]] else int(r_idx[r_ord[j]])
        raise SimulationError(f"message of rank {ops.rank[bad]} operation {ops.seq[bad]} "
                              f"({ACTIONS[ops.code[bad]]} peer {ops.peer[bad]} tag {ops.tag[bad]}) has no partner")
    rows = np.empty(2 * s_idx.size, np.int64)
    rows[0::2] = s_idx[s_ord]
    rows[1::2] = r_idx[r_ord]
    ids = np.arange(rows.size // 2, dtype=np.int64)
    match[rows[0::2]] = ids
    match[rows[1::2]] = ids
    # A `wait` completes the oldest pending request of its (src, dst, tag) on its rank.
    _assign_waits(ops, match)
    return match


def _assign_waits(ops: OpTable, match: npt.NDArray[np.int64]) -> None:
    is_nb = _IS_NONBLOCKING[ops.code]
    is_wait = ops.code == CODE["wait"]
    if not is_wait.any():
        return
    nb, wt = np.flatnonzero(is_nb), np.flatnonzero(is_wait)
    nb_recv = (ops.code[nb] == CODE["irecv"]).astype(np.int64)
    wt_recv = (ops.value2[wt] != 0).astype(np.int64)
    keys_nb = [ops.rank[nb].astype(np.int64), nb_recv, ops.peer[nb].astype(np.int64), ops.tag[nb].astype(np.int64)]
    keys_wt = [ops.rank[wt].astype(np.int64), wt_recv, ops.peer[wt].astype(np.int64), ops.tag[wt].astype(np.int64)]
    k_nb = group_cumcount(keys_nb, ops.seq[nb])
    k_wt = group_cumcount(keys_wt, ops.seq[wt])
    # Join waits to requests on (rank, recv?, peer, tag, k).
    nb_key = np.rec.fromarrays([*keys_nb, k_nb])
    wt_key = np.rec.fromarrays([*keys_wt, k_wt])
    order = np.argsort(nb_key, order=list(nb_key.dtype.names or ()))
    pos = np.searchsorted(nb_key[order], wt_key)
    pos = np.minimum(pos, max(order.size - 1, 0))
    found = order.size > 0
    hit = nb_key[order][pos] == wt_key if found else np.zeros(wt.size, bool)
    if not np.all(hit):
        bad = wt[int(np.flatnonzero(~hit)[0])]
        raise SimulationError(f"wait of rank {ops.rank[bad]} operation {ops.seq[bad]} completes no pending request "
                              f"(no isend or irecv to or from rank {ops.peer[bad]} with tag {ops.tag[bad]} is left for "
                              "it; fix: a wait completes the oldest request of its partner and tag posted before it)")
    match[wt] = match[nb[order[pos]]]


def completions(ops: OpTable, match: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Row of the operation that completes each non-blocking request (-1 for other rows).

    A request is completed by its matching ``wait`` or else by the first
    ``waitall`` after it on the same rank.  Blocking operations complete themselves.
    """
    n = len(ops)
    done = np.full(n, -1, np.int64)
    blocking = _IS_BLOCKING_P2P[ops.code]
    done[blocking] = np.flatnonzero(blocking)
    nb = np.flatnonzero(_IS_NONBLOCKING[ops.code])
    if nb.size == 0:
        return done
    waits = np.flatnonzero(ops.code == CODE["wait"])
    if waits.size:
        # (rank, match) of a wait identifies the request it completes
        wk = ops.rank[waits].astype(np.int64) * (match.max() + 2) + match[waits]
        nk = ops.rank[nb].astype(np.int64) * (match.max() + 2) + match[nb]
        o = np.argsort(wk)
        p = np.minimum(np.searchsorted(wk[o], nk), o.size - 1)
        hit = wk[o][p] == nk
        done[nb[hit]] = waits[o[p[hit]]]
    pending = nb[done[nb] < 0]
    if pending.size:
        wa = np.flatnonzero(ops.code == CODE["waitall"])
        # a waitall named after a call (a program's MPI_Sendrecv: isend, irecv, waitall) completes only that call's
        # requests, right before it; every other request goes to the next waitall of the program's own
        own = ops.name[pending] >= 0
        for rows, candidates in ((pending[own], wa), (pending[~own], wa[ops.name[wa] < 0])):
            done[rows] = _next_on_rank(ops, rows, candidates)
    return done


def _next_on_rank(ops: OpTable, rows: npt.NDArray[np.int64], candidates: npt.NDArray[np.int64]
                  ) -> npt.NDArray[np.int64]:
    """The first of ``candidates`` after each of ``rows`` on the same rank (-1: none); rows are in (rank, seq)
    order."""
    if candidates.size == 0:
        return np.full(rows.size, -1, np.int64)
    p = np.minimum(np.searchsorted(candidates, rows), candidates.size - 1)
    after = (candidates[p] > rows) & (ops.rank[candidates[p]] == ops.rank[rows])
    return np.where(after, candidates[p], -1)
