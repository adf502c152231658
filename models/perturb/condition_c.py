"""Condition C of Okita et al. (formula 3) and the wait distortion caused by instrumentation.

Condition C
-----------
Let ``o(p, l)`` be the instrumentation overhead of event ``l`` of rank ``p``
(the time of the tracer's ``overhead``/``swap``/``flush``/``delay`` rows in the
event table, less the OS-noise detours that landed inside them; they sit in front of
the events whose records they write).  A detour that stalls a record or a write-back is
system noise, booked by the ledger as ``noise``: given the run's noise seconds per row
(``noise=``), it is not counted as overhead, so where a detour falls does not change C.  The
measured run keeps the waits of the unperturbed run when, for every pair of
communicating events ``e(p, j)``, ``e(q, k)``::

    sum_{l < j} o(p, l) = sum_{l < k} o(q, l)                      (Okita et al., formula 3)

and, for a collective, the prefix sums of all participants are equal.  The
checker compares the prefix sums of every matched point-to-point pair and of
every collective instance (rows sharing ``match``), and reports the number
of violations, the largest difference and where condition C first breaks
(the violation whose named event -- the one with the larger prefix sum -- started earliest).

A message's two events are where it leaves and where it is consumed: the send's
post (the ``send``/``isend`` row; the message leaves when it is posted) and the
receive's completion (the row in the ``done`` column of the ``recv``/``irecv``
row sharing the ``match`` id: a blocking ``recv`` itself, the ``wait`` or
``waitall`` that completes an ``irecv``), where the receiver waits for it.  The
post of an ``irecv`` never waits, so its prefix sum says nothing about the
wait.  A nonblocking exchange posts its sends before it waits, so a tracer
that records every call breaks formula 3 even when every rank records the same
calls: the receiver's ``waitall`` follows the records of all its receives and
sends, the sender's ``isend`` only those before it (the receiver is delayed
more than the sender, which can only shorten a late-sender wait).

Distortion
----------
:func:`wait_distortion` joins the wait states of the measured and the
unperturbed run on (rank, original position of the waiting event, pattern)
and reports, for every wait state, measured minus unperturbed wait.

Examples
--------
Rank 0 pays 0.5 s of overhead before its send; rank 1 receives.

>>> from waitlab.models.analysis.waitstates import make_events
>>> ev = make_events(rank=[0, 0, 1], op=["overhead", "send", "recv"], enter=[0.0, 0.5, 0.0],
...                  exit=[0.5, 0.5, 0.5], match=[-1, 0, 0], kind=["overhead", "mpi", "mpi"])
>>> rep = check_condition_c(ev)
>>> rep.violating_pairs, rep.max_difference, (rep.first["rank"], rep.first["op"], rep.first["peer_rank"])
(1, 0.5, (0, 'send', 1))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from waitlab.models.vocabulary import COLLECTIVE_ACTIONS, RECV_ACTIONS, SEND_ACTIONS, VOCABULARY

#: Event kinds counted as instrumentation overhead by default.
TRACER_KINDS: tuple[str, ...] = ("overhead", "swap", "flush", "delay")

#: Every value of the event table's ``kind`` column: regions and the kinds of the actions.
EVENT_KINDS: tuple[str, ...] = ("region", *dict.fromkeys(a.event_kind for a in VOCABULARY))


def kinds_problem(kinds: tuple[str, ...]) -> str:
    """What is wrong with ``kinds`` as the event kinds counted as overhead ('' when nothing).

    >>> kinds_problem(("overhead", "flush")), kinds_problem(("bogus",))[:30]
    ('', "'bogus' is not an event kind (")
    """
    if not kinds:
        return f"names no event kind (known: {', '.join(EVENT_KINDS)})"
    bad = [k for k in kinds if k not in EVENT_KINDS]
    if bad:
        return f"{bad[0]!r} is not an event kind (known: {', '.join(EVENT_KINDS)})"
    return ""

SEND_OPS = SEND_ACTIONS
RECV_OPS = RECV_ACTIONS
COLLECTIVE_OPS = tuple(sorted(COLLECTIVE_ACTIONS))

#: Default tolerance (s): SimGrid's clock is exact to about 1e-9 s.
ATOL = 1e-9

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ConditionCReport:
    """Result of :func:`check_condition_c`.

    Attributes
    ----------
    pairs, violating_pairs : int
        Matched point-to-point pairs (a send's post and its receive's completion) checked, and those whose
        prefix sums differ by more than ``atol``.
    collectives, violating_collectives : int
        Collective instances checked and violating (max minus min prefix sum > ``atol``).
    max_difference : float
        Largest absolute prefix-sum difference (seconds).
    first : dict
        Where C first breaks: ``kind`` (p2p/collective), ``rank``, ``seq``, ``op``, ``peer_rank``,
        ``peer_seq``, ``difference``, ``time`` (enter of the named event ``rank``/``seq``); empty when C holds.
    violations : DataFrame
        One row per violation: ``kind, rank, seq, op, peer_rank, peer_seq, difference, time``.
    total_overhead : float
        Sum of all per-event overheads.
    noise_booked : float
        Seconds of OS-noise detour inside the counted rows, taken off their overhead (``noise`` of
        :func:`check_condition_c`; 0 without it).
    """

    pairs: int
    violating_pairs: int
    collectives: int
    violating_collectives: int
    max_difference: float
    first: dict[str, Any]
    violations: pd.DataFrame = field(repr=False)
    total_overhead: float = 0.0
    noise_booked: float = 0.0

    @property
    def holds(self) -> bool:
        """Whether condition C holds everywhere."""
        return self.violating_pairs == 0 and self.violating_collectives == 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (without the violation table)."""
        return {
            "holds": self.holds, "pairs": self.pairs, "violating_pairs": self.violating_pairs,
            "collectives": self.collectives, "violating_collectives": self.violating_collectives,
            "max_difference": self.max_difference, "first": self.first, "total_overhead": self.total_overhead,
        }  # fmt: skip

    def text(self) -> str:
        """One paragraph for humans."""
        if self.holds:
            return (f"condition C holds: {self.pairs} point-to-point pairs and {self.collectives} collective "
                    f"instances have equal overhead prefix sums (total overhead {self.total_overhead:.6g} s)")
        f = self.first
        return (f"condition C is violated by {self.violating_pairs} of {self.pairs} point-to-point pairs and "
                f"{self.violating_collectives} of {self.collectives} collective instances; largest difference "
                f"{self.max_difference:.6g} s; first break at rank {f['rank']} event {f['seq']} ({f['op']}) "
                f"against rank {f['peer_rank']} event {f['peer_seq']}, difference {f['difference']:.6g} s "
                f"at t = {f['time']:.6g} s")


