"""Message matching: which send meets which receive, and which call completes each request.

MPI's non-overtaking rule makes the k-th send of a (source, destination, tag, communicator) channel meet the k-th
receive of it; a ``wait`` completes the oldest request of its rank still pending with its (source, destination, tag,
communicator) (not one a ``waitall``, a ``test`` or MPI_Request_free completed before: :func:`request_pairs`), and a
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
from waitlab.models.requests import completing_tests
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
    # a wait has the message of the request it completes (request_pairs)
    cons, reqs = request_pairs(ops, tags)
    wait = ops.code[cons] == CODE["wait"]
    match[cons[wait]] = match[reqs[wait]]
    return match


def _segments(keys: list[npt.NDArray[Any]]) -> npt.NDArray[np.bool_]:
    """Where a run of equal ``keys`` (already sorted) starts."""
    start = np.ones(keys[0].size, bool)
    if keys[0].size:
        start[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in keys])
    return start


def request_pairs(ops: OpTable, tags: npt.NDArray[np.int32] | None = None
                  ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(consumers, requests)``: rows of the ``wait`` (or ``test``) completing each request one completes, and the
    request's row, pairwise (sorted by consumer key, then row).

    The rule of SimGrid's replay (``RequestStorage`` of ``smpi_replay.cpp``): a rank's pending requests are kept per
    (source, destination, tag) in posting order (so a rank's isend to itself and irecv from itself share one list);
    a ``wait`` completes the oldest pending request of its key; a ``waitall`` (the program's own, not one named
    after a call such as MPI_Sendrecv, whose requests only it completes) completes the pending requests; a stock
    trace's ``test`` completes the oldest one when no wait of its key follows (the last of a run of tests right
    after the request).  A program's waitall may leave some of its rank's requests to a later ``wait``: per key,
    a waitall leaves pending the oldest requests the key's later waits need (none in a trace SimGrid replays as
    written: :func:`waitlab.models.analysis.trace_check.wait_problem`).  Vectorised: per (key, epoch), the epoch
    being the number of the rank's waitalls before the row, the requests and waits are counted, what each epoch
    needs from earlier ones is a suffix maximum of running sums, and the j-th wait of a key takes its j-th request
    left to waits.
    """
    tags = channel_tags(ops) if tags is None else tags
    req = np.flatnonzero(_IS_NONBLOCKING[ops.code])
    wt = np.flatnonzero(ops.code == CODE["wait"])
    ts = np.flatnonzero(stock_tests(ops))
    empty = np.zeros(0, np.int64)
    if wt.size + ts.size == 0 or req.size == 0:
        if wt.size:
            _no_request(ops, int(wt[0]))
        return empty, empty
    rows = np.concatenate((req, wt, ts)).astype(np.int64)
    typ = np.concatenate((np.zeros(req.size, np.int8), np.ones(wt.size, np.int8), np.full(ts.size, 2, np.int8)))
    rank, peer = ops.rank[rows].astype(np.int64), ops.peer[rows].astype(np.int64)
    recv = np.concatenate((ops.code[req] == CODE["irecv"], ops.value2[rows[req.size:]] != 0))
    towards = (recv & (peer != rank)).astype(np.int8)  # (source, destination): a self-message's ends share it
    # requests named after a call (MPI_Sendrecv's parts) are completed by that call, not by the program's waits
    own = ops.name[req]
    call = np.concatenate((own, np.where(np.isin(ops.name[rows[req.size:]], own[own >= 0]),
                                         ops.name[rows[req.size:]], -1))).astype(np.int64)
    wa = np.flatnonzero((ops.code == CODE["waitall"]) & (ops.name < 0))
    epoch = np.searchsorted(wa, rows).astype(np.int64)  # the key holds the rank: a count over all ranks serves
    tag = tags[rows].astype(np.int64)
    order = np.lexsort((rows, call, tag, towards, peer, rank))
    keys = [rank[order], peer[order], towards[order], tag[order], call[order]]
    rows, typ, epoch = rows[order], typ[order], epoch[order]
    new_key = _segments(keys)
    keep = (typ != 2) | completing_tests(typ, new_key, epoch)
    kid = (np.cumsum(new_key) - 1)[keep]
    rows, typ, epoch = rows[keep], typ[keep], epoch[keep]
    m = rows.size
    new_key = np.ones(m, bool)
    new_key[1:] = kid[1:] != kid[:-1]
    cons = typ != 0
    step = np.where(cons, 1, -1).astype(np.int64)
    # the key's running balance (consumers - requests): above 0, a wait finds no request posted before it
    run = np.cumsum(step)
    key_start = np.flatnonzero(new_key)
    key_of = np.cumsum(new_key) - 1
    run -= (run - step)[key_start][key_of]
    bad = cons & (run > 0)
    if bad.any():
        _no_request(ops, int(rows[bad].min()))
    # per (key, epoch) group: what it needs left pending by the waitall before it, bottom up
    new_group = new_key.copy()
    new_group[1:] |= epoch[1:] != epoch[:-1]
    g0 = np.flatnonzero(new_group)
    group_of = np.cumsum(new_group) - 1
    before = run[g0] - step[g0]  # the balance when the group starts
    need_from = np.maximum(before, np.maximum.reduceat(run, g0))  # its highest balance
    gkey = key_of[g0]
    big = m + 2  # balances lie in [-m, 0]: one offset per key keeps the running maximum inside its key
    shift = (gkey.max() - gkey[::-1]) * big
    need = (np.maximum.accumulate(need_from[::-1] + shift) - shift)[::-1] - before
    a = np.add.reduceat((~cons).astype(np.int64), g0)
    b = np.add.reduceat(cons.astype(np.int64), g0)
    need_next = np.append(need[1:], 0)
    need_next[np.append(gkey[1:] != gkey[:-1], True)] = 0
    removed_n = need + a - b - need_next  # the group's newest requests its waitall completes
    k_req = np.cumsum(~cons)
    group_last = np.append(g0[1:], m) - 1
    from_end = k_req[group_last][group_of] - k_req  # requests of the group after the row
    left = ~cons & (from_end >= removed_n[group_of])
    return rows[cons], rows[left]


