"""Wait states of an event table (Wu et al. formula 1, Scalasca's pattern rules).

A wait state is a synchronization point S = ((p,i),(q,k)): activity i of rank p
could not complete before activity k of rank q started.  Its wait time is
``w(p,i) = Enter(q,k) - Enter(p,i)`` (Wu et al., formula 1), clipped to the time
(p,i) spent inside the operation.  Patterns (DESIGN.md section 5):

* late sender: a receive (``recv``, or the ``wait``/``waitall`` completing an
  ``irecv``) entered before its matching send: ``min(E_send, X_recv) - E_recv``;
* late receiver: a send that could not complete (rendezvous, or a synchronous
  ``ssend``/``issend`` of any size) until the receive was posted:
  ``min(E_recv, X_send) - E_send`` when the send ended after E_recv, unless the blocking call is a late
  sender already (a ``waitall`` of an isend and an irecv waits once, as Scalasca books it);
* neither is booked in a completion whose ``call`` is an ``MPI_Test*`` call (a recorded trace's successful test,
  :mod:`waitlab.models.otf2_ops`): a test does not block (Scalasca 2.6, ``MPI.pattern``: no Late Sender in
  ``is_mpi_testx`` calls, Late Receiver only in blocking sends and waits);
* wait at barrier / wait at NxN: ``min(max_E, X_own) - E_own``;
* late broadcast (bcast, scatter): non-roots wait ``min(E_root, X_own) - E_own``;
* early reduce (reduce, gather): the root waits ``min(max_{senders} E, X_root) - E_root``;
* early scan: ``w_n = min(max_{m<=n} E_m, X_n) - E_n``.

Which members of a collective synchronize follows Scalasca 2.6 (``MpiCommunicationHandler.cpp``), from each row's
``bytes`` sent and ``recv_bytes`` received: no payload, no synchronization point, no wait (a bcast whose root sends
nothing, a reduce or gather whose root receives nothing, an NxN or scan instance where no member moves a byte; a
barrier always synchronizes); a non-root of a bcast or scatter waits for the root only if it receives data; the
latest *sender* (``bytes`` > 0) is the one a reduce, gather, scan or NxN member waits for.  An NxN instance where a
member left before the latest one entered (no full overlap: some pairs exchanged nothing) books waits only for
members that receive data and entered before the latest sender, as Scalasca does; an ``alltoallv`` without full
overlap books none (its totals do not say who receives from whom: Scalasca ignores every ``alltoallv``).

When several ranks are exactly equally late, ``peer_rank`` names the lowest-numbered of them; the
diagnosis models split the wait among all of them (:mod:`waitlab.models.analysis.ties`).

Pure function over the columns of the event table, a pandas DataFrame or an Arrow table (read by
:mod:`waitlab.models.columns`; the wait states come back in the same kind); numpy only, no row loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from waitlab.models import columns
from waitlab.models.analysis.rma_waits import RMA_PATTERNS, rma_wait_states
from waitlab.models.columns import Coded, Table
from waitlab.models.vocabulary import ACTIONS, MPI_ACTIONS, RECV_ACTIONS, SEND_ACTIONS, SYNC_SEND_ACTIONS, names_where
from waitlab.models.vocabulary import EAGER_THRESHOLD as EAGER_THRESHOLD

if TYPE_CHECKING:
    import pandas as pd

PATTERNS: tuple[str, ...] = ("late_sender", "late_receiver", "wait_at_barrier", "wait_at_nxn", "late_broadcast",
                             "early_reduce", "early_scan", *RMA_PATTERNS)

#: Collectives of each pattern family (from the action vocabulary).
BARRIER_OPS = names_where(pattern="barrier")
NXN_OPS = names_where(pattern="nxn")
ONE_TO_N_OPS = names_where(pattern="1xn")
N_TO_ONE_OPS = names_where(pattern="nx1")
SCAN_OPS = names_where(pattern="scan")

#: Waits shorter than this (seconds) are numerical noise of the simulated clock and are dropped.
EPSILON = 1e-12


def _empty() -> dict[str, list[npt.NDArray[Any]]]:
    return {"event": [], "pattern": [], "wait": [], "peer_event": []}


def _add(acc: dict[str, list[npt.NDArray[Any]]], pattern: str, event: npt.NDArray[np.int64],
         wait: npt.NDArray[np.float64], peer_event: npt.NDArray[np.int64]) -> None:
    keep = wait > EPSILON
    acc["event"].append(event[keep])
    acc["pattern"].append(np.full(int(keep.sum()), PATTERNS.index(pattern), np.int8))
    acc["wait"].append(wait[keep])
    acc["peer_event"].append(peer_event[keep])


def _p2p(ev: Table, acc: dict[str, list[npt.NDArray[Any]]], eager_threshold: int) -> None:
    op, cats = columns.codes(ev, "op")
    enter, exit_ = columns.values(ev, "enter"), columns.values(ev, "exit")
    match, done = columns.values(ev, "match"), columns.values(ev, "done")
    is_send = _member(op, [cats.index(c) for c in SEND_ACTIONS if c in cats], len(cats))
    is_recv = _member(op, [cats.index(c) for c in RECV_ACTIONS if c in cats], len(cats))
    s_rows, r_rows = np.flatnonzero(is_send), np.flatnonzero(is_recv)
    if s_rows.size == 0:
        return
    send_of = np.full(int(match.max()) + 1, -1, np.int64)
    send_of[match[s_rows]] = s_rows
    recv_of = np.full(int(match.max()) + 1, -1, np.int64)
    recv_of[match[r_rows]] = r_rows
    tests = _test_calls(ev)  # a completion in an MPI_Test* call blocks no one: no wait state there
    # Late sender: the receiver blocks in done[r] (recv itself, wait or waitall).
    blk = done[r_rows]
    ok = blk >= 0
    ok[ok] = ~tests[blk[ok]]
    r_rows, blk = r_rows[ok], blk[ok]
    snd = send_of[match[r_rows]]
    w = np.minimum(enter[snd], exit_[blk]) - enter[blk]
    late_sender = _add_max_per_blocker(acc, "late_sender", blk, w, snd)
    # Late receiver: the sender blocks in done[s] until the receive is posted -- unless that blocking call is a late
    # sender already (a waitall of an isend and an irecv: its time is one wait, Scalasca's rule), else one call would
    # wait twice its own length.
    blk = done[s_rows]
    waits_already = np.zeros(len(ev), bool)
    waits_already[late_sender] = True
    ok = (blk >= 0) & ~waits_already[blk]  # (a row -1 reads the last row: not ok anyway)
    del waits_already
    ok[ok] = ~tests[blk[ok]]
    s_rows, blk = s_rows[ok], blk[ok]
    rcv = recv_of[match[s_rows]]
    # a synchronous send (ssend/issend) waits for its receive at any size; others only above the eager threshold
    sync = _member(op[s_rows], [cats.index(c) for c in SYNC_SEND_ACTIONS if c in cats], len(cats))
    rendezvous = (exit_[blk] > enter[rcv]) & ((columns.values(ev, "bytes")[s_rows] >= eager_threshold) | sync)
    w = np.where(rendezvous, np.minimum(enter[rcv], exit_[blk]) - enter[blk], 0.0)
    _add_max_per_blocker(acc, "late_receiver", blk, w, rcv)


def _test_calls(ev: Table) -> npt.NDArray[np.bool_]:
    """Rows whose ``call`` is an ``MPI_Test*`` call (``MPI_Test``, ``MPI_Testall``, ``MPI_Testany``,
    ``MPI_Testsome``); none in a table without the column."""
    if not columns.has(ev, "call"):
        return np.zeros(len(ev), bool)
    call, cats = columns.codes(ev, "call")
    lut = np.array([c.startswith("MPI_Test") for c in cats] + [False])
    return lut[call]


def _add_max_per_blocker(acc: dict[str, list[npt.NDArray[Any]]], pattern: str, blocker: npt.NDArray[np.int64],
                         wait: npt.NDArray[np.float64], partner: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """One wait per blocking operation: a ``waitall`` waits for its latest partner, not the sum.  Returns the
    blocking operations that wait (in row order).

    Per blocking operation its longest wait, if above :data:`EPSILON`, and the first partner (in the given order)
    of that wait: what the first row of each blocker holds in a stable sort of its waits above :data:`EPSILON` by
    (blocker, longest first), found by segment reductions instead (the blockers usually come in row order already).

    >>> acc = _empty()
    >>> b = _add_max_per_blocker(acc, "late_sender", np.array([7, 3, 7, 7]), np.array([1.0, 0.0, 2.0, 2.0]),
    ...                          np.array([10, 11, 12, 13]))
    >>> b.tolist(), acc["wait"][0].tolist(), acc["peer_event"][0].tolist()
    ([7], [2.0], [12])
    """
    positive = wait > EPSILON  # most partners arrived in time: reduce only the real waits when they are few
    n_positive = int(np.count_nonzero(positive))
    if n_positive == 0:
        return blocker[:0]
    if 4 * n_positive < wait.size:
        blocker, wait, partner = blocker[positive], wait[positive], partner[positive]
    if not (blocker[1:] >= blocker[:-1]).all():
        order = np.argsort(blocker, kind="stable")
        blocker, wait, partner = blocker[order], wait[order], partner[order]
    start = np.flatnonzero(np.r_[True, blocker[1:] != blocker[:-1]])
    # the longest wait (NaN, never above EPSILON, left out), then the first row holding it
    longest = np.fmax.reduceat(wait, start)
    at = np.where(wait == np.repeat(longest, np.diff(np.r_[start, wait.size])), np.arange(wait.size), wait.size)
    first = np.minimum.reduceat(at, start)
    keep = longest > EPSILON
    b = blocker[start[keep]]
    _add(acc, pattern, b, longest[keep], partner[first[keep]])
    return b


def _member(codes: npt.NDArray[Any], wanted: list[int], n_categories: int) -> npt.NDArray[np.bool_]:
    """``np.isin`` for small category codes: by lookup table (several times faster), or on a large table when the
    wanted codes make a few runs (``send``, ``isend``; ``ssend``, ``issend``) by comparisons, again 10 times faster
    (a lookup gathers through an index of 8 bytes per row).

    >>> _member(np.array([0, 5, 6, 2, 7], np.int8), [5, 6, 2], 8).tolist()
    [False, True, True, True, False]
    """
    table = np.zeros(max(n_categories, 1), bool)
    table[wanted] = True
    runs = np.flatnonzero(np.diff(np.r_[False, table, False]))  # start, end (excluded) of each run of wanted codes
    if runs.size > 8 or codes.size < 4096 or (codes.size and int(codes.min()) < 0):  # (a negative code: table's)
        return table[codes]
    out = np.zeros(codes.shape, bool)
    for lo, hi in zip(runs[::2].tolist(), runs[1::2].tolist(), strict=True):
        out |= (codes >= lo) & (codes < hi)
    return out


def _codes_of(categories: Sequence[str], names: tuple[str, ...] | list[str]) -> list[int]:
    """Category codes of ``names`` present among a categorical column's ``categories``
    (:func:`waitlab.models.columns.codes`)."""
    cats = {c: i for i, c in enumerate(categories)}
    return [cats[n] for n in names if n in cats]


def _collectives(ev: Table, acc: dict[str, list[npt.NDArray[Any]]]) -> None:
    """Collective wait states, instance by instance; an instance holds the members of its communicator (any
    number of ranks), found by its ``match`` id (docs/event_table.md)."""
    ops, op_cats = columns.codes(ev, "op")
    match = columns.values(ev, "match")
    groups = {"wait_at_barrier": BARRIER_OPS, "wait_at_nxn": NXN_OPS, "late_broadcast": ONE_TO_N_OPS,
              "early_reduce": N_TO_ONE_OPS, "early_scan": SCAN_OPS}
    rank_col = columns.values(ev, "rank")
    enter_col, exit_col, peer_col = (columns.values(ev, c) for c in ("enter", "exit", "peer"))
    n_cats = len(op_cats)
    # one pass over the table for the rows of every pattern family, then each family's rows among those
    coll_rows = np.flatnonzero(_member(ops, _codes_of(op_cats, [c for g in groups.values() for c in g]), n_cats)
                               & (match >= 0))
    coll_ops = ops[coll_rows]
    coll_sends, coll_receives = payload(ev, coll_rows)
    coll_alltoallv = _member(coll_ops, _codes_of(op_cats, ["alltoallv"]), n_cats)
    for pattern, names in groups.items():
        codes = _codes_of(op_cats, names)
        if not codes:
            continue
        at = np.flatnonzero(_member(coll_ops, codes, n_cats))  # the family's rows, as positions in coll_rows
        if at.size == 0:
            continue
        # segments of rows of one instance, each in rank order
        at = at[np.lexsort((rank_col[coll_rows[at]], match[coll_rows[at]]))]
        rows = coll_rows[at]
        inst = match[rows]
        start = np.flatnonzero(np.r_[True, inst[1:] != inst[:-1]])
        seg = np.repeat(np.arange(start.size), np.diff(np.r_[start, rows.size]))
        enter, exit_ = enter_col[rows], exit_col[rows]
        sent, got = coll_sends[at], coll_receives[at]
        pos = np.arange(rows.size)
        if pattern == "wait_at_barrier":
            last = _segment_argmax(enter, start, seg)  # the last rank to enter
            w = np.minimum(enter[last][seg], exit_) - enter
            peer = rows[last][seg]
        elif pattern == "wait_at_nxn":
            moved = np.logical_or.reduceat(sent | got, start)  # no payload: no synchronization point
            full = np.minimum.reduceat(exit_, start) >= np.maximum.reduceat(enter, start)  # every member overlaps
            masked = np.where(full[seg] | sent, enter, -np.inf)  # without full overlap: the latest sender
            last = _segment_argmax(masked, start, seg)
            syncs = moved[seg] & (full[seg] | (got & ~coll_alltoallv[at]))
            w = np.where(syncs, np.minimum(masked[last][seg], exit_) - enter, 0.0)
            peer = rows[last][seg]
        elif pattern == "late_broadcast":
            root = _segment_roots(rows, seg, start, rank_col, peer_col, pattern)
            syncs = sent[root][seg] & got & (pos != root[seg])  # the root sends, this member receives
            w = np.where(syncs, np.minimum(enter[root][seg], exit_) - enter, 0.0)
            peer = rows[root][seg]
        elif pattern == "early_reduce":
            root = _segment_roots(rows, seg, start, rank_col, peer_col, pattern)
            masked = np.where((pos == root[seg]) | ~sent, -np.inf, enter)
            last = _segment_argmax(masked, start, seg)  # the last sender
            w = np.where((pos == root[seg]) & got, np.minimum(masked[last][seg], exit_) - enter, 0.0)
            peer = rows[last][seg]
        else:  # early scan: prefix maximum over the senders among the lower ranks of the same instance
            prefix, arg = _segment_prefix_max(np.where(sent, enter, -np.inf), start, seg)
            w = np.where(sent | got, np.minimum(prefix, exit_) - enter, 0.0)
            peer = rows[arg]
        _add(acc, pattern, rows, w, peer)


def payload(ev: Table, rows: npt.NDArray[np.int64] | None = None
            ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Whether each row (of ``rows``; ``None``: all) sends (``bytes`` > 0) and receives (``recv_bytes`` > 0, or
    ``bytes`` in a table without that column) any data: a collective member without either has no synchronization
    point (Scalasca 2.6)."""
    sent_bytes = columns.values(ev, "bytes")
    sent = (sent_bytes if rows is None else sent_bytes[rows]) > 0
    if not columns.has(ev, "recv_bytes"):
        return sent, sent
    got_bytes = columns.values(ev, "recv_bytes")
    return sent, (got_bytes if rows is None else got_bytes[rows]) > 0