def event_overheads(events: pd.DataFrame, kinds: tuple[str, ...] = TRACER_KINDS, noise: _F | None = None) -> _F:
    """Per-event overhead: the duration of rows whose ``kind`` is in ``kinds``, else 0; ``noise`` (seconds of OS-noise
    detours inside every row, the run's noise hits summed per event) is taken off: the tracer's own time only.

    >>> from waitlab.models.analysis.waitstates import make_events
    >>> ev = make_events(rank=[0, 0], op=["overhead", "compute"], enter=[0.0, 1.2], exit=[1.2, 2.2],
    ...                  kind=["overhead", "compute"])
    >>> event_overheads(ev).round(12).tolist(), event_overheads(ev, noise=np.array([0.2, 0.0])).round(12).tolist()
    ([1.2, 0.0], [1.0, 0.0])
    """
    is_tracer = _codes(events["kind"], kinds)
    dur = events["exit"].to_numpy() - events["enter"].to_numpy()
    if noise is not None:
        noise = np.asarray(noise, np.float64)
        if noise.shape != dur.shape:
            raise ValueError(f"noise has {noise.size} values for {dur.size} events")
        dur = np.maximum(dur - noise, 0.0)
    return np.where(is_tracer, dur, 0.0)


def _codes(col: pd.Series, names: tuple[str, ...]) -> npt.NDArray[np.bool_]:
    """Rows of ``col`` whose value is one of ``names`` (a lookup table on categorical codes)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = list(col.cat.categories)
        lut = np.zeros(len(cats) + 1, bool)  # code -1 (missing) maps to the last entry
        lut[[cats.index(n) for n in names if n in cats]] = True
        return lut[col.cat.codes.to_numpy()]
    return np.isin(col.to_numpy().astype(str), names)


def _labels(col: pd.Series, rows: _I) -> pd.Categorical:
    """The values of ``col`` at ``rows`` as a categorical (cheap for categorical columns)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return pd.Categorical.from_codes(col.cat.codes.to_numpy()[rows], categories=col.cat.categories)
    return pd.Categorical(col.to_numpy()[rows].astype(str))


