"""Synchronization points and synchronization intervals of an event table (DESIGN.md sections 5-6).

A wait state ``(p,i)`` waiting for ``(q,k)`` is a synchronization point
``S = ((p,i),(q,k))`` (Wu et al., formula 1).  Its synchronization interval is
``zeta = ((p,i',i),(q,k',k))``, where ``k'`` is the last synchronization
*delimiter* on ``q`` before ``k`` whose partners include ``p``, and ``i'`` the
last one on ``p`` before ``i`` whose partners include ``q``.

Delimiters are the synchronization points of two ranks:

* point-to-point: the wait states themselves, as Wu et al. define a synchronization point (the completion of
  ``(p,i)`` depends on ``(q,k)``, entered later) and as Scalasca records them (``SynchpointHandler.cpp``: late
  senders and late receivers): a late sender's receive completion on the receiver and its send on the sender, a
  late receiver's send completion and the receive's post.  A message that arrived without a wait synchronized
  nothing: an interval reaches back past it (past a ``waitall`` that completed it, too);
* collectives: every collective operation, with every member of its communicator (the ``comm`` column: 0 is
  ``MPI_COMM_WORLD``) as partner: a row's or column's collective does not synchronize ranks outside it.

The interval on a rank ``x`` between delimiters ``a`` and ``b`` holds the leaf
activities strictly between them in ``x``'s operation order.  The time of call
path ``c`` there, ``T_x(a,b)[c]``, is the exclusive time of ``c``'s activities
minus the wait time of the wait states among them (DESIGN.md section 6).

Call paths: a non-MPI activity (compute, noise, overhead, ...) belongs to the
call path of its enclosing regions (``path``; ``"(top level)"`` outside regions); an
MPI operation has its own call path ``path>MPI_<op>``.  This is what a tracing
tool sees: injected noise or overhead is time of the region it lands in.

Everything here is vectorised with numpy over the columns of the event table.

Examples
--------
Rank 0 computes 3 s, rank 1 computes 1 s, then both enter a barrier: rank 1
waits 2 s for rank 0, and its interval compares both ranks' compute.

>>> from waitlab.models.analysis.waitstates import make_events, wait_states
>>> ev = make_events(rank=[0, 0, 1, 1], op=["compute", "barrier", "compute", "barrier"],
...                  enter=[0.0, 3.0, 0.0, 1.0], exit=[3.0, 3.0, 1.0, 3.0], match=[-1, 0, -1, 0])
>>> sp = sync_points(ev, wait_states(ev))
>>> sp.wait.tolist(), sp.rank.tolist(), sp.peer_rank.tolist()
([2.0], [1], [0])
>>> sp.interval_times(sp.q_interval[0]), sp.interval_times(sp.p_interval[0])
({'(top level)': 3.0}, {'(top level)': 1.0})
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from waitlab.models.analysis.callpaths import (
    CallPaths,
    ExclusiveTimes,
    FloatArray,
    IntArray,
    call_paths,
    exclusive_times,
    isin_names,
    native_codes,
    pattern_codes,
    searchsorted_many,
    unique_inverse,
)
from waitlab.models.analysis.ties import TIE_TOLERANCE, TieCandidates, split_culprits, tie_candidates
from waitlab.models.analysis.waitstates import EPSILON, PATTERNS
from waitlab.models.vocabulary import COLLECTIVE_ACTIONS

#: Pairwise wait-state patterns: one waiter, one culprit (its peer); all other patterns are collective.
#: The one-sided ones (Scalasca's MPI_RMA patterns, :mod:`~waitlab.models.analysis.rma_waits`): Late Post
#: (an origin waits for its target's win_post), Early Wait and Late Complete (a target waits for an origin's
#: win_complete), Lock Contention (a lock waits for one earlier epoch's unlock).  Wait at Fence, Early Fence
#: (part of it) and Wait at Window Create/Free stay collective: they are waits inside a call of every rank.
P2P_PATTERNS = ("late_sender", "late_receiver", "rma_late_post", "rma_early_wait", "rma_late_complete",
                "rma_lock_contention")
_P2P_TABLE = np.array([p in P2P_PATTERNS for p in PATTERNS], bool)
_COLLECTIVE_OPS = tuple(sorted(COLLECTIVE_ACTIONS))
#: The pairwise wait states that are synchronization points between two ranks (the one-sided ones are not).
_P2P_SYNC = ("late_sender", "late_receiver")


@dataclass(frozen=True)
class Delimiters:
    """Synchronization delimiters of an event table, indexed for "last one before row r with partner y"."""

    n_rows: int
    n_ranks: int
    rank: npt.NDArray[np.int32]
    first_row: IntArray  # first event row of each rank
    p2p_key: IntArray  # sorted ((rank * n_ranks + partner) * n_rows + row) of point-to-point wait states, may repeat
    coll_rows: IntArray  # sorted rows of MPI_COMM_WORLD's collectives (every rank a partner)
    n_comms: int
    sub_key: IntArray  # sorted ((rank * n_comms + comm) * n_rows + row) of other communicators' collectives
    members: IntArray  # sorted (comm * n_ranks + rank) of those communicators' members
    comms_of: IntArray  # [rank, slot]: the communicators (other than the world) of each rank, -1 beyond

    @classmethod
    def build(cls, events: pd.DataFrame) -> Delimiters:
        rank = events["rank"].to_numpy().astype(np.int32, copy=False)
        n = len(events)
        n_ranks = int(rank.max()) + 1 if n else 0
        if n_ranks * n_ranks * (n + 1) >= 2**62:
            raise ValueError(f"event table too large for delimiter keys ({n_ranks} ranks, {n} rows)")
        op, op_names = native_codes(events["op"])
        match = events["match"].to_numpy()
        comm = (events["comm"].to_numpy().astype(np.int64) if "comm" in events.columns
                else np.zeros(n, np.int64))
        coll = isin_names(op, op_names, _COLLECTIVE_OPS) & (match >= 0)
        world = np.flatnonzero(coll & (comm <= 0))
        sub = np.flatnonzero(coll & (comm > 0))
        n_comms = int(comm[sub].max()) + 1 if sub.size else 0
        if n_ranks * max(n_comms, 1) * (n + 1) >= 2**62:
            raise ValueError(f"event table too large for delimiter keys ({n_comms} communicators, {n} rows)")
        pairs = np.unique(rank[sub].astype(np.int64) * max(n_comms, 1) + comm[sub])  # (rank, communicator)
        slot_rank, slot_comm = pairs // max(n_comms, 1), pairs % max(n_comms, 1)
        per_rank = np.bincount(slot_rank, minlength=n_ranks)
        comms_of = np.full((n_ranks, int(per_rank.max()) if pairs.size else 0), -1, np.int64)
        comms_of[slot_rank, np.arange(pairs.size) - np.repeat(np.cumsum(per_rank) - per_rank, per_rank)] = slot_comm
        sub_key = np.sort((rank[sub].astype(np.int64) * n_comms + comm[sub]) * n + sub)
        counts = np.bincount(rank, minlength=n_ranks)
        first = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
        empty = np.zeros(0, np.int64)  # the point-to-point ones are the wait states (:meth:`with_waits`)
        return cls(n, n_ranks, rank, first, empty, world.astype(np.int64), n_comms, sub_key,
                   np.sort(slot_comm * n_ranks + slot_rank), comms_of)

    def with_waits(self, waits: pd.DataFrame) -> Delimiters:
        """These delimiters and the point-to-point synchronization points of ``waits``: each late-sender or
        late-receiver wait state, on the waiting rank at its event and on its peer at the peer's event."""
        p2p = np.flatnonzero(isin_names(*native_codes(waits["pattern"]), _P2P_SYNC))
        if not p2p.size or not self.n_rows:
            return self
        n, nr = self.n_rows, self.n_ranks
        p2p = p2p[(waits["peer_event"].to_numpy()[p2p] >= 0) & (waits["peer_rank"].to_numpy()[p2p] >= 0)]
        rank = waits["rank"].to_numpy()[p2p].astype(np.int64)
        peer = waits["peer_rank"].to_numpy()[p2p].astype(np.int64)
        key = np.sort(np.concatenate(((rank * nr + peer) * n + waits["event"].to_numpy()[p2p].astype(np.int64),
                                      (peer * nr + rank) * n + waits["peer_event"].to_numpy()[p2p].astype(np.int64))))
        return replace(self, p2p_key=key)

    def last_before(self, x: IntArray, row: IntArray, partner: IntArray) -> IntArray:
        """Last delimiter on rank ``x`` strictly before ``row`` with ``partner`` (a point-to-point wait state of
        the two, or a collective of a communicator holding both); ``first_row[x] - 1`` if none."""
        out = self.first_row[x] - 1
        n = self.n_rows
        if self.p2p_key.size:
            group = x * self.n_ranks + partner
            j = searchsorted_many(self.p2p_key, group * n + row) - 1
            jc = np.maximum(j, 0)
            ok = (j >= 0) & (self.p2p_key[jc] // n == group)
            out = np.where(ok, np.maximum(out, self.p2p_key[jc] % n), out)
        if self.coll_rows.size:
            j = searchsorted_many(self.coll_rows, row) - 1
            jc = np.maximum(j, 0)
            ok = (j >= 0) & (self.rank[self.coll_rows[jc]] == x)
            out = np.where(ok, np.maximum(out, self.coll_rows[jc]), out)
        for slot in range(self.comms_of.shape[1]):  # the communicators x and its partner share
            c = self.comms_of[x, slot]
            want = c * self.n_ranks + partner
            m = np.minimum(np.searchsorted(self.members, want), self.members.size - 1)
            shared = (c >= 0) & (self.members[m] == want)
            group = x * self.n_comms + c
            j = searchsorted_many(self.sub_key, group * n + row) - 1
            jc = np.maximum(j, 0)
            ok = shared & (j >= 0) & (self.sub_key[jc] // n == group)
            out = np.where(ok, np.maximum(out, self.sub_key[jc] % n), out)
        return out


@dataclass(frozen=True)
class EventIndex:
    """What :func:`sync_points` derives from the event table alone (call paths, delimiters, tie candidates):
    built once by :func:`event_index` and shared by the models run on one table."""

    callpaths: CallPaths
    delimiters: Delimiters
    ties: TieCandidates
    total_time: FloatArray  # raw (wait-inclusive) leaf seconds per call path over all ranks


def _total_time(events: pd.DataFrame, cps: CallPaths) -> FloatArray:
    leaf = cps.code >= 0
    raw = events["exit"].to_numpy() - events["enter"].to_numpy()
    return np.bincount(cps.code[leaf], weights=raw[leaf], minlength=len(cps)).astype(np.float64)


def event_index(events: pd.DataFrame, callpaths: CallPaths | None = None,
                ties: TieCandidates | None = None) -> EventIndex:
    """The :class:`EventIndex` of an event table (``callpaths``, ``ties``: its :func:`call_paths` and
    :func:`~waitlab.models.analysis.ties.tie_candidates`, when already made)."""
    cps = callpaths if callpaths is not None else call_paths(events)
    return EventIndex(cps, Delimiters.build(events), ties if ties is not None else tie_candidates(events),
                      _total_time(events, cps))


@dataclass(frozen=True)
class SyncPoints:
    """Synchronization points (wait states) with their synchronization intervals.

    Per wait state (rows sorted by waiting event; ``index`` gives the row of the
    input ``waits`` table): ``event`` (p,i), ``peer_event`` (q,k), ``rank`` p,
    ``peer_rank`` q, ``wait`` omega(p,i), ``pattern`` (index into PATTERNS),
    ``collective``, ``instance`` (collective instance id or -1), ``p_start`` i',
    ``q_start`` k', ``p_interval`` / ``q_interval`` (index of the unique
    interval, -1 when not computed), ``inner_lo``/``inner_hi`` (the wait
    states of q strictly between k' and k are rows ``inner_lo:inner_hi``).

    Per unique interval: ``iv_rank``, ``iv_start`` (delimiter row, exclusive),
    ``iv_end`` (row, exclusive); its call-path times are row ``j`` of ``dense`` when the matrix is small enough,
    else the CSR slice ``iv_offsets[j]:iv_offsets[j+1]`` of ``entry_callpath`` / ``entry_time`` (empty with
    ``dense``: the same data is not kept twice).
    """

    index: IntArray
    event: IntArray
    peer_event: IntArray
    rank: IntArray
    peer_rank: IntArray
    wait: FloatArray
    pattern: npt.NDArray[np.int8]
    collective: npt.NDArray[np.bool_]
    instance: IntArray
    p_start: IntArray
    q_start: IntArray
    p_interval: IntArray
    q_interval: IntArray
    inner_lo: IntArray
    inner_hi: IntArray
    iv_rank: IntArray
    iv_start: IntArray
    iv_end: IntArray
    iv_offsets: IntArray
    entry_callpath: IntArray
    entry_time: FloatArray
    callpaths: CallPaths
    total_time: FloatArray  # raw (wait-inclusive) leaf seconds per call path over all ranks
    dense: FloatArray | None = None  # [interval, call path] times when small enough (then no CSR)
    n_input: int = -1  # rows of the input waits table (``index`` repeats rows when ties are split)

    def __len__(self) -> int:
        return int(self.event.size)

    def interval_times(self, j: int) -> dict[str, float]:
        """``{call path: T}`` of interval ``j`` (for inspection and doctests)."""
        if self.dense is not None:
            cps = np.flatnonzero(self.dense[j])
            return {self.callpaths.names[c]: float(self.dense[j, c]) for c in cps.tolist()}
        lo, hi = int(self.iv_offsets[j]), int(self.iv_offsets[j + 1])
        return {self.callpaths.names[c]: float(t) for c, t in
                zip(self.entry_callpath[lo:hi].tolist(), self.entry_time[lo:hi].tolist(), strict=True)}

    def without_times(self) -> SyncPoints:
        """These synchronization points without their intervals' call-path times (``dense``, ``iv_offsets``,
        ``entry_callpath``, ``entry_time``: empty), for a model done with :meth:`deltas` to free them.

        >>> from waitlab.models.analysis.waitstates import make_events, wait_states
        >>> ev = make_events(rank=[0, 0, 1, 1], op=["compute", "barrier", "compute", "barrier"],
        ...                  enter=[0.0, 3.0, 0.0, 1.0], exit=[3.0, 3.0, 1.0, 3.0], match=[-1, 0, -1, 0])
        >>> sp = sync_points(ev, wait_states(ev)).without_times()
        >>> sp.dense, sp.entry_time.size, sp.wait.tolist()
        (None, 0, [2.0])
        """
        empty = np.zeros(0, np.int64)
        return replace(self, dense=None, iv_offsets=empty, entry_callpath=empty, entry_time=np.zeros(0))

    def deltas(self, rows: IntArray) -> tuple[IntArray, IntArray, FloatArray]:
        """Positive per-call-path excess of q over p in the intervals of wait states ``rows``.

        Returns ``(wait_row, call_path, delta)`` triples with
        ``delta = T_q(k',k)[c] - T_p(i',i)[c] > 0`` (DESIGN.md section 6; Wu et al. formula 4); a delta of at most
        :data:`~waitlab.models.analysis.waitstates.EPSILON` (1e-12 s, below which a wait is the float noise of the
        simulated clock, too) is no excess: two equal times summed in another order differ by ~1e-17 s.
        """
        iq = self.q_interval[rows]
        ip = self.p_interval[rows]
        if self.dense is not None:  # a block of wait states at a time: no [wait state, call path] matrix of all
            ws, cs, ds = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
            for a in range(0, rows.size, _CHUNK_ROWS):
                d = self.dense[iq[a:a + _CHUNK_ROWS]]
                d -= self.dense[ip[a:a + _CHUNK_ROWS]]
                w, c = np.nonzero(d > EPSILON)
                ws.append(rows[a:a + _CHUNK_ROWS][w].astype(np.int64))
                cs.append(c.astype(np.int64))
                ds.append(d[w, c])
            w_all = np.concatenate(ws)  # one column at a time, its blocks freed: the triples are not held twice
            del ws
            c_all = np.concatenate(cs)
            del cs
            return w_all, c_all, np.concatenate(ds)
        lo, hi = self.iv_offsets[iq], self.iv_offsets[iq + 1]
        lens = hi - lo
        total = int(lens.sum())
        w_of = np.repeat(rows, lens)
        pos = np.repeat(lo - np.concatenate(([0], np.cumsum(lens)[:-1])), lens) + np.arange(total)
        cp = self.entry_callpath[pos]
        tq = self.entry_time[pos]
        del pos
        # T_p of the same call path: look it up in p's interval slice (sorted by call path).
        n_cp = max(len(self.callpaths), 1)
        ip_rep = np.repeat(ip, lens)
        entry_key = _entry_keys(self.iv_offsets, self.entry_callpath, n_cp)
        want = ip_rep * n_cp + cp
        j = np.searchsorted(entry_key, want)
        jc = np.minimum(j, max(entry_key.size - 1, 0))
        found = (j < entry_key.size) & (entry_key[jc] == want) if entry_key.size else np.zeros(total, bool)
        tp = np.where(found, self.entry_time[jc] if entry_key.size else 0.0, 0.0)
        delta = tq - tp
        keep = delta > EPSILON
        return w_of[keep], cp[keep], delta[keep]


def _entry_keys(offsets: IntArray, callpath: IntArray, n_cp: int) -> IntArray:
    lens = np.diff(offsets)
    return np.repeat(np.arange(lens.size, dtype=np.int64), lens) * n_cp + callpath


def sync_points(events: pd.DataFrame, waits: pd.DataFrame, select: npt.NDArray[np.bool_] | None = None,
                *, callpaths: CallPaths | None = None, dense_limit: int | None = None, split_ties: bool = False,
                tie_budget: int | None = None, tie_tolerance: float = TIE_TOLERANCE,
                tie_relative: float = 0.0, index: EventIndex | None = None) -> SyncPoints:
    """Synchronization points of ``waits`` and their intervals (DESIGN.md section 6).

    Parameters
    ----------
    events, waits : DataFrame
        The event table and its wait states (docs/event_table.md).
    select : bool array over ``waits`` rows, optional
        Only compute intervals for these wait states (others get interval -1);
        all by default.
    callpaths : CallPaths, optional
        Precomputed :func:`call_paths` of ``events``.
    dense_limit : int, optional
        Keep interval times as a dense [interval, call path] matrix up to this many cells
        (default ``2 * len(events) + 1e6``, i.e. <= 16 bytes per event); sparse beyond.
    split_ties : bool
        One sync point per tied culprit of a wait state (Enter times within ``tie_tolerance``), each with an
        equal share of the wait (:mod:`~waitlab.models.analysis.ties`); ``index`` then repeats the wait
        state's row.
        Default: one sync point per wait state, waiting for its ``peer_event`` (the lowest-numbered tied rank).
    tie_budget : int, optional
        Most extra sync points the splits may add (see :func:`~waitlab.models.analysis.ties.split_culprits`).
    tie_tolerance : float
        Culprits whose Enter times differ by at most this are tied (default
        :data:`~waitlab.models.analysis.ties.TIE_TOLERANCE`, 1 us; 0: exact ties only).
    tie_relative : float
        Also tied: culprits within this fraction of the wait of the latest (0: off; the relative tie rule of
        :mod:`~waitlab.models.analysis.ties`).
    index : EventIndex, optional
        :func:`event_index` of ``events``, when already built (its call paths replace ``callpaths``).

    Returns
    -------
    SyncPoints
    """
    cps = index.callpaths if index is not None else callpaths if callpaths is not None else call_paths(events)
    n_in = len(waits)
    if split_ties:  # one sync point per (wait state, tied culprit), each with an equal share of the wait
        origin, culprit = split_culprits(events, waits, select, tie_budget, tie_tolerance, tie_relative,
                                         index.ties if index is not None else None)
        share = 1.0 / np.bincount(origin, minlength=n_in)[origin]
    else:
        origin = np.arange(n_in, dtype=np.int64)
        culprit, share = waits["peer_event"].to_numpy(), np.ones(n_in)
    order = np.argsort(waits["event"].to_numpy()[origin], kind="stable")
    src = origin[order]
    event = waits["event"].to_numpy()[src].astype(np.int64, copy=False)
    peer_event = culprit[order].astype(np.int64, copy=False)
    wait = (waits["wait"].to_numpy()[src] * share[order]).astype(np.float64, copy=False)
    del origin, culprit, share, order
    pattern = pattern_codes(waits)[src]
    rank_col = events["rank"].to_numpy()
    rank = rank_col[event].astype(np.int64)
    peer_rank = rank_col[peer_event].astype(np.int64)
    collective = ~_P2P_TABLE[pattern]
    match = events["match"].to_numpy()
    instance = np.where(collective, match[event], -1).astype(np.int64)
    n_w = event.size
    sel = np.ones(n_w, bool) if select is None else np.asarray(select, bool)[src]

    delim = (index.delimiters if index is not None else Delimiters.build(events)).with_waits(waits)
    rows = np.flatnonzero(sel)
    p_start = np.full(n_w, -1, np.int64)
    q_start = np.full(n_w, -1, np.int64)
    p_start[rows] = delim.last_before(rank[rows], event[rows], peer_rank[rows])
    q_start[rows] = delim.last_before(peer_rank[rows], peer_event[rows], rank[rows])

    # Wait states of q strictly between k' and k (rows of this sorted table).
    inner_lo = np.zeros(n_w, np.int64)
    inner_hi = np.zeros(n_w, np.int64)
    inner_lo[rows] = np.searchsorted(event, q_start[rows], side="right")
    inner_hi[rows] = np.searchsorted(event, peer_event[rows], side="left")
    inner_hi = np.maximum(inner_hi, inner_lo)

    # Unique intervals (start delimiter, end row); the end row fixes the rank.
    n_rows = len(events)
    starts = np.concatenate((p_start[rows], q_start[rows]))
    ends = np.concatenate((event[rows], peer_event[rows]))
    key = (starts + 1) * (n_rows + 1) + ends
    uniq, inv = unique_inverse(key)
    iv_start = uniq // (n_rows + 1) - 1
    iv_end = uniq % (n_rows + 1)
    p_interval = np.full(n_w, -1, np.int64)
    q_interval = np.full(n_w, -1, np.int64)
    p_interval[rows] = inv[: rows.size]
    q_interval[rows] = inv[rows.size:]
    del starts, ends, key, uniq, inv, rows, sel  # freed before the interval times (their peak)

    limit = 2 * n_rows + 1_000_000 if dense_limit is None else dense_limit
    offsets, entry_cp, entry_t, dense = _interval_times(iv_start, iv_end, cps.code, exclusive_times(events, waits),
                                                        len(cps), dense_limit=limit)
    total_time = index.total_time if index is not None else _total_time(events, cps)
    return SyncPoints(
        index=src.astype(np.int64, copy=False), event=event, peer_event=peer_event, rank=rank, peer_rank=peer_rank,
        wait=wait, pattern=pattern, collective=collective, instance=instance, p_start=p_start, q_start=q_start,
        p_interval=p_interval, q_interval=q_interval, inner_lo=inner_lo, inner_hi=inner_hi,
        iv_rank=rank_col[np.minimum(iv_end, max(n_rows - 1, 0))].astype(np.int64) if n_rows else iv_end,
        iv_start=iv_start, iv_end=iv_end, iv_offsets=offsets, entry_callpath=entry_cp, entry_time=entry_t,
        callpaths=cps, total_time=total_time, dense=dense, n_input=n_in,
    )  # fmt: skip


def _interval_times(iv_start: IntArray, iv_end: IntArray, cp_code: npt.NDArray[np.int32], excl: ExclusiveTimes,
                    n_cp: int, dense_limit: int = 0) -> tuple[IntArray, IntArray, FloatArray, FloatArray | None]:
    """Sum ``excl`` per (interval, call path) over the leaf rows strictly inside each interval.

    Returns CSR ``offsets`` (per interval) and the entries sorted by (interval, call path), or, when the dense
    ``[interval, call path]`` matrix has at most ``dense_limit`` cells, that matrix (and empty entries).
    Entries that sum to exactly 0 may be left out (they never make a positive delta).
    """
    n_iv = iv_start.size
    n_cp = max(n_cp, 1)
    lens = np.maximum(iv_end - iv_start - 1, 0)
    total = int(lens.sum())
    use_dense = 0 < dense_limit and n_iv * n_cp <= dense_limit
    if total == 0:
        dense = np.zeros((n_iv, n_cp)) if use_dense else None
        return np.zeros(n_iv + 1, np.int64), np.zeros(0, np.int64), np.zeros(0), dense
    if use_dense:  # a slice of intervals at a time: the entries' arrays stay small (each sum is one interval's)
        flat = np.empty(n_iv * n_cp)
        ends = np.cumsum(lens)
        cuts = [0, *np.searchsorted(ends, np.arange(_CHUNK_ENTRIES, total, _CHUNK_ENTRIES), side="right").tolist(),
                n_iv]
        for a, b in pairwise(cuts):
            if b > a:
                key, t = _entries(iv_start[a:b], lens[a:b], cp_code, excl, n_cp)
                flat[a * n_cp:b * n_cp] = np.bincount(key, weights=t, minlength=(b - a) * n_cp)
        return np.zeros(n_iv + 1, np.int64), np.zeros(0, np.int64), np.zeros(0), flat.reshape(n_iv, n_cp)
    key, t = _entries(iv_start, lens, cp_code, excl, n_cp)
    codes, uniq = pd.factorize(key, sort=False)
    sums = np.bincount(codes, weights=t, minlength=uniq.size)
    del codes, key, t
    o = np.argsort(uniq, kind="stable")
    uniq = np.asarray(uniq)[o]
    sums = sums[o]
    entry_iv = uniq // n_cp
    offsets = np.searchsorted(entry_iv, np.arange(n_iv + 1))
    return offsets.astype(np.int64), (uniq % n_cp).astype(np.int64), sums.astype(np.float64), None


#: Entries (leaf rows inside intervals) summed at a time by :func:`_interval_times`.
_CHUNK_ENTRIES = 1 << 18
#: Wait states whose deltas :meth:`SyncPoints.deltas` takes from the dense matrix at a time.
_CHUNK_ROWS = 1 << 16


def _entries(iv_start: IntArray, lens: IntArray, cp_code: npt.NDArray[np.int32], excl: ExclusiveTimes,
             n_cp: int) -> tuple[IntArray, FloatArray]:
    """``(interval * n_cp + call path, exclusive time)`` of the leaf rows inside intervals ``iv_start`` (``lens``
    rows each), intervals numbered from 0 in the given order."""
    total = int(lens.sum())
    csum = np.concatenate(([0], np.cumsum(lens)[:-1]))
    rows = np.repeat(iv_start + 1 - csum, lens) + np.arange(total)
    cp = cp_code[rows].astype(np.int64)
    t = excl[rows]
    del rows
    key = np.repeat(np.arange(lens.size, dtype=np.int64) * n_cp, lens)
    key += cp
    leaf = cp >= 0
    return key[leaf], t[leaf]


def wait_table(sp: SyncPoints, **columns: npt.NDArray[Any]) -> pd.DataFrame:
    """A per-wait-state table in the row order of the original ``waits`` (for model results).

    When ties were split (several sync points per wait state), float columns are summed over the shares,
    the others taken from the first share (the lowest-numbered tied rank: ``peer_rank``); ``tied`` is the
    number of ranks the wait was split among (1: no tie)."""
    n = sp.n_input if sp.n_input >= 0 else len(sp)
    first = np.zeros(n, np.int64)
    u, at = np.unique(sp.index, return_index=True)
    first[u] = at  # first share of each wait state
    base = {
        "event": sp.event, "rank": sp.rank, "pattern": pd.Categorical.from_codes(sp.pattern, list(PATTERNS)),
        "wait": sp.wait, "peer_rank": sp.peer_rank, "peer_event": sp.peer_event,
    }  # fmt: skip
    base.update(columns)
    out: dict[str, Any] = {}
    for k, v in base.items():
        summed = v.dtype.kind == "f" and len(sp) != n  # (no np.asarray: it makes a string per row of a categorical)
        out[k] = np.bincount(sp.index, weights=v, minlength=n) if summed else v[first]
    out["tied"] = np.bincount(sp.index, minlength=n).astype(np.int32)
    return pd.DataFrame(out, copy=False)  # every column is a new array: no copy into one block

