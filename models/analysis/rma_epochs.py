"""One-sided (RMA) epochs of an event table and the matching of origin and target.

MPI-3 (section 11.5) brackets RMA operations in *epochs* on a window:

* fence: every ``win_fence`` closes the window's previous fence epoch and opens the next (on every rank);
* general active target (GATS): ``win_start(group) .. win_complete`` is an *access* epoch on the origin,
  ``win_post(group) .. win_wait`` an *exposure* epoch on the target; the k-th access epoch of origin o whose
  group holds t matches the k-th exposure epoch of t whose group holds o;
* passive target: ``win_lock(t) .. win_unlock(t)`` (exclusive or shared) and ``win_lock_all .. win_unlock_all``.

An epoch's id is the event row of the call that opened it on that rank (the fence, start, post, lock or
lock_all).  :func:`rma_epochs` gives one row per RMA event: its window, mode, epoch, target, and for RMA
operations (put, get, accumulate, ...) the target's epoch it landed in (the target's post for GATS, the target's
fence of the same instance for fence epochs, -1 for passive target: the target has no epoch).  The window id is
the event table's ``tag``; ``win_group`` rows (one per group member, right after their post/start) carry the
group.  :func:`annotate_rma` writes the epoch into the event table's ``match`` column and the call that closes
it at the origin (fence, complete, wait, unlock, unlock_all) into ``done``.

Pure numpy over the columns (:mod:`waitlab.models.columns`: a pandas DataFrame or an Arrow table, and a table of
the same kind back); no row loops.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from waitlab.models import columns
from waitlab.models.columns import Coded, Table
from waitlab.models.vocabulary import ACTION, ACTIONS, CODE, RMA_ACTIONS, lut

#: RMA operations (they move data); the others are synchronization and window management.
RMA_OPS = tuple(a for a in RMA_ACTIONS if ACTION[a].pattern == "rma_op")
#: Epoch modes of the ``mode`` column.
MODES = ("", "fence", "gats", "lock", "lock_all")
_LOCKS = ("win_lock", "win_lock_shared")
_RMA_SET = frozenset(RMA_ACTIONS)
_IS_RMA = lut(RMA_ACTIONS)
#: Lookup table over action codes: an RMA operation.
IS_RMA_OP = lut(RMA_OPS)


def vocabulary_codes(events: Table, name: str = "op") -> npt.NDArray[np.int64]:
    """Action code (:data:`~waitlab.models.vocabulary.CODE`) of every row of the ``op`` column (column ``name``)
    of ``events`` (-1 for ``region``, names outside the vocabulary and missing values)."""
    code, cats = columns.codes(events, name)
    cat_code = np.array([CODE.get(c, -1) for c in cats] + [-1], np.int64)
    return cat_code[code]

Int = npt.NDArray[np.int64]


def _last_before(x_rows: Int, x_key: Int, q_rows: Int, q_key: Int, n: int) -> Int:
    """For each query, the largest x row < the query row with the same key (-1 if none)."""
    if x_rows.size == 0 or q_rows.size == 0:
        return np.full(q_rows.size, -1, np.int64)
    xs = x_key * (n + 1) + x_rows
    order = np.argsort(xs, kind="stable")
    xs, xr, xk = xs[order], x_rows[order], x_key[order]
    i = np.searchsorted(xs, q_key * (n + 1) + q_rows, side="left") - 1
    ok = (i >= 0) & (xk[np.maximum(i, 0)] == q_key)
    return np.where(ok, xr[np.maximum(i, 0)], -1)


def _first_after(x_rows: Int, x_key: Int, q_rows: Int, q_key: Int, n: int) -> Int:
    """For each query, the smallest x row > the query row with the same key (-1 if none)."""
    if x_rows.size == 0 or q_rows.size == 0:
        return np.full(q_rows.size, -1, np.int64)
    xs = x_key * (n + 1) + x_rows
    order = np.argsort(xs, kind="stable")
    xs, xr, xk = xs[order], x_rows[order], x_key[order]
    i = np.searchsorted(xs, q_key * (n + 1) + q_rows, side="right")
    ok = (i < xs.size) & (xk[np.minimum(i, xs.size - 1)] == q_key)
    return np.where(ok, xr[np.minimum(i, xs.size - 1)], -1)


def _cumcount(key: Int) -> Int:
    """For each element, how many earlier elements (in array order) share its key."""
    order = np.argsort(key, kind="stable")
    k = key[order]
    start = np.r_[True, k[1:] != k[:-1]] if k.size else np.zeros(0, bool)
    first = np.maximum.accumulate(np.where(start, np.arange(k.size), 0)) if k.size else np.zeros(0, np.int64)
    out = np.empty(key.size, np.int64)
    out[order] = np.arange(k.size) - first
    return out


def _lookup(keys: Int, values: Int, q: Int) -> Int:
    """``values`` at the position of each query in ``keys`` (unique keys), -1 when absent."""
    if keys.size == 0 or q.size == 0:
        return np.full(q.size, -1, np.int64)
    order = np.argsort(keys)
    ks = keys[order]
    i = np.minimum(np.searchsorted(ks, q), ks.size - 1)
    return np.where(ks[i] == q, values[order][i], -1)


def rma_epochs(events: Table) -> Table:
    """One row per RMA event: window, epoch mode, epoch, target and the target's epoch (module docstring).

    Returns
    -------
    DataFrame or pyarrow.Table
        Of the kind of ``events``: columns ``event, rank, op, code, win, mode, epoch, closer, peer, target,
        target_epoch``; ``epoch`` and ``target_epoch`` are event rows of the opening calls (-1 when none),
        ``closer`` the row of the call that closes the epoch on this rank (-1 if it never closed).
    """
    code_all = vocabulary_codes(events)
    rows = np.flatnonzero((code_all >= 0) & _IS_RMA[np.maximum(code_all, 0)]).astype(np.int64)
    n = len(events)
    op = code_all[rows]
    rank_all = columns.values(events, "rank")
    rank = rank_all[rows].astype(np.int64)
    win = columns.values(events, "tag")[rows].astype(np.int64)
    peer = columns.values(events, "peer")[rows].astype(np.int64)
    n_ranks = int(rank_all.max()) + 1 if n else 0
    g = rank * (int(win.max()) + 1 if win.size else 1) + win  # (rank, window)
    gp = g * (n_ranks + 1) + (peer + 1)  # (rank, window, target)

    def sel(*ops: str) -> npt.NDArray[np.bool_]:
        return lut(ops)[op]

    def last(mask: npt.NDArray[np.bool_], key: Int, qmask: npt.NDArray[np.bool_], qkey: Int) -> Int:
        return _last_before(rows[mask], key[mask], rows[qmask], qkey[qmask], n)

    is_op, is_flush = sel(*RMA_OPS), sel("win_flush", "win_flush_local")
    is_fence, is_start, is_post = sel("win_fence"), sel("win_start"), sel("win_post")
    is_lock, is_lock_all = sel(*_LOCKS), sel("win_lock_all")
    epoch = np.full(rows.size, -1, np.int64)
    mode = np.zeros(rows.size, np.int8)
    # Operations and flushes: the most recent epoch still open on their (rank, window) that covers their target.
    q = is_op | is_flush
    cand = np.full((4, int(q.sum())), -1, np.int64)
    cand[0] = last(is_fence, g, q, g)
    start = last(is_start, g, q, g)
    cand[1] = np.where(start > last(sel("win_complete"), g, q, g), start, -1)
    lock = last(is_lock, gp, q, gp)
    cand[2] = np.where(lock > last(sel("win_unlock"), gp, q, gp), lock, -1)
    lock_all = last(is_lock_all, g, q, g)
    cand[3] = np.where(lock_all > last(sel("win_unlock_all"), g, q, g), lock_all, -1)
    best = np.argmax(cand, axis=0)
    epoch[q] = cand[best, np.arange(best.size)]
    mode[q] = np.where(epoch[q] >= 0, best + 1, 0)
    # Synchronization calls: the epoch they open or close.
    epoch[is_fence], mode[is_fence] = rows[is_fence], MODES.index("fence")
    for opener, closers, m in ((is_start, ("win_complete",), "gats"), (is_post, ("win_wait",), "gats"),
                               (is_lock_all, ("win_unlock_all",), "lock_all")):
        epoch[opener], mode[opener] = rows[opener], MODES.index(m)
        c = sel(*closers)
        epoch[c], mode[c] = last(opener, g, c, g), MODES.index(m)
    epoch[is_lock], mode[is_lock] = rows[is_lock], MODES.index("lock")
    unl = sel("win_unlock")
    epoch[unl], mode[unl] = last(is_lock, gp, unl, gp), MODES.index("lock")
    grp = sel("win_group")
    epoch[grp] = last(is_start | is_post, g, grp, g)
    mode[grp] = MODES.index("gats")
    # Closer of each epoch on its rank.
    closer = np.full(rows.size, -1, np.int64)
    pos = np.full(n, -1, np.int64)
    pos[rows] = np.arange(rows.size)
    has = epoch >= 0
    ep_pos = pos[np.maximum(epoch, 0)]
    m_f = has & (mode == MODES.index("fence"))
    closer[m_f] = _first_after(rows[is_fence], g[is_fence], epoch[m_f], g[ep_pos[m_f]], n)
    closing: tuple[tuple[str, tuple[str, ...]], ...] = (("gats", ("win_complete", "win_wait")),
                                                        ("lock", ("win_unlock",)), ("lock_all", ("win_unlock_all",)))
    for m, ends in closing:
        c = sel(*ends)
        mm = has & (mode == MODES.index(m))
        closer[mm] = _lookup(epoch[c], rows[c], epoch[mm])
    target_epoch = _target_epochs(rows, op, rank, win, peer, epoch, mode, is_fence, grp, n_ranks)
    return columns.table({
        "event": rows, "rank": rank.astype(np.int32), "op": Coded(op, ACTIONS),
        "code": op.astype(np.int16), "win": win.astype(np.int32),
        "mode": Coded(mode, MODES), "epoch": epoch, "closer": closer,
        "peer": peer.astype(np.int32), "target": np.where(IS_RMA_OP[op], peer, -1).astype(np.int32),
        "target_epoch": target_epoch,
    }, like=events)  # fmt: skip


def _target_epochs(rows: Int, op: Int, rank: Int, win: Int, peer: Int, epoch: Int,
                   mode: npt.NDArray[np.int8], is_fence: npt.NDArray[np.bool_], grp: npt.NDArray[np.bool_],
                   n_ranks: int) -> Int:
    """The target's epoch each RMA operation landed in (GATS: its post; fence: its fence of the same instance)."""
    out = np.full(rows.size, -1, np.int64)
    is_op = IS_RMA_OP[op]
    n_w = int(win.max()) + 1 if win.size else 1
    # Fence: the k-th fence of a window on every rank is one instance.
    f = np.flatnonzero(is_fence)
    k = _cumcount(rank[f] * n_w + win[f])
    fence_key = (win[f] * n_ranks + rank[f]) * (rows.size + 1) + k
    fence_k = np.full(int(rows.max()) + 1 if rows.size else 1, -1, np.int64)
    fence_k[rows[f]] = k
    sel = np.flatnonzero(is_op & (mode == MODES.index("fence")))
    want = (win[sel] * n_ranks + peer[sel]) * (rows.size + 1) + fence_k[epoch[sel]]
    out[sel] = _lookup(fence_key, rows[f], want)
    # GATS: k-th access epoch of o naming t <-> k-th exposure epoch of t naming o (MPI-3 11.5.2).
    gi = np.flatnonzero(grp & (epoch >= 0))
    opener_op = np.full(int(rows.max()) + 1 if rows.size else 1, -1, np.int64)
    opener_op[rows] = op
    access = opener_op[epoch[gi]] == CODE["win_start"]
    origin = np.where(access, rank[gi], peer[gi])
    target = np.where(access, peer[gi], rank[gi])
    pair = (win[gi] * n_ranks + origin) * n_ranks + target
    c = _cumcount(pair * 2 + access)
    key = pair * (rows.size + 1) + c
    a, x = access, ~access
    post_of_key = (key[x], epoch[gi][x])
    # access epoch (start row) + target -> key of the matching exposure
    acc_key = epoch[gi][a] * (n_ranks + 1) + target[a]
    sel = np.flatnonzero(is_op & (mode == MODES.index("gats")))
    k_of = _lookup(acc_key, key[a], epoch[sel] * (n_ranks + 1) + peer[sel])
    out[sel] = np.where(k_of >= 0, _lookup(post_of_key[0], post_of_key[1], k_of), -1)
    return out