def prefix_sums(rank: _I, overhead: _F, n_ranks: int | None = None) -> _F:
    """``sum_{l<j} o(p, l)`` for every row (rows sorted by rank, then program order)."""
    rank = np.asarray(rank)
    if rank.size == 0:
        return np.zeros(0)
    n = int(rank.max()) + 1 if n_ranks is None else n_ranks
    counts = np.bincount(rank, minlength=n)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    cs = np.cumsum(overhead) - overhead
    return cs - np.repeat(cs[starts[counts > 0]], counts[counts > 0])


def completion_rows(events: pd.DataFrame, rows: _I, rank: _I | None = None) -> _I:
    """The rows completing the operations at ``rows``: the event table's ``done`` (the ``wait``/``waitall``/``test``
    that completes an ``irecv``; a blocking ``recv`` is its own), or the row itself where ``done`` is -1, points
    outside the table or at another rank's row, or the table has no ``done`` column.

    >>> from waitlab.models.analysis.waitstates import make_events
    >>> ev = make_events(rank=[1, 1, 1], op=["irecv", "compute", "wait"], enter=[0.0, 0.0, 1.0],
    ...                  exit=[0.0, 1.0, 1.0], done=[2, -1, -1])
    >>> completion_rows(ev, np.array([0, 1])).tolist()
    [2, 1]
    """
    rows = np.asarray(rows, np.int64)
    if "done" not in events or not rows.size:
        return rows
    rank = events["rank"].to_numpy().astype(np.int64) if rank is None else rank
    done = events["done"].to_numpy()[rows].astype(np.int64)
    ok = (done >= 0) & (done < len(events))
    ok[ok] = rank[done[ok]] == rank[rows[ok]]
    return np.where(ok, done, rows)


