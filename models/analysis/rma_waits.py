"""One-sided (RMA) wait states, as Scalasca defines them (Scalasca 2.5, ``src/scout/generator/MPI_RMA.pattern``).

Each is Wu et al.'s formula (1), ``w = Enter(q,k) - Enter(p,i)``, clipped to the time the waiting call spent
inside MPI; the epochs and the origin-target matching come from :mod:`waitlab.models.analysis.rma_epochs`.

* **Late Post** (``MPI_RMA_LATE_POST``): an origin's access-epoch call waits for the exposure epoch to start.
  T = latest Enter(win_post) of the matched targets; the origin's start, RMA operation or complete whose
  interval holds T waits ``T - Enter`` (SMPI's win_start blocks, so the wait lands there).
* **Early Wait** (``MPI_RMA_EARLY_WAIT``): the target's win_wait waits for the last win_complete:
  ``min(T, Exit_wait) - Enter_wait`` with T = latest Enter(win_complete) of the matched origins.
* **Late Complete** (``MPI_RMA_LATE_COMPLETE``, part of Early Wait): the share of it between the last RMA
  operation into the epoch and the last complete: ``T - max(last op, Enter_wait)``.
* **Wait at Fence** (``MPI_RMA_WAIT_AT_FENCE``): ``min(max Enter, Exit) - Enter`` over the fence instance,
  when all calls overlap (Scalasca's heuristic: earliest Exit > latest Enter).
* **Early Fence** (``MPI_RMA_EARLY_FENCE``, part of Wait at Fence): the fence waits for an RMA operation
  to this rank issued while it was already inside: ``T - Enter_fence`` with T = latest Enter of an operation
  into the closing epoch, when ``Enter_fence < T <= Exit_fence``.
* **Wait at Window Create / Free** (``MPI_RMA_WAIT_AT_CREATE``, ``MPI_RMA_WAIT_AT_FREE``): as Wait at
  Fence, for the collective ``win_create`` and ``win_free`` of a window.
* **Lock Contention** (``MPI_RMA_SYNC_LOCK_COMPETITION``): a lock epoch waits for the unlock of an earlier
  conflicting epoch on the same target window (one of the two exclusive); epochs are ordered by when the lock
  was granted (Exit of win_lock); T = latest Enter(win_unlock) of the earlier conflicting epochs; the epoch's
  lock, operation or unlock whose interval holds T waits ``T - Enter`` (SMPI's win_lock blocks).

Scalasca's sub-patterns are parts of their parent; here each wait-state row holds a disjoint part, so an
Early Wait with a Late Complete share is two rows (``rma_early_wait`` = the rest, ``rma_late_complete``) and
the waits of one event still add up to the time it waited.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.models import columns
from waitlab.models.analysis.rma_epochs import IS_RMA_OP, MODES, RMA_OPS, gats_pairs, has_rma, rma_epochs
from waitlab.models.columns import Table
from waitlab.models.vocabulary import CODE, lut

#: RMA wait-state patterns (rows of the wait-state table).
RMA_PATTERNS = ("rma_late_post", "rma_early_wait", "rma_late_complete", "rma_wait_at_fence", "rma_early_fence",
                "rma_lock_contention", "rma_wait_at_create", "rma_wait_at_free")

Int = npt.NDArray[np.int64]
Float = npt.NDArray[np.float64]
Waits = list[tuple[str, Int, Float, Int]]


def _segment_max(group: Int, value: Float, arg: Int, n_groups: int) -> tuple[Float, Int]:
    """Per group: the largest value and the ``arg`` where it occurs (-inf, -1 for empty groups)."""
    best = np.full(n_groups, -np.inf)
    np.maximum.at(best, group, value)
    who = np.full(n_groups, -1, np.int64)
    hit = value == best[group]
    who[group[hit]] = arg[hit]
    return best, who


def _containing(cand_rows: Int, cand_epoch: Int, t_of_epoch: Float, who_of_epoch: Int, enter: Float,
                exit_: Float) -> tuple[Int, Float, Int]:
    """Candidate calls whose interval holds their epoch's time T: (row, T - Enter, row waited for)."""
    t = t_of_epoch[cand_epoch]
    e, x = enter[cand_rows], exit_[cand_rows]
    hold = (e < t) & (t <= x)
    return cand_rows[hold], (t - e)[hold], who_of_epoch[cand_epoch][hold]


