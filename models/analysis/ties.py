"""Tied culprits of wait states: the blame is split equally among them (issues 13 and 24).

A collective wait state names one rank it waited for (``peer_rank`` of the wait-state table,
:mod:`waitlab.models.analysis.waitstates`): the *lowest-numbered* of the ranks that arrived last.  When
several ranks arrived at exactly the same, latest time they are equally to blame, and the diagnosis
models (CWP-DM, H-CWP-DM) split the wait into equal shares, one per tied rank:

* wait at barrier / wait at NxN: every member whose Enter equals the latest Enter of the instance;
* early reduce: every non-root member whose Enter equals the latest Enter of the senders;
* early scan: every lower-ranked member whose Enter equals the waiter's prefix maximum.

* late sender: every sender, among the receives the waiting call completes (a ``waitall``), whose send
  was entered at exactly the same time as the latest.

*Near* ties count as ties: culprits whose Enter is within :data:`TIE_TOLERANCE` (1 us) of each other
(single linkage down from the latest) are tied.  A tracer cannot order two ranks' events closer than
its clocks agree: timers resolve tens of nanoseconds on one node (PAPI_get_real_nsec, Score-P's
TSC-based timer), but timestamps of different nodes agree only to about a microsecond after offset and
drift correction (Doleschal, Knuepfer, Mueller, Nagel, "Internal timer synchronization for parallel
event tracing", EuroPVM/MPI 2008; Becker, Rabenseifner, Wolf, Linford, "Scalable timestamp
synchronization for event traces of message-passing applications", Parallel Computing 35(12), 2009).
SMPI releases equally late ranks from a collective sub-microseconds apart, so without a tolerance one of
them took all the blame (17x to 61x the others', measured on barrier, reduce and alltoall at 8 and 16
ranks).  ``tolerance = 0`` gives exact ties only.

*Relative* ties (off by default; ``relative = f`` > 0): a wait state's culprits are also every candidate that
arrived within ``f`` times that wait of its latest culprit.  Skew that grows with the run (SMPI's binomial reduce
lets equally loaded ranks leave microseconds apart, more at every repetition: an ATS-style early reduce at 16 ranks
gave one rank 61x another's blame at 1 us) is then split as the tie it is for a wait a thousand times longer.  The
default stays absolute, a tracer's clock agreement: a relative rule also ties ranks that were genuinely, if
slightly, later, so it is a choice about the question asked, not about the clock.  :func:`near_equal_waits` names
the wait states a rule decided between culprits that arrived within a fraction of the wait of each other (the
diagnosis reports their share at :data:`NEAR_FRACTION`).

Late receivers, one-sided wait states and late broadcasts are never split (a ``waitall`` of sends whose
receivers are exactly equally late still blames the one receiver the wait-state table names: a known gap).

Examples
--------
Ranks 1 and 3 arrive 2 s after ranks 0 and 2 at an allreduce: each wait has two culprits.

>>> from waitlab.models.analysis.waitstates import make_events, wait_states
>>> ev = make_events(rank=[0, 1, 2, 3], op=["allreduce"] * 4, enter=[1.0, 3.0, 1.0, 3.0], exit=[3.0] * 4,
...                  match=[0] * 4)
>>> ws = wait_states(ev)
>>> ws["peer_rank"].tolist()
[1, 1]
>>> row, culprit = tied_culprits(ev, ws)
>>> row.tolist(), ev["rank"].to_numpy()[culprit].tolist()
([0, 0, 1, 1], [1, 3, 1, 3])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from waitlab.models.analysis.callpaths import IntArray, isin_names, native_codes, pattern_codes, searchsorted_many
from waitlab.models.analysis.waitstates import BARRIER_OPS, N_TO_ONE_OPS, NXN_OPS, PATTERNS, SCAN_OPS
from waitlab.models.vocabulary import RECV_ACTIONS, SEND_ACTIONS

#: Patterns whose culprit is "the last to arrive" among several members (ties possible).
TIE_PATTERNS = ("late_sender", "wait_at_barrier", "wait_at_nxn", "early_reduce", "early_scan")
_TIE_OPS = (*BARRIER_OPS, *NXN_OPS, *N_TO_ONE_OPS, *SCAN_OPS)
_IS_TIE = np.array([p in TIE_PATTERNS for p in PATTERNS], bool)
_IS_SCAN = np.array([p == "early_scan" for p in PATTERNS], bool)
#: Fraction of a wait within which culprits count as near-equal in the diagnosis's report (:func:`near_equal_waits`).
NEAR_FRACTION = 0.01
#: Two culprits are tied when their Enter times differ by at most this many seconds (see the module doc).
TIE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class TieCandidates:
    """Every event that can be a tied culprit, sorted by group, then Enter, then rank (:func:`tie_candidates`).

    Groups: the members of the collectives that can tie (roots of reduce/gather send nothing: out), by
    ``(op code, instance)``; the senders of the receives a blocking call completes, by ``(-1, that call)``.
    It depends on the event table only: build it once and give it to every :func:`tied_culprits` of that table.
    """

    cand: npt.NDArray[np.signedinteger]  # event rows (int32 when they fit: built once, kept by every model)
    g1: npt.NDArray[np.signedinteger]
    g2: npt.NDArray[np.signedinteger]
    enter: npt.NDArray[np.float64]
    by_row: npt.NDArray[np.signedinteger]  # positions of ``cand`` sorted by event row (stable)
    sorted_rows: npt.NDArray[np.signedinteger]  # cand[by_row]


def tie_candidates(events: pd.DataFrame) -> TieCandidates:
    """The :class:`TieCandidates` of an event table."""
    rank = events["rank"].to_numpy()
    enter, match, peer = events["enter"].to_numpy(), events["match"].to_numpy(), events["peer"].to_numpy()
    op, names = native_codes(events["op"])
    coll = np.flatnonzero(isin_names(op, names, _TIE_OPS) & (match >= 0))
    coll = coll[~(isin_names(op, names, N_TO_ONE_OPS)[coll] & (rank[coll] == peer[coll]))]
    snd, blocker = _senders_of_completed_receives(events, op, names, match)
    cand = np.concatenate((coll, snd))
    c_g1 = np.concatenate((op[coll].astype(np.int64), np.full(snd.size, -1, np.int64)))
    c_g2 = np.concatenate((match[coll], blocker))
    order = np.lexsort((rank[cand], enter[cand], c_g2, c_g1))
    cand, c_g1, c_g2 = cand[order], c_g1[order], c_g2[order]
    by_row = np.argsort(cand, kind="stable")  # cand is not sorted by row: find each culprit's position
    # int32 when every value fits: half the bytes of what the models keep (1.6 M candidates at 7 M events)
    dt = np.int32 if max(len(events), int(c_g2.max(initial=0)) + 1, int(c_g1.max(initial=0)) + 1) < 2**31 \
        else np.int64
    return TieCandidates(cand.astype(dt), c_g1.astype(dt), c_g2.astype(dt), enter[cand], by_row.astype(dt),
                         cand[by_row].astype(dt))


def tied_culprits(events: pd.DataFrame, waits: pd.DataFrame, tolerance: float = TIE_TOLERANCE,
                  relative: float = 0.0, candidates: TieCandidates | None = None) -> tuple[IntArray, IntArray]:
    """Every (wait-state row, culprit event row) pair, ties included.

    Parameters
    ----------
    events, waits : DataFrame
        The event table and its wait states.
    tolerance : float
        Culprits whose Enter times differ by at most this (s) are tied (0: exact ties only).
    relative : float
        Also tied: candidates that arrived within ``relative`` times the wait of the wait state's latest culprit
        (0: off; see the module doc).
    candidates : TieCandidates, optional
        :func:`tie_candidates` of ``events``, when already built.

    Returns
    -------
    row, culprit : int64 arrays
        Sorted by ``row``; within a row by the culprit's rank.  A wait state without a tie has one pair,
        its own ``peer_event``.
    """
    n_w = len(waits)
    peer_event = waits["peer_event"].to_numpy().astype(np.int64)
    rows = np.arange(n_w, dtype=np.int64)
    pat = pattern_codes(waits)
    tie = np.flatnonzero(_IS_TIE[pat]) if n_w else rows
    if tie.size == 0:
        return rows, peer_event
    tc = candidates if candidates is not None else tie_candidates(events)
    cand, c_g1, c_g2, c_enter = tc.cand, tc.g1, tc.g2, tc.enter
    new = np.r_[True, (c_g1[1:] != c_g1[:-1]) | (c_g2[1:] != c_g2[:-1]) | (c_enter[1:] - c_enter[:-1] > tolerance)]
    group = np.cumsum(new) - 1
    g_start = np.flatnonzero(new)
    g_end = np.r_[g_start[1:], cand.size]
    pos = tc.by_row[searchsorted_many(tc.sorted_rows, peer_event[tie])]
    if not np.array_equal(cand[pos], peer_event[tie]):
        raise ValueError("tied_culprits: a wait state names a culprit that is not a member of its instance "
                         "or the sender of a receive its call completes")
    g = group[pos]
    lo, hi = g_start[g], g_end[g]
    if relative > 0:  # back to the first candidate of the instance within relative x wait of the culprit
        lo = np.minimum(lo, _first_at_or_after(c_g1, c_g2, c_enter, pos,
                                               c_enter[pos] - relative * waits["wait"].to_numpy()[tie]))
    scan = _IS_SCAN[pat[tie]]
    if scan.any():  # only lower-ranked members count for a scan: ranks are sorted within the group
        rank = events["rank"].to_numpy().astype(np.int64)
        r_max = int(rank.max()) + 1
        key = group * r_max + rank[cand]
        own = rank[waits["event"].to_numpy()[tie]]
        hi = np.where(scan, np.searchsorted(key, g * r_max + own, side="left"), hi)
    m = np.ones(n_w, np.int64)
    m[tie] = hi - lo
    out_row = np.repeat(rows, m)
    culprit = np.repeat(peer_event, m)
    first = np.concatenate(([0], np.cumsum(m)[:-1]))
    lens = hi - lo
    at = np.repeat(first[tie], lens) + (np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens))
    culprit[at] = cand[np.repeat(lo, lens) + (at - np.repeat(first[tie], lens))]
    if tolerance > 0 or relative > 0:  # a near-tied group may hold the waiter itself: it does not wait for itself
        own = culprit == waits["event"].to_numpy().astype(np.int64)[out_row]
        out_row, culprit = out_row[~own], culprit[~own]
    return out_row, culprit


def _candidates(events: pd.DataFrame, waits: pd.DataFrame, given: TieCandidates | None) -> TieCandidates | None:
    """``given``, else the :func:`tie_candidates` of ``events`` when a wait state can tie (built once for the
    several :func:`tied_culprits` of one caller)."""
    if given is not None or not _IS_TIE[pattern_codes(waits)].any():
        return given
    return tie_candidates(events)


def _first_at_or_after(g1: IntArray, g2: IntArray, enter: npt.NDArray[np.float64], pos: IntArray,
                       threshold: npt.NDArray[np.float64]) -> IntArray:
    """Per query: the position of the first candidate of the group of candidate ``pos`` (candidates sorted by group
    ``(g1, g2)``, then Enter) whose Enter is at least ``threshold`` (one merge of candidates and queries)."""
    new = np.r_[True, (g1[1:] != g1[:-1]) | (g2[1:] != g2[:-1])]
    inst = np.cumsum(new) - 1
    key_inst = np.concatenate((inst, inst[pos]))
    key_enter = np.concatenate((enter, threshold))
    is_cand = np.r_[np.ones(enter.size, bool), np.zeros(pos.size, bool)]
    order = np.lexsort((is_cand, key_enter, key_inst))  # a query sorts before a candidate of equal Enter
    before = np.cumsum(is_cand[order]) - is_cand[order]  # candidates strictly before each element
    out = np.empty(pos.size, np.int64)
    q = ~is_cand[order]
    out[order[q] - enter.size] = before[q]
    return out


def near_equal_waits(events: pd.DataFrame, waits: pd.DataFrame, fraction: float = NEAR_FRACTION,
                     tolerance: float = TIE_TOLERANCE, relative: float = 0.0,
                     candidates: TieCandidates | None = None) -> npt.NDArray[np.bool_]:
    """Wait states whose culprits under the rule (``tolerance``, ``relative``) leave out a candidate that arrived
    within ``fraction`` of the wait of the latest: blame decided by skew much smaller than the wait.

    >>> from waitlab.models.analysis.waitstates import make_events, wait_states
    >>> ev = make_events(rank=[0, 1, 2], op=["barrier"] * 3, enter=[0.0, 1.0 - 5e-3, 1.0], exit=[1.0] * 3,
    ...                  match=[0] * 3)
    >>> near_equal_waits(ev, wait_states(ev)).tolist()  # rank 0 waits 1 s for rank 2, rank 1 arrived 5 ms before
    [True, False]
    """
    n = len(waits)
    if not n:
        return np.zeros(0, bool)
    tc = _candidates(events, waits, candidates)
    m_rule = np.bincount(tied_culprits(events, waits, tolerance, relative, tc)[0], minlength=n)
    m_near = np.bincount(tied_culprits(events, waits, tolerance, max(relative, fraction), tc)[0], minlength=n)
    return m_near > m_rule


def _senders_of_completed_receives(events: pd.DataFrame, op: npt.NDArray[np.integer], names: list[str],
                                   match: IntArray) -> tuple[IntArray, IntArray]:
    """(send row, row of the call completing its receive) of every matched, completed receive."""
    done = events["done"].to_numpy().astype(np.int64, copy=False)
    sends = np.flatnonzero(isin_names(op, names, SEND_ACTIONS) & (match >= 0))
    recvs = np.flatnonzero(isin_names(op, names, RECV_ACTIONS) & (match >= 0) & (done >= 0))
    if sends.size == 0 or recvs.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    send_of = np.full(int(match.max()) + 1, -1, np.int64)
    send_of[match[sends]] = sends
    snd = send_of[match[recvs]]
    ok = snd >= 0
    return snd[ok], done[recvs[ok]]


def split_culprits(events: pd.DataFrame, waits: pd.DataFrame, select: npt.NDArray[np.bool_] | None = None,
                   tie_budget: int | None = None, tolerance: float = TIE_TOLERANCE, relative: float = 0.0,
                   candidates: TieCandidates | None = None) -> tuple[IntArray, IntArray]:
    """(wait-state row, culprit event) pairs of :func:`tied_culprits`, within a budget.

    A wait at a collective where ``W`` ranks wait for ``m`` tied ranks makes ``W * m`` pairs.  At most
    ``tie_budget`` extra pairs (default ``4 * len(waits) + 1e6``) are made: the wait states with the
    fewest tied ranks are split first; the others keep their one ``peer_event`` (``tied`` = 1 in the
    model results says so).  Wait states outside ``select`` are not split.  ``relative``: the relative tie rule;
    ``candidates``: :func:`tie_candidates` of ``events`` when already built.
    """
    row, culprit = tied_culprits(events, waits, tolerance, relative, candidates)
    n = len(waits)
    m = np.bincount(row, minlength=n)
    if select is not None:
        m = np.where(np.asarray(select, bool), m, 1)
    budget = 4 * n + 1_000_000 if tie_budget is None else tie_budget
    order = np.argsort(m, kind="stable")
    extra = np.cumsum(m[order] - 1)
    split = np.zeros(n, bool)
    split[order[extra <= budget]] = True
    split &= m > 1
    keep = split[row] | (culprit == waits["peer_event"].to_numpy()[row])
    return row[keep], culprit[keep]


def tie_counts(events: pd.DataFrame, waits: pd.DataFrame, tolerance: float = TIE_TOLERANCE,
               candidates: TieCandidates | None = None) -> dict[str, int]:
    """How many wait states have several culprits: ``exact`` (all of them enter at the same time) and ``near`` (at
    least one of them is tied only within ``tolerance``: the wait is split among the near-tied culprits), and the
    culprits' count ``culprits`` over all of them.

    >>> from waitlab.models.analysis.waitstates import make_events, wait_states
    >>> ev = make_events(rank=[0, 1, 2], op=["barrier"] * 3, enter=[1.0, 3.0, 3.0 + 4e-7], exit=[3.0 + 4e-7] * 3,
    ...                  match=[0] * 3)
    >>> tie_counts(ev, wait_states(ev))  # rank 0 waits for ranks 1 and 2 (0.4 us apart); rank 1 for rank 2
    {'exact': 0, 'near': 1, 'culprits': 2}
    >>> ev = make_events(rank=[0, 1, 2, 3], op=["barrier"] * 4, enter=[1.0, 3.0 + 4e-7, 3.0 + 4e-7, 3.0],
    ...                  exit=[3.0 + 4e-7] * 4, match=[0] * 4)
    >>> tie_counts(ev, wait_states(ev))  # rank 0 waits for 1 and 2 (exact) and 3 (0.4 us earlier); rank 3 for 1, 2
    {'exact': 1, 'near': 1, 'culprits': 5}
    """
    if not len(waits):
        return {"exact": 0, "near": 0, "culprits": 0}
    n = len(waits)
    tc = _candidates(events, waits, candidates)
    m_near = np.bincount(tied_culprits(events, waits, tolerance, candidates=tc)[0], minlength=n)
    m_exact = np.bincount(tied_culprits(events, waits, 0.0, candidates=tc)[0], minlength=n)
    exact = (m_exact > 1) & (m_exact == m_near)  # a wait with exact and near ties is split among the near ones
    near = (m_near > 1) & ~exact
    return {"exact": int(exact.sum()), "near": int(near.sum()), "culprits": int(m_near[m_near > 1].sum())}