def check_condition_c(events: pd.DataFrame, overhead: _F | None = None, *, atol: float = ATOL,
                      kinds: tuple[str, ...] = TRACER_KINDS, noise: _F | None = None) -> ConditionCReport:
    """Check condition C (Okita et al. formula 3) on an event table.

    Parameters
    ----------
    events : DataFrame
        Event table sorted by ``(rank, seq)`` with ``rank, kind, op, enter, match`` (and ``seq``, and ``done``:
        a receive is paired at the row completing it, :func:`completion_rows`).
    overhead : float array, optional
        Per-row overhead ``o(p, l)``; default :func:`event_overheads` with ``kinds``.
    atol : float
        Differences up to ``atol`` seconds count as equal.
    kinds : tuple of str
        Event kinds that are instrumentation overhead (when ``overhead`` is not given); at least one, each one of
        :data:`EVENT_KINDS` (``ValueError`` otherwise).
    noise : float array, optional
        Seconds of OS-noise detours inside every row (when ``overhead`` is not given): taken off the rows of
        ``kinds``, so a detour that lands in a record or a write-back counts as noise, not as overhead.
    """
    if overhead is None and kinds_problem(tuple(kinds)):
        raise ValueError(f"kinds: {kinds_problem(tuple(kinds))}")
    rank = events["rank"].to_numpy().astype(np.int64)
    o = event_overheads(events, kinds, noise) if overhead is None else np.asarray(overhead, np.float64)
    if o.shape != rank.shape:
        raise ValueError(f"overhead has {o.size} values for {rank.size} events")
    pre = prefix_sums(rank, o)
    enter = events["enter"].to_numpy()
    match = events["match"].to_numpy()
    seq = events["seq"].to_numpy() if "seq" in events else np.arange(rank.size)
    op = events["op"]
    viol: list[dict[str, npt.NDArray[Any]]] = []

    # point-to-point: the send's post (the message leaves) vs the receive's completion (the receiver consumes it)
    is_s = _codes(op, SEND_OPS) & (match >= 0)
    is_r = _codes(op, RECV_OPS) & (match >= 0)
    s_rows, r_rows = np.flatnonzero(is_s), np.flatnonzero(is_r)
    n_pairs = 0
    max_diff = 0.0
    if s_rows.size and r_rows.size:
        size = int(max(match[s_rows].max(), match[r_rows].max())) + 1
        send_of = np.full(size, -1, np.int64)
        recv_of = np.full(size, -1, np.int64)
        send_of[match[s_rows]] = s_rows
        recv_of[match[r_rows]] = completion_rows(events, r_rows, rank)
        both = (send_of >= 0) & (recv_of >= 0)
        s, r = send_of[both], recv_of[both]
        n_pairs = int(s.size)
        d = pre[s] - pre[r]
        bad = np.abs(d) > atol
        if n_pairs:
            max_diff = max(max_diff, float(np.abs(d).max()))
        if bad.any():
            s, r, d = s[bad], r[bad], d[bad]
            # report from the side with the larger prefix (the one delayed more)
            lead = np.where(d >= 0, s, r)
            other = np.where(d >= 0, r, s)
            viol.append({"kind": np.zeros(s.size, np.int8), "row": lead, "peer_row": other, "difference": np.abs(d),
                         "time": enter[lead]})

    # collectives: rows sharing a match id
    is_c = _codes(op, COLLECTIVE_OPS) & (match >= 0)
    c_rows = np.flatnonzero(is_c)
    n_coll = 0
    if c_rows.size:
        order = np.argsort(match[c_rows], kind="stable")
        rows = c_rows[order]
        m = match[rows]
        heads = np.flatnonzero(np.concatenate(([True], m[1:] != m[:-1])))
        n_coll = int(heads.size)
        p = pre[rows]
        hi = np.maximum.reduceat(p, heads)
        lo = np.minimum.reduceat(p, heads)
        d = hi - lo
        max_diff = max(max_diff, float(d.max()))
        bad = d > atol
        if bad.any():
            sizes = np.diff(np.append(heads, rows.size))
            grp = np.repeat(np.arange(heads.size), sizes)
            # first row (lowest rank) within atol of the group's max / min prefix
            is_hi = p >= hi[grp] - atol
            is_lo = p <= lo[grp] + atol
            first_hi = np.full(heads.size, -1, np.int64)
            first_lo = np.full(heads.size, -1, np.int64)
            idx = np.arange(rows.size)
            first_hi[grp[is_hi][::-1]] = idx[is_hi][::-1]
            first_lo[grp[is_lo][::-1]] = idx[is_lo][::-1]
            b = np.flatnonzero(bad)
            lead = rows[first_hi[b]]
            viol.append({"kind": np.ones(b.size, np.int8), "row": lead,
                         "peer_row": rows[first_lo[b]], "difference": d[b], "time": enter[lead]})

    if viol:
        cols = {k: np.concatenate([v[k] for v in viol]) for k in viol[0]}
        row, peer = cols["row"], cols["peer_row"]
        order = np.lexsort((seq[row], rank[row], cols["time"]))
        row, peer = row[order], peer[order]
        table = pd.DataFrame({
            "kind": pd.Categorical.from_codes(cols["kind"][order], categories=["p2p", "collective"]),
            "rank": rank[row].astype(np.int32), "seq": seq[row], "op": _labels(op, row),
            "peer_rank": rank[peer].astype(np.int32), "peer_seq": seq[peer],
            "difference": cols["difference"][order], "time": cols["time"][order],
        })  # fmt: skip
        first = {k: (v.item() if hasattr(v, "item") else v) for k, v in table.iloc[0].to_dict().items()}
        first["kind"] = str(first["kind"])
        first["op"] = str(first["op"])
    else:
        table = pd.DataFrame({"kind": pd.Categorical([], categories=["p2p", "collective"]), "rank": [],
                              "seq": [], "op": [], "peer_rank": [], "peer_seq": [], "difference": [], "time": []})
        first = {}
    n_bad_p2p = int((table["kind"].cat.codes == 0).sum()) if len(table) else 0
    return ConditionCReport(pairs=n_pairs, violating_pairs=n_bad_p2p, collectives=n_coll,
                            violating_collectives=len(table) - n_bad_p2p, max_difference=max_diff, first=first,
                            violations=table, total_overhead=float(o.sum()),
                            noise_booked=float((event_overheads(events, kinds) - o).sum())
                            if overhead is None and noise is not None else 0.0)