def gats_pairs(table: Table) -> Table:
    """Matched (access epoch, exposure epoch) pairs of a :func:`rma_epochs` table.

    Returns columns ``start, post, origin, target`` (a table of the kind of ``table``): event rows of the win_start
    and the matching win_post (-1 if the target never posted) and their ranks.
    """
    t = table
    ev, op, ep = (columns.values(t, c) for c in ("event", "code", "epoch"))
    grp = (op == CODE["win_group"]) & (ep >= 0)
    is_start = np.zeros(int(ev.max()) + 1 if ev.size else 1, bool)
    is_start[ev[op == CODE["win_start"]]] = True
    ep = ep[grp]
    rank, member, win = (columns.values(t, c)[grp].astype(np.int64) for c in ("rank", "peer", "win"))
    access = is_start[ep]
    n_ranks = int(max(rank.max(initial=0), member.max(initial=0))) + 1
    origin = np.where(access, rank, member)
    target = np.where(access, member, rank)
    pair = (win * n_ranks + origin) * n_ranks + target
    c = _cumcount(pair * 2 + access)
    key = pair * (len(t) + 1) + c
    post = _lookup(key[~access], ep[~access], key[access])
    return columns.table({"start": ep[access], "post": post, "origin": origin[access], "target": target[access]},
                         like=t)