def _segment_argmax(a: npt.NDArray[np.float64], start: npt.NDArray[np.int64], seg: npt.NDArray[np.int64]
                    ) -> npt.NDArray[np.int64]:
    """Position of the first maximum of each segment (segments start at ``start``)."""
    top = np.maximum.reduceat(a, start)
    pos = np.where(a == top[seg], np.arange(a.size), a.size)
    return np.minimum.reduceat(pos, start)


def _segment_prefix_max(a: npt.NDArray[np.float64], start: npt.NDArray[np.int64], seg: npt.NDArray[np.int64]
                        ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Running maximum within each segment and the position of its (first) maximal element.

    Segments of one size are stacked into a matrix (one pass per distinct communicator size)."""
    size = np.diff(np.r_[start, a.size])
    prefix = np.empty_like(a)
    arg = np.empty(a.size, np.int64)
    for n in np.unique(size).tolist():
        first = start[size == n]
        idx = first[:, None] + np.arange(n)[None, :]
        m = a[idx]
        prefix[idx] = np.maximum.accumulate(m, axis=1)
        arg[idx] = first[:, None] + _prefix_argmax(m)
    return prefix, arg


def _segment_roots(rows: npt.NDArray[np.int64], seg: npt.NDArray[np.int64], start: npt.NDArray[np.int64],
                   rank: npt.NDArray[np.int32], peer: npt.NDArray[np.int32], pattern: str) -> npt.NDArray[np.int64]:
    """Position (in ``rows``) of every instance's root; every participant must name the same root, a member."""
    p = peer[rows]
    bad = p != p[start][seg]
    is_root = rank[rows] == p
    n_roots = np.add.reduceat(is_root.astype(np.int64), start)
    if bad.any() or np.any(n_roots != 1):
        i = int(np.flatnonzero(bad)[0]) if bad.any() else int(start[np.flatnonzero(n_roots != 1)[0]])
        raise ValueError(f"{pattern}: rank {int(rank[rows[i]])} gives root {int(p[i])} in collective instance of "
                         f"rank {int(rank[rows[start[seg[i]]]])} (which gives {int(p[start[seg[i]]])}): a rooted "
                         "collective needs the same root, a member of its communicator, on every rank")
    return np.flatnonzero(is_root)


def _prefix_argmax(a: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Column index of the running maximum along axis 1 (first occurrence: the lowest-numbered of tied ranks)."""
    idx = np.broadcast_to(np.arange(a.shape[1]), a.shape)
    before = np.maximum.accumulate(a, axis=1)[:, :-1]  # running maximum of the columns strictly before
    is_new_max = np.concatenate((np.ones((a.shape[0], 1), bool), a[:, 1:] > before), axis=1)
    return np.maximum.accumulate(np.where(is_new_max, idx, 0), axis=1).astype(np.int64)


def wait_states(events: Table, eager_threshold: int = EAGER_THRESHOLD) -> Table:
    """All wait states of an event table (docs/event_table.md), one row per waiting activity.

    Parameters
    ----------
    events : DataFrame or pyarrow.Table
        The event table (columns ``rank, kind, op, enter, exit, peer, bytes, match, done, region, path, step``;
        ``kind, op, region, path`` categorical: pandas ``Categorical``, Arrow dictionary).
    eager_threshold : int
        Messages of fewer bytes are sent eagerly and cannot wait for their receiver (SMPI's rule:
        :func:`waitlab.platforms.smpi_factors.eager_threshold` gives the one a run's SimGrid settings hold).

    Returns
    -------
    DataFrame or pyarrow.Table
        Of the kind of ``events``: columns ``event, rank, pattern, op, wait, peer_rank, peer_event, region, path,
        step`` (``pattern, op, region, path`` categorical).

    Examples
    --------
    A barrier where rank 1 arrives 2 s after rank 0: rank 0 waits 2 s.

    >>> ev = make_events(rank=[0, 1], op=["barrier", "barrier"], enter=[1.0, 3.0], exit=[3.0, 3.0], match=[0, 0])
    >>> ws = wait_states(ev)
    >>> ws[["rank", "pattern", "wait", "peer_rank"]].to_dict("records")
    [{'rank': 0, 'pattern': 'wait_at_barrier', 'wait': 2.0, 'peer_rank': 1}]

    The same of an Arrow table, an Arrow table:

    >>> import pyarrow as pa
    >>> wait_states(pa.Table.from_pandas(ev)).select(["rank", "pattern", "wait", "peer_rank"]).to_pylist()
    [{'rank': 0, 'pattern': 'wait_at_barrier', 'wait': 2.0, 'peer_rank': 1}]
    """
    acc = _empty()
    _p2p(events, acc, eager_threshold)
    _collectives(events, acc)
    for rma_pattern, ev_rows, wait_s, peer_rows in rma_wait_states(events):  # one-sided: analysis/rma_waits.py
        _add(acc, rma_pattern, ev_rows, wait_s, peer_rows)
    if acc["event"]:
        event = np.concatenate(acc["event"])
        pattern = np.concatenate(acc["pattern"])
        wait = np.concatenate(acc["wait"])
        peer_event = np.concatenate(acc["peer_event"])
    else:
        event = peer_event = np.zeros(0, np.int64)
        pattern, wait = np.zeros(0, np.int8), np.zeros(0)
    order = np.argsort(event, kind="stable")
    event, pattern, wait, peer_event = event[order], pattern[order], wait[order], peer_event[order]
    rank = columns.values(events, "rank")
    out = columns.table({
        "event": event.astype(np.int64),
        "rank": rank[event].astype(np.int32),
        "pattern": Coded(pattern, PATTERNS),
        "op": _call_codes(events, event) if columns.has(events, "call") else _coded_rows(events, "op", event),
        "wait": wait,
        "peer_rank": rank[peer_event].astype(np.int32),
        "peer_event": peer_event.astype(np.int64),
        "region": _coded_rows(events, "region", event),
        "path": _coded_rows(events, "path", event),
        "step": columns.values(events, "step")[event].astype(np.int32),
    }, like=events)  # fmt: skip
    if not event.size and columns.has(events, "call") and not columns.is_arrow(out):
        out["op"] = call_ops(events, event)  # no categories: of strings (pandas makes an empty list objects)
    return out


def _coded_rows(events: Table, name: str, rows: npt.NDArray[np.int64]) -> Coded:
    """The column ``name`` at ``rows`` as a categorical: a categorical column keeps its categories, any other is
    made one of the distinct values at ``rows`` (sorted, as text)."""
    if columns.is_coded(events, name):
        code, cats = columns.codes(events, name)
        return Coded(code[rows], cats)
    labels, inverse = np.unique(columns.values(events, name)[rows].astype(str), return_inverse=True)
    return Coded(inverse.reshape(-1), [str(c) for c in labels])


def _call_codes(events: Table, rows: npt.NDArray[np.int64]) -> Coded:
    """:func:`call_ops` as codes into its distinct names (sorted)."""
    if rows.size == 0:  # no wait: an empty column of strings, as the op column's (Arrow has no type for nothing)
        return Coded(np.zeros(0, np.int8), [])
    spelled = {a.lower(): a for a in ACTIONS}
    op_code, ops = columns.codes(events, "op")
    call_code, calls = columns.codes(events, "call")
    op_code, call_code = op_code[rows], call_code[rows]
    names = ops + [spelled.get(c[4:].lower(), c[4:].lower()) for c in calls]  # one look-up per distinct call
    named = np.array([c != "" for c in calls] + [False])[call_code]
    code = np.where(named, len(ops) + call_code.astype(np.int64), op_code)
    used = np.unique(code)
    cats, inverse = np.unique(np.array(names, dtype=str)[used], return_inverse=True)  # the distinct names, sorted
    return Coded(inverse.reshape(-1)[np.searchsorted(used, code)], [str(c) for c in cats])


def call_ops(events: Table, rows: npt.NDArray[np.int64]) -> pd.Categorical | pa.DictionaryArray:
    """The waiting MPI operation of ``rows`` as the program called it: the action of the event's ``call``
    (``MPI_Sendrecv`` -> ``sendRecv``, which waitlab runs as isend, irecv and waitall), else the event's ``op``;
    a pandas ``Categorical`` of a DataFrame's rows, an Arrow dictionary array of an Arrow table's.

    >>> import pandas as pd
    >>> ev = pd.DataFrame({"op": pd.Categorical(["waitall", "recv"]), "call": pd.Categorical(["MPI_Sendrecv", ""])})
    >>> call_ops(ev, np.array([0, 1])).tolist(), call_ops(pa.Table.from_pandas(ev), np.array([0, 1])).to_pylist()
    (['sendRecv', 'recv'], ['sendRecv', 'recv'])
    """
    coded = _call_codes(events, rows)
    if columns.is_arrow(events):
        return columns.coded_array(coded)
    import pandas as pd  # the table is pandas': pandas is loaded

    return pd.Categorical.from_codes(np.asarray(coded.codes), categories=pd.Index(list(coded.categories), dtype=str))


def make_events(*, rank: list[int], op: list[str], enter: list[float], exit: list[float],
                match: list[int] | None = None, done: list[int] | None = None, peer: list[int] | None = None,
                kind: list[str] | None = None, nbytes: list[int] | None = None,
                recv_bytes: list[int] | None = None) -> pd.DataFrame:
    """A minimal event table for examples and hand-computed tests (no regions).

    ``nbytes`` (the ``bytes`` column) defaults to 0 for point-to-point operations and to 8 (one double) for
    collectives but the barrier; ``recv_bytes`` (bytes received) to ``nbytes``.  A pandas table (the Arrow one:
    ``pyarrow.Table.from_pandas(make_events(...), preserve_index=False)``)."""
    import pandas as pd  # a pandas helper, for tests and examples

    n = len(rank)
    collective = set(BARRIER_OPS + NXN_OPS + ONE_TO_N_OPS + N_TO_ONE_OPS + SCAN_OPS) - set(BARRIER_OPS)
    sent = nbytes if nbytes is not None else [8 if o in collective else 0 for o in op]
    return pd.DataFrame({
        "rank": np.asarray(rank, np.int32),
        "kind": pd.Categorical(kind or ["mpi" if o in MPI_ACTIONS else o for o in op]),
        "op": pd.Categorical(op),
        "enter": np.asarray(enter, float),
        "exit": np.asarray(exit, float),
        "peer": np.asarray(peer if peer is not None else [-1] * n, np.int32),
        "bytes": np.asarray(sent, np.int64),
        "recv_bytes": np.asarray(recv_bytes if recv_bytes is not None else sent, np.int64),
        "match": np.asarray(match if match is not None else [-1] * n, np.int64),
        "done": np.asarray(done if done is not None else [-1] * n, np.int64),
        "region": pd.Categorical([""] * n),
        "path": pd.Categorical([""] * n),
        "step": np.zeros(n, np.int32),
    })  # fmt: skip