def original_keys(events: pd.DataFrame, origin_seq: npt.NDArray[np.int64] | None = None) -> _I:
    """Join key ``rank * 2**32 + original seq`` of every event row.

    ``origin_seq`` gives, per row, the seq the event had before perturbation
    (-1 for inserted rows); default: the row's own ``seq`` (an unperturbed run).
    """
    rank = events["rank"].to_numpy().astype(np.int64)
    seq = events["seq"].to_numpy().astype(np.int64) if origin_seq is None else np.asarray(origin_seq, np.int64)
    return np.where(seq >= 0, rank * (1 << 32) + seq, -1)


def wait_distortion(measured_waits: pd.DataFrame, measured_keys: _I, base_waits: pd.DataFrame,
                    base_keys: _I) -> pd.DataFrame:
    """Measured minus unperturbed wait of every wait state.

    Parameters
    ----------
    measured_waits, base_waits : DataFrame
        Wait-state tables (``event, rank, pattern, wait``) of the measured and the unperturbed run.
    measured_keys, base_keys : int64 arrays
        :func:`original_keys` of the two event tables.

    Returns
    -------
    DataFrame
        ``rank, seq, pattern, measured, unperturbed, distortion`` (``seq`` in the
        unperturbed numbering); a wait state present in one run only counts 0 in the other.

    Examples
    --------
    >>> mw = pd.DataFrame({"event": [1], "rank": [1], "pattern": ["late_sender"], "wait": [1.5]})
    >>> bw = pd.DataFrame({"event": [1], "rank": [1], "pattern": ["late_sender"], "wait": [1.0]})
    >>> wait_distortion(mw, np.array([5, (1 << 32) + 0]), bw, np.array([0, (1 << 32) + 0]))[
    ...     ["rank", "seq", "distortion"]].to_dict("records")
    [{'rank': 1, 'seq': 0, 'distortion': 0.5}]
    """
    def keyed(w: pd.DataFrame, keys: _I, col: str) -> pd.DataFrame:
        k = keys[w["event"].to_numpy()] if len(w) else np.zeros(0, np.int64)
        return pd.DataFrame({"key": k, "pattern": w["pattern"].astype(str).to_numpy(),
                             col: w["wait"].to_numpy()}).groupby(["key", "pattern"], sort=False)[col].sum()

    m = keyed(measured_waits, measured_keys, "measured")
    b = keyed(base_waits, base_keys, "unperturbed")
    j = pd.concat([m, b], axis=1).fillna(0.0).reset_index()
    j = j[j["key"] >= 0]
    key = j["key"].to_numpy().astype(np.int64)
    out = pd.DataFrame({
        "rank": (key >> 32).astype(np.int32), "seq": (key & 0xFFFFFFFF).astype(np.int64),
        "pattern": j["pattern"].to_numpy(), "measured": j["measured"].to_numpy(),
        "unperturbed": j["unperturbed"].to_numpy(),
    })  # fmt: skip
    out["distortion"] = out["measured"] - out["unperturbed"]
    return out.sort_values(["rank", "seq", "pattern"], kind="stable").reset_index(drop=True)


def distortion_summary(dist: pd.DataFrame) -> dict[str, Any]:
    """Totals of a :func:`wait_distortion` table: by pattern, by rank, and the largest moves."""
    if not len(dist):
        return {"wait_states": 0, "total_measured": 0.0, "total_unperturbed": 0.0, "total_distortion": 0.0,
                "mean_abs_distortion": 0.0, "max_abs_distortion": 0.0, "by_pattern": {}, "by_rank": {}}
    by_pat = dist.groupby("pattern", sort=True)[["measured", "unperturbed", "distortion"]].sum()
    by_rank = dist.groupby("rank", sort=True)["distortion"].sum()
    return {
        "wait_states": len(dist),
        "total_measured": float(dist["measured"].sum()),
        "total_unperturbed": float(dist["unperturbed"].sum()),
        "total_distortion": float(dist["distortion"].sum()),
        "mean_abs_distortion": float(dist["distortion"].abs().mean()),
        "max_abs_distortion": float(dist["distortion"].abs().max()),
        "by_pattern": {str(k): {c: float(v[c]) for c in by_pat.columns} for k, v in by_pat.iterrows()},
        "by_rank": {int(k): float(v) for k, v in by_rank.items()},
    }