def has_rma(events: Table) -> bool:
    """Whether the event table holds any RMA event (a lookup over the op categories: cheap on large tables).

    >>> from waitlab.models.columns import table
    >>> has_rma(table({"op": Coded(np.array([0, 1]), ["send", "win_fence"])})), has_rma(table({"op": Coded(
    ...     np.array([0, 0]), ["send", "win_fence"])}))
    (True, False)
    """
    if not len(events):
        return False
    code, cats = columns.codes(events, "op")
    cat_code = np.array([CODE.get(c, -1) for c in cats], np.int64)
    is_rma = np.append(np.where(cat_code >= 0, _IS_RMA[np.maximum(cat_code, 0)], False), False)  # last: code -1
    if not is_rma.any():  # no RMA label among the categories: no pass over the rows
        return False
    return bool(is_rma[code].any())


def annotate_rma(events: Table) -> Table:
    """The event table with RMA rows' ``match`` = epoch and ``done`` = the call closing it: a DataFrame in place
    (returned), an Arrow table as a new table with those two columns replaced (an Arrow table is immutable)."""
    if not has_rma(events):
        return events
    t = rma_epochs(events)
    ev = columns.values(t, "event")
    match, done = columns.values(events, "match").copy(), columns.values(events, "done").copy()
    match[ev] = columns.values(t, "epoch")
    done[ev] = columns.values(t, "closer")
    if not columns.is_arrow(events):
        events["match"], events["done"] = match, done
        return events
    for name, col in (("match", match), ("done", done)):
        i = events.schema.get_field_index(name)  # the column's own type (a cast would load pyarrow.compute)
        events = events.set_column(i, events.schema.field(i), columns.arrow_array(col, events.schema.field(i).type))
    return events