def _no_request(ops: OpTable, i: int) -> None:
    raise SimulationError(f"wait of rank {ops.rank[i]} operation {ops.seq[i]} completes no pending request (no isend "
                          f"or irecv to or from rank {ops.peer[i]} with tag {ops.tag[i]} is left for it; fix: a wait "
                          "completes the oldest request of its partner and tag still pending, and a waitall completes "
                          "every pending request)")


def completions(ops: OpTable, match: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Row of the operation that completes each non-blocking request (-1 for other rows).

    A request is completed by the ``wait`` (or stock ``test``) that :func:`request_pairs` gives it, else by the first
    ``waitall`` after it on its rank.  Blocking operations complete themselves.  (``match``, the message ids of
    :func:`match_messages`, is not needed: a self-message's two requests share one.)
    """
    n = len(ops)
    done = np.full(n, -1, np.int64)
    blocking = _IS_BLOCKING_P2P[ops.code]
    done[blocking] = np.flatnonzero(blocking)
    nb = np.flatnonzero(_IS_NONBLOCKING[ops.code])
    if nb.size == 0:
        return done
    cons, reqs = request_pairs(ops)
    done[reqs] = cons
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


def _next_on_rank(ops: OpTable, rows: npt.NDArray[np.int64], candidates: npt.NDArray[np.int64]
                  ) -> npt.NDArray[np.int64]:
    """The first of ``candidates`` after each of ``rows`` on the same rank (-1: none); rows are in (rank, seq)
    order."""
    if candidates.size == 0:
        return np.full(rows.size, -1, np.int64)
    p = np.minimum(np.searchsorted(candidates, rows), candidates.size - 1)
    after = (candidates[p] > rows) & (ops.rank[candidates[p]] == ops.rank[rows])
    return np.where(after, candidates[p], -1)