def rma_wait_states(events: Table) -> Waits:
    """Every RMA wait state: a list of (pattern, event rows, waits, rows waited for) (module docstring); ``events``
    a pandas DataFrame or an Arrow table."""
    if not has_rma(events):
        return []
    t = rma_epochs(events)
    enter, exit_ = columns.values(events, "enter"), columns.values(events, "exit")
    n = len(events)
    ev, op = columns.values(t, "event"), columns.values(t, "code").astype(np.int64)
    epoch, closer = columns.values(t, "epoch"), columns.values(t, "closer")
    mode = columns.codes(t, "mode")[0]
    out: Waits = []
    pairs = gats_pairs(t)
    _late_post(pairs, ev, op, epoch, mode, enter, exit_, n, out)
    _early_wait(t, pairs, ev, op, epoch, closer, enter, exit_, n, out)
    _fence(t, ev, op, epoch, enter, exit_, n, out)
    _locks(t, ev, op, epoch, closer, mode, enter, exit_, n, out)
    return out


def _late_post(pairs: Table, ev: Int, op: Int, epoch: Int, mode: npt.NDArray[np.integer[Any]],
               enter: Float, exit_: Float, n: int, out: Waits) -> None:
    post, start = columns.values(pairs, "post"), columns.values(pairs, "start")
    ok = post >= 0
    start, post = start[ok], post[ok]
    if start.size == 0:
        return
    t_post, who = _segment_max(start, enter[post], post, n)
    access = (mode == MODES.index("gats")) & (lut(("win_start", "win_complete", *RMA_OPS))[op])
    access &= epoch >= 0
    rows, w, peer = _containing(ev[access], epoch[access], t_post, who, enter, exit_)
    out.append(("rma_late_post", rows, w, peer))


def _early_wait(t: Table, pairs: Table, ev: Int, op: Int, epoch: Int, closer: Int, enter: Float,
                exit_: Float, n: int, out: Waits) -> None:
    post, start = columns.values(pairs, "post"), columns.values(pairs, "start")
    ok = post >= 0
    start, post = start[ok], post[ok]
    complete_of = np.full(n, -1, np.int64)
    is_start = op == CODE["win_start"]
    complete_of[ev[is_start]] = closer[is_start]
    comp = complete_of[start]
    ok = comp >= 0
    if not ok.any():
        return
    t_comp, who = _segment_max(post[ok], enter[comp[ok]], comp[ok], n)
    # last RMA operation into each exposure epoch (its Exit at the origin)
    te = columns.values(t, "target_epoch")
    into = IS_RMA_OP[op] & (te >= 0)
    last_op = np.full(n, -np.inf)
    np.maximum.at(last_op, te[into], exit_[ev[into]])
    wait_rows = np.flatnonzero(op == CODE["win_wait"])
    w_ev, p = ev[wait_rows], epoch[wait_rows]
    keep = p >= 0
    w_ev, p = w_ev[keep], p[keep]
    total = np.minimum(t_comp[p], exit_[w_ev]) - enter[w_ev]
    late = np.clip(t_comp[p] - np.maximum(last_op[p], enter[w_ev]), 0.0, np.maximum(total, 0.0))
    out.append(("rma_early_wait", w_ev, total - late, who[p]))
    out.append(("rma_late_complete", w_ev, late, who[p]))


def _window_collective(t: Table, ev: Int, op: Int, enter: Float, exit_: Float, name: str
                       ) -> tuple[Int, npt.NDArray[np.bool_], Float, Float, Int]:
    """Instances of a window-collective call (the k-th ``name`` of a window on every rank): its rows in
    (window, rank, program) order, whether each is a rank's first, and Scalasca's wait with the row waited for."""
    f = np.flatnonzero(op == CODE[name])
    rank, win = columns.values(t, "rank")[f].astype(np.int64), columns.values(t, "win")[f].astype(np.int64)
    n_w = int(win.max()) + 1
    order = np.lexsort((ev[f], rank, win))
    fr, fw, frank = ev[f][order], win[order], rank[order]
    key = frank * n_w + fw
    first = np.r_[True, key[1:] != key[:-1]]
    k = np.arange(fr.size) - np.maximum.accumulate(np.where(first, np.arange(fr.size), 0))
    uniq, inst = np.unique(fw * (k.max() + 1) + k, return_inverse=True)  # instance: window and ordinal
    e, x = enter[fr], exit_[fr]
    latest, who = _segment_max(inst, e, fr, uniq.size)
    earliest_exit = np.full(uniq.size, np.inf)
    np.minimum.at(earliest_exit, inst, x)
    overlap = earliest_exit[inst] > latest[inst]  # Scalasca's heuristic: all calls overlap
    total = np.where(overlap, np.minimum(latest[inst], x) - e, 0.0)
    return fr, first, total, e, who[inst]


