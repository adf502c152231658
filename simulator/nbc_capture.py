"""Nonblocking collectives in a capture: the post goes back into the trace, so the replay overlaps as the program did.

The measurement layer books a nonblocking collective (``MPI_Ialltoall`` ... ``MPI_Wait``) at its completion call, as
its blocking twin (``alltoall``; Scalasca books it the same way), with the rank's request serial ``k`` in ``tag``, and
keeps the time of its post in ``r<rank>.nbc`` (:func:`read_nbc_posts`).  A trace holding only the completion would
replay the collective as blocking at the ``MPI_Wait``, after the computation the program overlapped with it
(osu_ialltoall: 0.538 s replayed against 0.379 s live).  :func:`with_nbc_posts` puts a post row (``ialltoall``,
vocabulary kind ``post``, ``tag = k``) where the program posted it, splitting the compute row the post fell in; the
trace writer ends both lines with ``nbc=<k>`` and waitlab's replay extension (``native/waitlab_replay_nbc.cpp``)
posts ``MPI_Ialltoall`` there and waits for it at the completion.

Only collectives on ``MPI_COMM_WORLD`` get a post; one on a sub-communicator stays blocking at its completion.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from waitlab.models.ops import OpTable, seq_within_rank
from waitlab.models.vocabulary import CODE, NBC_TWIN, NBC_TWINS, lut
from waitlab.simulator.ti_args import BadLine

#: Columns of the posts the layer recorded: rank, request serial, post enter and exit (simulated seconds).
POST_DTYPE = np.dtype([("rank", "<i4"), ("serial", "<i8"), ("t0", "<f8"), ("t1", "<f8")])
_IS_TWIN = lut(NBC_TWINS)
#: post action code of each twin code (-1: none)
_POST_OF = np.full(256, -1, np.int64)
for _t in NBC_TWINS:
    _POST_OF[CODE[_t]] = CODE["i" + _t]


#: Start of the last argument of a nonblocking collective's post and completion lines.
NBC_PREFIX = "nbc="


def pop_nbc(action: str, args: list[str], rank: int, posted: dict[tuple[int, int], str]) -> int:
    """Remove and return the serial of a TI line's last argument ``nbc=<k>`` (0 when absent); ``posted`` holds the
    (rank, serial) of the posts read so far.  Raises ValueError naming what is wrong with the line."""
    has = bool(args) and args[-1].startswith(NBC_PREFIX)
    if action in NBC_TWIN and not has:  # a line of SimGrid's own tracer: it records no serial
        raise BadLine(f"{action} is a nonblocking collective as SimGrid's tracer (smpirun -trace-ti) records it, "
                      f"which cannot be replayed: SimGrid 3.32's own replay has no {action} action, and the trace "
                      "does not say which later wait completes it (waitlab's own traces end both lines with "
                      f"{NBC_PREFIX}<k>, the request's number)",
                      "record the program with waitlab's layer (waitlab capture --via layer), whose traces replay "
                      'nonblocking collectives, or run the program itself (application.kind = "program")')
    if not has:
        return 0
    text = args.pop()[len(NBC_PREFIX):]
    if action not in NBC_TWIN and action not in NBC_TWINS:
        raise ValueError(f"{action} cannot end with {NBC_PREFIX}{text}: only {', '.join(NBC_TWINS)} and their posts "
                         "(i<collective>) can")
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"bad request serial {NBC_PREFIX}{text}: write {NBC_PREFIX}<k> with k = 1, 2, ...")
    k = int(text)
    if action in NBC_TWIN:
        if (rank, k) in posted:
            raise ValueError(f"request {NBC_PREFIX}{k} of rank {rank} is posted twice")
        posted[(rank, k)] = NBC_TWIN[action]
    elif posted.pop((rank, k), None) != action:
        raise ValueError(f"{action} {NBC_PREFIX}{k} completes no {'i' + action} {NBC_PREFIX}{k} posted before it "
                         f"on rank {rank}")
    return k


def read_nbc_posts(out_dir: Path, n_ranks: int) -> npt.NDArray[np.void]:
    """The posts of every completed nonblocking collective (``r<rank>.nbc``: ``serial t0 t1`` lines)."""
    parts = []
    for r in range(n_ranks):
        f = out_dir / f"r{r}.nbc"
        text = f.read_text().split() if f.exists() else []
        a = np.array(text, np.float64).reshape(-1, 3) if text else np.zeros((0, 3))
        rows = np.zeros(a.shape[0], POST_DTYPE)
        rows["rank"], rows["serial"], rows["t0"], rows["t1"] = r, a[:, 0].astype(np.int64), a[:, 1], a[:, 2]
        parts.append(rows)
    return np.concatenate(parts) if parts else np.zeros(0, POST_DTYPE)


def _rank_bounds(rank: npt.NDArray[np.int32], n_ranks: int) -> npt.NDArray[np.int64]:
    return np.r_[0, np.cumsum(np.bincount(rank, minlength=n_ranks))].astype(np.int64)


def with_nbc_posts(ops: OpTable, t_enter: npt.NDArray[np.float64], t_exit: npt.NDArray[np.float64],
                   posts: npt.NDArray[np.void]) -> OpTable:
    """``ops`` (a program run's rows and times) with a post row before the computation that followed each post.

    A post inside a compute row splits it (the parts before and after the post keep the row's columns); a post
    between two calls with no computation goes before the first row that ended after it.  Completions whose post is
    unknown (a sub-communicator, or no ``posts``) get ``tag`` 0: they replay as blocking collectives.
    """
    n = len(ops)
    comp = np.flatnonzero(_IS_TWIN[ops.code] & (ops.tag > 0))
    world = ops.comm[comp] == 0
    bounds = _rank_bounds(ops.rank, ops.n_ranks)
    # the post of each world completion: (rank, serial) -> post record
    pkey = posts["rank"].astype(np.int64) * (1 << 40) + posts["serial"]
    ckey = ops.rank[comp].astype(np.int64) * (1 << 40) + ops.tag[comp]
    order = np.argsort(pkey, kind="stable")
    at = np.minimum(np.searchsorted(pkey[order], ckey), max(pkey.size - 1, 0))
    found = world & (pkey.size > 0) & (pkey[order][at] == ckey if pkey.size else False)
    tag = ops.tag.copy()
    tag[comp[~found]] = 0  # replayed as blocking at the completion
    comp, post = comp[found], order[at[found]]
    if comp.size == 0:
        return ops.replace_columns(tag=tag)
    t0, t1 = posts["t0"][post], posts["t1"][post]
    prank = ops.rank[comp]
    # first row of the post's rank that ended after the post began
    ins = np.empty(comp.size, np.int64)
    for r in np.unique(prank).tolist():  # one vectorised search per rank with posts
        sel = np.flatnonzero(prank == r)
        lo, hi = int(bounds[r]), int(bounds[r + 1])
        ins[sel] = lo + np.searchsorted(t_exit[lo:hi], t0[sel], side="right")
    ins = np.minimum(ins, bounds[prank + 1] - 1)  # never past the rank's last row
    host = (ops.code[ins] == CODE["compute"]) & (t_enter[ins] <= t0) & (ops.cause[ins] < 0)
    # output elements: (anchor row, class, sub-order); class 0 = post before the row, 1 = the row or its pieces
    m = np.bincount(ins[host], minlength=n)  # posts hosted by each compute row
    pieces = np.where(m > 0, m + 1, 1)
    src = np.repeat(np.arange(n), pieces)  # original row of every kept row or piece
    j = np.arange(src.size) - np.repeat(np.r_[0, np.cumsum(pieces)[:-1]], pieces)  # piece number
    # hosted posts in time order within their host: piece j runs from post j-1's exit to post j's enter
    h = np.flatnonzero(host)
    h = h[np.lexsort((t0[h], ins[h]))]
    first_of_host = np.r_[0, np.cumsum(m)[:-1]]
    starts_all = np.empty(src.size)
    ends_all = np.empty(src.size)
    starts_all[:] = t_enter[src]
    ends_all[:] = t_exit[src]
    if h.size:
        k_in_host = np.arange(h.size) - first_of_host[ins[h]]
        piece_first = np.r_[0, np.cumsum(pieces)[:-1]]
        ends_all[piece_first[ins[h]] + k_in_host] = t0[h]
        starts_all[piece_first[ins[h]] + k_in_host + 1] = t1[h]
    cols: dict[str, npt.NDArray[Any]] = {c: getattr(ops, c)[src] for c in OpTable.COLUMNS}
    cols["tag"] = tag[src]
    split = m[src] > 0
    cols["value"] = np.where(split, np.maximum(ends_all - starts_all, 0.0), cols["value"])
    row_key = np.stack([src, np.ones(src.size, np.int64), 2 * j]).astype(np.int64)
    # the posts themselves
    sub = np.zeros(comp.size, np.int64)
    if h.size:
        sub[h] = 2 * (np.arange(h.size) - first_of_host[ins[h]]) + 1
    nh = np.flatnonzero(~host)
    nh = nh[np.lexsort((t0[nh], ins[nh]))]
    sub[nh] = np.arange(nh.size) - np.r_[0, np.cumsum(np.bincount(ins[nh], minlength=n))[:-1]][ins[nh]]
    post_key = np.stack([ins, host.astype(np.int64), sub]).astype(np.int64)
    pc: dict[str, npt.NDArray[Any]] = {c: getattr(ops, c)[comp] for c in OpTable.COLUMNS}
    pc["code"] = _POST_OF[ops.code[comp]].astype(np.int8)
    pc["step"] = ops.step[ins]
    pc["name"] = np.full(comp.size, -1, np.int32)
    pc["cause"] = np.full(comp.size, -1, np.int64)
    pc["excess"] = np.zeros(comp.size)
    keys = np.concatenate([row_key, post_key], axis=1)
    order_out = np.lexsort((keys[2], keys[1], keys[0]))
    out = {c: np.concatenate([cols[c], pc[c]])[order_out] for c in OpTable.COLUMNS}
    out["seq"] = seq_within_rank(out["rank"], ops.n_ranks)
    return OpTable(n_ranks=ops.n_ranks, names=ops.names, ledger=ops.ledger, comms=ops.comms, **out)
