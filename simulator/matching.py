"""Message matching: which send meets which receive, and which call completes each request.

MPI's non-overtaking rule makes the k-th send of a (source, destination, tag, communicator) channel meet the k-th
receive of it; a ``wait`` completes the k-th pending request with its (rank, direction, peer, tag, communicator), and a
request no ``wait`` completes is completed by the next ``waitall`` of its rank.  The communicator enters as part of the
tag (:func:`channel_tags`).  Everything is vectorised over the operation table.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.errors import SimulationError
from waitlab.models.ops import ANY_TAG as ANY_TAG  # re-exported: the replay reader takes it from here
from waitlab.models.ops import OpTable, channel_tags
from waitlab.models.vocabulary import ACTIONS, CODE, RECV_ACTIONS, SEND_ACTIONS, VOCABULARY, lut, names_where

_IS_SEND = lut(SEND_ACTIONS)
_IS_RECV = lut(RECV_ACTIONS)
_IS_NONBLOCKING = lut(a.name for a in VOCABULARY if a.kind in ("send", "recv") and not a.blocking)
_IS_BLOCKING_P2P = lut(names_where(blocking=True))
_IS_COMPLETION = lut(("wait", "test"))


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


def resolve_any_tag(ops: OpTable) -> None:
    """Give every receive of MPI_ANY_TAG (tag :data:`ANY_TAG`) the tag of the message it matches, in place, and the
    ``wait`` and ``test`` rows of its request that tag.

    With a known source MPI matches deterministically: a rank's receives from one source, in the order they are
    posted, each take the first of the source's messages to the rank (in the order they were sent) that no earlier
    receive took and whose tag it accepts; a receive of MPI_ANY_TAG accepts any tag.  A ``wait`` or ``test`` of
    MPI_ANY_TAG names the oldest pending wildcard request of its source (SMPI writes the request's tag as posted, and
    SimGrid's replay keeps requests first in first out under (source, destination, tag); a ``wait`` removes it, a
    ``test`` does not).  A receive no message is left for keeps MPI_ANY_TAG: :func:`match_messages` names it."""
    is_recv = _IS_RECV[ops.code]
    wild = is_recv & (ops.tag == ANY_TAG)
    if not wild.any():
        return
    is_send = _IS_SEND[ops.code]
    starts = np.concatenate(([0], np.cumsum(ops.per_rank_counts())))
    completes_recv = _IS_COMPLETION[ops.code] & (ops.value2 != 0) & (ops.tag == ANY_TAG)
    channels = {(int(ops.peer[i]), int(ops.rank[i]), int(ops.comm[i])) for i in np.flatnonzero(wild)}
    for src, dst, comm in sorted(channels):  # a wildcard takes messages of its own communicator only
        on_src, on_dst = slice(starts[src], starts[src + 1]), slice(starts[dst], starts[dst + 1])
        sends = starts[src] + np.flatnonzero(is_send[on_src] & (ops.peer[on_src] == dst) & (ops.comm[on_src] == comm))
        taken = np.zeros(sends.size, bool)
        by_tag: dict[int, deque[int]] = {}
        for j, t in enumerate(ops.tag[sends].tolist()):
            by_tag.setdefault(t, deque()).append(j)
        first = 0  # every send before it is taken
        requests: deque[int] = deque()  # tags of the pending wildcard irecvs, oldest first
        rows = starts[dst] + np.flatnonzero((is_recv[on_dst] | completes_recv[on_dst]) & (ops.peer[on_dst] == src)
                                            & (ops.comm[on_dst] == comm))
        for i in rows.tolist():
            if completes_recv[i]:
                if requests:  # a test, like SimGrid's TestAction, puts the request it tested back at the end
                    ops.tag[i] = requests.popleft()
                    if ops.code[i] == CODE["test"]:
                        requests.append(int(ops.tag[i]))
                continue
            if wild[i]:
                while first < sends.size and taken[first]:
                    first += 1
                j = first if first < sends.size else -1
            else:
                queue = by_tag.get(int(ops.tag[i]), deque())
                while queue and taken[queue[0]]:
                    queue.popleft()
                j = queue[0] if queue else -1
            if j >= 0:
                taken[j] = True
                if wild[i]:
                    ops.tag[i] = ops.tag[sends[j]]
            if wild[i] and ops.code[i] == CODE["irecv"]:
                requests.append(int(ops.tag[i]))


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
    tags = channel_tags(ops)
    keys = _channel_keys(np.concatenate((ops.rank[s_idx], ops.peer[r_idx])).astype(np.int64),
                         np.concatenate((ops.peer[s_idx], ops.rank[r_idx])).astype(np.int64),
                         np.concatenate((tags[s_idx], tags[r_idx])).astype(np.int64), ops.n_ranks)
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
    _assign_waits(ops, match, tags)
    return match


def _assign_waits(ops: OpTable, match: npt.NDArray[np.int64], tags: npt.NDArray[np.int32]) -> None:
    is_nb = _IS_NONBLOCKING[ops.code]
    is_wait = ops.code == CODE["wait"]
    if not is_wait.any():
        return
    nb, wt = np.flatnonzero(is_nb), np.flatnonzero(is_wait)
    nb_recv = (ops.code[nb] == CODE["irecv"]).astype(np.int64)
    wt_recv = (ops.value2[wt] != 0).astype(np.int64)
    keys_nb = [ops.rank[nb].astype(np.int64), nb_recv, ops.peer[nb].astype(np.int64), tags[nb].astype(np.int64)]
    keys_wt = [ops.rank[wt].astype(np.int64), wt_recv, ops.peer[wt].astype(np.int64), tags[wt].astype(np.int64)]
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

    A request is completed by its matching ``wait``, else by the last ``test`` of it before the next request of its
    (direction, peer, tag) and the next ``waitall`` (:func:`_last_tests`), else by the first ``waitall`` after it on
    the same rank.  Blocking operations complete themselves.
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
    tests = np.flatnonzero(stock_tests(ops))
    if pending.size and tests.size:
        done[pending] = _last_tests(ops, pending, nb, tests)
        pending = nb[done[nb] < 0]
    if pending.size:
        wa = np.flatnonzero(ops.code == CODE["waitall"])
        # a waitall named after a call (a program's MPI_Sendrecv: isend, irecv, waitall) completes only that call's
        # requests, right before it; every other request goes to the next waitall of the program's own
        own = ops.name[pending] >= 0
        for rows, candidates in ((pending[own], wa), (pending[~own], wa[ops.name[wa] < 0])):
            done[rows] = _next_on_rank(ops, rows, candidates)
    return done


def stock_tests(ops: OpTable) -> npt.NDArray[np.bool_]:
    """The ``test`` rows that name a request (a stock trace's ``test src dst tag``; waitlab's layer writes its polls,
    which complete no request it tracks, with peer -1)."""
    return (ops.code == CODE["test"]) & (ops.peer >= 0)


def _last_tests(ops: OpTable, pending: npt.NDArray[np.int64], nb: npt.NDArray[np.int64],
                tests: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The row completing each of the requests ``pending`` (no ``wait`` completes them) among the ``tests`` of its
    (rank, direction, peer, tag), -1 where none: the last one after it, before the next request of that key and
    before the rank's next ``waitall``.  In a recording that test succeeded: the program tested until it did, and
    SMPI records no ``MPI_Wait`` of a request a test completed."""
    rows = np.concatenate((nb, tests))
    recv = np.concatenate((ops.code[nb] == CODE["irecv"], ops.value2[tests] != 0)).astype(np.int64)
    keys = [ops.rank[rows].astype(np.int64), recv, ops.peer[rows].astype(np.int64),
            channel_tags(ops)[rows].astype(np.int64)]
    order = np.lexsort((rows, *reversed(keys)))
    sk = [k[order] for k in keys]
    start = np.ones(order.size, bool)
    start[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in sk])
    group = np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
    is_req = order < nb.size
    owner = np.maximum.accumulate(np.where(is_req, np.arange(order.size), -1))  # the request each test follows
    test = ~is_req & (owner >= group)
    req_row, test_row = rows[order[owner[test]]], rows[order[test]]
    wa = np.flatnonzero((ops.code == CODE["waitall"]) & (ops.name < 0))
    limit = _next_on_rank(ops, req_row, wa)
    ok = (limit < 0) | (test_row < limit)
    last = np.full(len(ops), -1, np.int64)
    np.maximum.at(last, req_row[ok], test_row[ok])
    return last[pending]


def _next_on_rank(ops: OpTable, rows: npt.NDArray[np.int64], candidates: npt.NDArray[np.int64]
                  ) -> npt.NDArray[np.int64]:
    """The first of ``candidates`` after each of ``rows`` on the same rank (-1: none); rows are in (rank, seq)
    order."""
    if candidates.size == 0:
        return np.full(rows.size, -1, np.int64)
    p = np.minimum(np.searchsorted(candidates, rows), candidates.size - 1)
    after = (candidates[p] > rows) & (ops.rank[candidates[p]] == ops.rank[rows])
    return np.where(after, candidates[p], -1)