def _fence(t: Table, ev: Int, op: Int, epoch: Int, enter: Float, exit_: Float, n: int,
           out: Waits) -> None:
    for name, pattern in (("win_create", "rma_wait_at_create"), ("win_free", "rma_wait_at_free")):
        if (op == CODE[name]).any():
            rows, _, w, _, peer = _window_collective(t, ev, op, enter, exit_, name)
            out.append((pattern, rows, w, peer))
    if not (op == CODE["win_fence"]).any():
        return
    fr, first, total, e, who = _window_collective(t, ev, op, enter, exit_, "win_fence")
    x = exit_[fr]
    # Early Fence: an operation into the closing epoch (epoch = this rank's previous fence) entered meanwhile.
    prev = np.where(first, -1, np.r_[-1, fr[:-1]])
    te = columns.values(t, "target_epoch")
    into = IS_RMA_OP[op] & (te >= 0)
    last_in, last_who = _segment_max(te[into], enter[ev[into]], ev[into], n)
    t_op = np.where(prev >= 0, last_in[np.maximum(prev, 0)], -np.inf)
    early = np.where((t_op > e) & (t_op <= x) & (total > 0), np.minimum(t_op - e, total), 0.0)
    out.append(("rma_wait_at_fence", fr, total - early, who))
    out.append(("rma_early_fence", fr, early, np.where(prev >= 0, last_who[np.maximum(prev, 0)], -1)))


def _locks(t: Table, ev: Int, op: Int, epoch: Int, closer: Int,
           mode: npt.NDArray[np.integer[Any]], enter: Float, exit_: Float, n: int, out: Waits) -> None:
    rank, win, peer = (columns.values(t, c).astype(np.int64) for c in ("rank", "win", "peer"))
    n_ranks = int(max(rank.max(initial=0), peer.max(initial=0))) + 1
    single = np.flatnonzero(lut(("win_lock", "win_lock_shared"))[op] & (closer >= 0))
    every = np.flatnonzero((op == CODE["win_lock_all"]) & (closer >= 0))
    # Lock epochs per (window, target): lock_all is a shared lock on every rank.
    lk = np.r_[single, np.repeat(every, n_ranks)].astype(np.int64)
    target = np.r_[peer[single], np.tile(np.arange(n_ranks), every.size)].astype(np.int64)
    if lk.size < 2:
        return
    lock_row, unlock_row = ev[lk], closer[lk]
    excl = op[lk] == CODE["win_lock"]
    grp = win[lk] * n_ranks + target
    order = np.lexsort((exit_[lock_row], grp))  # granted order per target window
    lock_row, unlock_row, excl, grp = lock_row[order], unlock_row[order], excl[order], grp[order]
    # Latest unlock of the earlier epochs: all of them (an exclusive epoch waits for everyone), or the
    # exclusive ones (a shared epoch waits only for exclusive holders).  Running maxima, reset per group.
    u = enter[unlock_row]
    span = float(np.max(exit_)) - float(np.min(enter)) + 1.0
    offset = (np.unique(grp, return_inverse=True)[1] * span).astype(np.float64)
    base = float(np.min(enter))

    def prior_max(vals: Float) -> tuple[Float, Int]:
        shifted = np.where(np.isfinite(vals), vals - base + offset, offset - 1.0)
        run = np.maximum.accumulate(shifted)
        prior = np.r_[-np.inf, run[:-1]]
        same = np.r_[False, grp[1:] == grp[:-1]]
        idx = np.maximum.accumulate(np.where(shifted >= run, np.arange(vals.size), 0))
        prior_idx = np.r_[-1, idx[:-1]]
        ok = same & (prior - offset >= 0)
        return np.where(ok, prior - offset + base, -np.inf), np.where(ok, prior_idx, -1)

    t_all, i_all = prior_max(u)
    t_ex, i_ex = prior_max(np.where(excl, u, -np.inf))
    t_blk = np.where(excl, t_all, t_ex)
    i_blk = np.where(excl, i_all, i_ex)
    who = np.where(i_blk >= 0, unlock_row[np.maximum(i_blk, 0)], -1)
    # The epoch's call whose interval holds T waits (its lock, an operation in it, or its unlock).
    t_of = np.full(n, -np.inf)
    who_of = np.full(n, -1, np.int64)
    np.maximum.at(t_of, lock_row, t_blk)
    hit = t_blk == t_of[lock_row]
    who_of[lock_row[hit]] = who[hit]
    in_epoch = lut(("win_lock", "win_lock_shared", "win_unlock", "win_lock_all", "win_unlock_all", *RMA_OPS))[op]
    in_epoch &= (epoch >= 0) & np.isin(mode, (MODES.index("lock"), MODES.index("lock_all")))
    rows, w, p = _containing(ev[in_epoch], epoch[in_epoch], t_of, who_of, enter, exit_)
    out.append(("rma_lock_contention", rows, w, p))
