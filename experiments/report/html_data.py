"""The data behind ``report.html``'s timeline: compact, gzip-compressed columns the page decodes itself.

Writing the timeline as Plotly traces from Python would repeat a hover text per event (about 100 bytes
each: a 100,000-event run would need 10 MB for the hover texts alone); instead the event table travels as
typed columns (``float32`` times, ``int32`` ranks, ``uint16`` name codes: 24 bytes per event before
compression) and ``report_timeline.js`` builds the traces of the rank range on screen.  Runs above
:data:`DETAIL_CAP` leaf events carry the detail of their first ranks only (the heatmap covers them all).  The tables
are Arrow tables (a run's) or pandas DataFrames (a folder read back), read as numpy columns
(:mod:`waitlab.models.columns`): the same payload from either.
"""

from __future__ import annotations

import base64
import gzip
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from waitlab.models.analysis.waitstates import call_ops
from waitlab.models.columns import Table, codes, has, numpy_array, values

if TYPE_CHECKING:
    import pandas as pd

#: Most leaf events whose detail goes into one report (the first ranks up to this count).
DETAIL_CAP = 250_000
#: Most rows of the rank x step heatmap (ranks are summed in bins beyond it).
HEATMAP_MAX_ROWS = 1024
#: Most message arrows carried (the first ones, in event order).
MESSAGE_CAP = 200_000


def _pack(a: np.ndarray) -> str:
    """Little-endian bytes as byte planes (byte 0 of every value, then byte 1, ...), gzip (mtime 0: same data, same
    bytes), base64; ``report_timeline.js`` puts the planes back together.

    Level 1: the payload of a 4.2 M-event run in 0.064 s instead of level 6's 0.112 s (on the main thread after the
    SMPI stage, issue 25), 0.72 MB instead of 0.61 MB of JSON.  Planes: the high bytes of times and row numbers
    repeat from value to value, which gzip finds only when they are next to each other (a 250,000-event payload
    of a ping-pong: 61 -> 14 ms, 1.32 -> 0.21 MB; 16 ranks of ``bsp.c``: see docs/performance.md).

    >>> planes = gzip.decompress(base64.b64decode(_pack(np.array([1, 256], np.int32))))
    >>> list(planes)  # byte 0 of both values, byte 1 of both, ...
    [1, 0, 0, 1, 0, 0, 0, 0]
    """
    little = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"))
    planes = np.ascontiguousarray(little.view(np.uint8).reshape(-1, little.itemsize).T)
    return base64.b64encode(gzip.compress(planes.tobytes(), compresslevel=1, mtime=0)).decode("ascii")


def _used_codes(coded: npt.NDArray[np.integer[Any]], categories: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes into the used ``categories``, sorted (a missing value, code -1, gets 65535, which the page shows as
    top level): a run's table in memory and the same table read back from Parquet (whose categories can differ in
    order and in unused entries) give the same page.

    >>> _used_codes(np.array([1, 2, 1, -1]), ["z", "b", "a"])
    (array([    1,     0,     1, 65535], dtype=uint16), ['a', 'b'])
    """
    c = np.asarray(coded, np.int64)
    used = np.flatnonzero(np.bincount(c[c >= 0], minlength=len(categories)))
    names = [categories[u] for u in used]
    order = sorted(range(len(names)), key=names.__getitem__)
    new = np.full(len(categories) + 1, -1, np.int64)  # the last entry: a missing value's (-1)
    new[used[order]] = np.arange(len(order))
    return new[c].astype(np.uint16), [names[i] for i in order]


def _codes(t: Table, name: str, rows: npt.NDArray[Any] | slice = slice(None)) -> tuple[np.ndarray, list[str]]:
    """Integer codes and names of the column ``name`` at ``rows`` (:func:`_used_codes`; a categorical column by its
    own codes, no string per row).

    >>> _codes(pa.table({"p": pa.array(["b", "a", "z", "b"]).dictionary_encode()}), "p", np.array([0, 1, 3]))
    (array([1, 0, 1], dtype=uint16), ['a', 'b'])
    """
    c, cats = codes(t, name)
    return _used_codes(c[rows], cats)


def _call_codes(events: Table, rows: npt.NDArray[np.int64]) -> tuple[np.ndarray, list[str]]:
    """:func:`_used_codes` of the operation of ``rows`` as the program called it (:func:`call_ops`)."""
    ops = call_ops(events, rows)
    if isinstance(ops, pa.Array):  # an Arrow table's: a dictionary array (a missing code: NaN)
        idx = numpy_array(ops.indices)
        return _used_codes(np.where(np.isnan(idx), -1, idx) if idx.dtype.kind == "f" else idx,
                           [str(c) for c in ops.dictionary.to_pylist()])
    return _used_codes(np.asarray(ops.codes), [str(c) for c in ops.categories])


def bincount_chunked(values: np.ndarray, minlength: int) -> np.ndarray:
    """``np.bincount(values, minlength=minlength)`` a million values at a time: bincount widens an int32 column to
    int64 whole first (57 MB for the ranks of 7 M events).

    >>> bincount_chunked(np.array([2, 0, 2], np.int32), 4).tolist(), bincount_chunked(np.array([3]), 2).tolist()
    ([1, 0, 2, 0], [0, 0, 0, 1])
    """
    out = np.zeros(max(minlength, int(values.max()) + 1 if values.size else 0), np.int64)
    for a in range(0, values.size, 1 << 20):
        out += np.bincount(values[a:a + (1 << 20)], minlength=out.size)
    return out


def timeline_payload(events: Table, waits: Table, ledger: Table | None, n_ranks: int) -> dict[str, Any]:
    """The JSON object of the page's timeline: names, per-rank offsets and packed columns.

    Leaf events (not region rows) of ranks ``0 .. detail_ranks - 1`` (when rank 0 alone has more than
    :data:`DETAIL_CAP` rows: its first ones, up to ``until`` seconds); waits and injected causes as sparse
    lists pointing into them; point-to-point messages as (send, receive) pairs of those events.  Only the
    first rows (events are sorted by rank) are looked at beyond :data:`DETAIL_CAP`, so a huge run costs
    one pass over its rank column.
    """
    all_rank = values(events, "rank")
    counts = bincount_chunked(all_rank, n_ranks)
    cum = np.cumsum(counts)
    detail_ranks = int(np.searchsorted(cum, DETAIL_CAP, side="right")) if cum.size and cum[-1] > DETAIL_CAP \
        else n_ranks
    end = int(cum[detail_ranks - 1]) if detail_ranks > 0 else 0
    until: float | None = None  # rank 0 alone beyond the cap: its first DETAIL_CAP rows (events in time order)
    if detail_ranks == 0 and cum.size and cum[0] > 0:
        detail_ranks, end = 1, DETAIL_CAP
        until = float(values(events, "exit")[:end].max())
    # event-table rows of the leaf events, sorted by (rank, seq)
    rows = np.flatnonzero(~_is_one_of(events, "kind", ("region",), slice(0, end)))

    def col(name: str, dtype: Any) -> np.ndarray:
        return values(events, name)[rows].astype(dtype)

    new_row = np.full(end, -1, np.int64)
    new_row[rows] = np.arange(rows.size)
    rank = col("rank", np.int32)
    region, region_names = _codes(events, "region", rows)
    # the operation as the program called it (sendRecv for the isend, irecv and waitall of an MPI_Sendrecv)
    op, op_names = _call_codes(events, rows) if has(events, "call") else _codes(events, "op", rows)
    kind, kind_names = _codes(events, "kind", rows)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(rank, minlength=detail_ranks))]).astype(np.int32)
    cols: dict[str, str] = {
        "rank": _pack(rank), "enter": _pack(col("enter", np.float32)), "exit": _pack(col("exit", np.float32)),
        "peer": _pack(col("peer", np.int32)), "region": _pack(region), "op": _pack(op), "kind": _pack(kind),
        "bytes": _pack(col("bytes", np.float32)),
    }
    # waits: sparse, pointing at the waiting event
    n_waits = len(waits)
    w_ev = values(waits, "event").astype(np.int64) if n_waits else np.zeros(0, np.int64)
    w_ok = w_ev < end
    w_rows = new_row[w_ev[w_ok]]
    w_ok[w_ok] = w_rows >= 0
    w_rows = w_rows[w_rows >= 0]
    w_pat, pattern_names = _codes(waits, "pattern", w_ok) if n_waits else (np.zeros(0, np.uint16), [])
    cols.update(w_event=_pack(w_rows.astype(np.int32)),
                w_wait=_pack(values(waits, "wait").astype(np.float32)[w_ok] if n_waits else np.zeros(0, np.float32)),
                w_pattern=_pack(w_pat),
                w_peer=_pack(values(waits, "peer_rank").astype(np.int32)[w_ok] if n_waits else np.zeros(0, np.int32)))
    # injected causes: events carrying excess, with the ledger's kind
    excess = col("excess", np.float64) if has(events, "excess") else np.zeros(rows.size)
    c_rows = np.flatnonzero(excess > 0)
    cause_kind_names: list[str] = []
    c_kind = np.zeros(c_rows.size, np.uint16)
    if c_rows.size and ledger is not None and len(ledger) and has(events, "cause"):
        led_kind, cause_kind_names = _codes(ledger, "kind")
        cause = col("cause", np.int64)[c_rows]
        c_kind = np.where(cause >= 0, led_kind[np.clip(cause, 0, len(ledger) - 1)], 0).astype(np.uint16)
    cols.update(c_event=_pack(c_rows.astype(np.int32)), c_excess=_pack(excess[c_rows].astype(np.float32)),
                c_kind=_pack(c_kind))
    cols.update(zip(("m_send", "m_recv"), map(_pack, _messages(events, rows)), strict=True))
    return {"n_ranks": n_ranks, "detail_ranks": detail_ranks, "events": int(rows.size), "until": until,
            "regions": region_names, "ops": op_names, "kinds": kind_names, "patterns": pattern_names,
            "cause_kinds": cause_kind_names or ["cause"], "offsets": _pack(offsets), "cols": cols}


def _is_one_of(t: Table, name: str, names: tuple[str, ...], rows: npt.NDArray[Any] | slice = slice(None)
               ) -> np.ndarray:
    """Whether each value of the column ``name`` at ``rows``, as text, is one of ``names``: a categorical column by
    its codes (no string per row).

    >>> _is_one_of(pa.table({"op": pa.array(["recv", "send", None, "irecv"]).dictionary_encode()}), "op",
    ...            ("recv", "irecv")).tolist()
    [True, False, False, True]
    """
    c, cats = codes(t, name)
    return np.isin(c[rows], [i for i, x in enumerate(cats) if x in names])


def _messages(events: Table, rows: npt.NDArray[np.int64]) -> tuple[np.ndarray, np.ndarray]:
    """(send row, receive row) of each point-to-point message among the event-table rows ``rows`` (matched by
    ``match``), numbered as positions in ``rows``."""
    match = values(events, "match")[rows].astype(np.int64)
    is_send = _is_one_of(events, "op", ("send", "isend", "ssend", "issend"), rows) & (match >= 0)
    is_recv = _is_one_of(events, "op", ("recv", "irecv"), rows) & (match >= 0)
    s_rows, r_rows = np.flatnonzero(is_send), np.flatnonzero(is_recv)
    s_order = np.argsort(match[s_rows], kind="stable")
    s_sorted = match[s_rows][s_order]
    pos = np.searchsorted(s_sorted, match[r_rows])
    ok = (pos < s_sorted.size) & (s_sorted[np.minimum(pos, max(s_sorted.size - 1, 0))] == match[r_rows]) \
        if s_sorted.size else np.zeros(r_rows.size, bool)
    send = s_rows[s_order][pos[ok]].astype(np.int32)
    recv = r_rows[ok].astype(np.int32)
    order = np.argsort(send, kind="stable")[:MESSAGE_CAP]
    return send[order], recv[order]


#: The columns of the time budget, in the order the figure stacks them (those a budget has).
BUDGET_COLUMNS = ("compute", "perturbation", "communication", "wait", "idle")
#: Most bars of the time budget: beyond it, ranks are binned.
BUDGET_MAX_BARS = 256


def budget_bins(n_ranks: int) -> int:
    """Ranks per bar of the time budget: 1, or equal bins beyond :data:`BUDGET_MAX_BARS` ranks.

    >>> budget_bins(256), budget_bins(257), budget_bins(1024)
    (1, 2, 4)
    """
    return max(1, -(-n_ranks // BUDGET_MAX_BARS))


def bin_means(columns: list[npt.NDArray[Any]], per: int) -> list[np.ndarray]:
    """The mean of each bin of ``per`` consecutive values of each column (the last bin: those left), as pandas' (3.1)
    ``groupby().mean()`` of the columns' table, so the same floats: with no missing value (NaN) in any column, each
    bin's sum by ``np.add.reduceat`` over its size; else each bin's values added in order with compensation (Kahan),
    a missing value left out (NaN: a bin without a value; vectorised over the bins: ``per`` steps).

    >>> [m.tolist() for m in bin_means([np.array([1.0, 2.0, 4.0, np.nan, np.nan])], 2)]
    [[1.5, 4.0, nan]]
    """
    cols = [np.asarray(c, np.float64) for c in columns]
    n = cols[0].size if cols else 0
    bins = -(-n // per)
    if n and not any(np.isnan(c).any() for c in cols):
        starts = np.arange(bins) * per
        sizes = np.diff(starts, append=n).astype(np.float64)
        return [np.add.reduceat(c, starts) / sizes for c in cols]
    out = []
    for v in cols:
        padded = np.full(bins * per, np.nan)
        padded[:v.size] = v
        by_bin = padded.reshape(bins, per)
        total, comp, count = np.zeros(bins), np.zeros(bins), np.zeros(bins, np.int64)
        for k in range(per):
            x = by_bin[:, k]
            ok = ~np.isnan(x)
            with np.errstate(invalid="ignore"):
                y = x - comp
                t = total + y
                c = (t - total) - y
            comp = np.where(ok, np.where(np.isfinite(c), c, 0.0), comp)  # an infinite value: no compensation
            total = np.where(ok, t, total)
            count += ok
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(np.where(count > 0, total / np.maximum(count, 1), np.nan))
    return out


def budget_payload(budget: Table) -> dict[str, Any]:
    """The time budget's bars for the page, whose script fills the figure's ``wl-budget-src`` with ``bars`` (the first
    rank of each bar and each column's mean per rank over the bar's ranks: :func:`bin_means`) and sets its height to
    ``top`` (the highest stack; missing values count as 0) and its bars' width to ``per`` ranks
    (:func:`budget_bins`).

    >>> b = pa.table({"rank": [0, 1], "compute": [1.0, 2.0], "wait": [0.5, 0.0]})
    >>> budget_payload(b)
    {'bars': {'rank': [0, 1], 'compute': [1.0, 2.0], 'wait': [0.5, 0.0]}, 'top': 2.0, 'per': 1}
    """
    cols = [c for c in BUDGET_COLUMNS if has(budget, c)]
    per = budget_bins(len(budget))
    means = dict(zip(cols, bin_means([values(budget, c) for c in cols], per), strict=True))
    n_bars = -(-len(budget) // per)
    top = 0.0
    if n_bars and cols:  # the stack's height: the columns added in order, as pandas' sum over a row
        clipped = [np.where(np.isnan(m), 0.0, np.where(m < 0.0, 0.0, m)) for m in means.values()]
        stack = clipped[0]
        for m in clipped[1:]:
            stack = stack + m
        top = float(stack.max())
    return {"bars": {"rank": (np.arange(n_bars) * per).tolist(), **{c: m.tolist() for c, m in means.items()}},
            "top": top, "per": per}


def rank_step_wait(waits: Table, n_ranks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seconds of wait per (rank bin, step): ``(z[bins, steps], first rank of each bin, steps)``.

    Ranks are summed into at most :data:`HEATMAP_MAX_ROWS` equal bins; step -1 (outside steps) is a column.
    """
    per_bin = max(1, -(-n_ranks // HEATMAP_MAX_ROWS))
    n_bins = -(-n_ranks // per_bin) if n_ranks else 0
    step = values(waits, "step").astype(np.int64) if len(waits) else np.zeros(0, np.int64)
    steps = np.unique(step)
    z: np.ndarray = np.zeros((n_bins, steps.size))
    if len(waits):
        b = values(waits, "rank").astype(np.int64) // per_bin
        s = np.searchsorted(steps, step)
        z = np.bincount(b * steps.size + s, weights=values(waits, "wait").astype(np.float64),
                        minlength=n_bins * steps.size).reshape(n_bins, steps.size)
    return z, np.arange(n_bins) * per_bin, steps


def heatmap_payload(waits: Table, n_ranks: int) -> dict[str, Any]:
    """The heatmap's image for the page (:func:`rank_step_wait`): ``z`` packed (float64, row-major: one row per bin of
    ``per`` ranks, one column per step), its shape, the ranks, and whether column 0 holds the waits outside steps.

    >>> h = heatmap_payload(pa.table({"rank": [0, 2], "step": [-1, 0], "wait": [1.0, 2.0]}), 3)
    >>> h["rows"], h["cols"], h["per"], h["outside"], h["high"]
    (3, 2, 1, True, 2.0)
    """
    z, first, steps = rank_step_wait(waits, n_ranks)
    return {"z": _pack(np.ascontiguousarray(z, np.float64).ravel()), "rows": int(z.shape[0]), "cols": int(z.shape[1]),
            "per": int(first[1] - first[0]) if first.size > 1 else 1, "ranks": n_ranks,
            "outside": bool(steps.size and steps[0] < 0), "high": float(z.max()) if z.size else 0.0}


#: Point-to-point operations that send a message (their ``peer`` is the destination, ``bytes`` its size).
SENDS = ("send", "isend")


def comm_matrix(events: pd.DataFrame, waits: pd.DataFrame) -> pd.DataFrame:
    """Bytes and messages per (sender, receiver) pair, and the seconds of wait their messages caused.

    The wait of a pair is what its point-to-point messages made a partner wait: the receiver's ``late_sender``
    waits for the sender and the sender's ``late_receiver`` waits for the receiver.  Columns ``sender,
    receiver, bytes, messages, wait``, one row per pair that exchanged a message, ordered by sender and receiver.

    A diagnosis's figure (:func:`~waitlab.experiments.report.html_figures.matrix_figure`): the tables of a run
    read back, pandas DataFrames.

    >>> import pandas as pd
    >>> ev = pd.DataFrame({"rank": [0, 0, 1, 1], "op": ["send", "isend", "recv", "send"], "peer": [1, 1, 0, 0],
    ...                    "bytes": [8, 4, 0, 2]})
    >>> w = pd.DataFrame({"rank": [1, 1], "pattern": ["late_sender", "wait_at_nxn"], "peer_rank": [0, 0],
    ...                   "wait": [0.5, 9.0]})
    >>> comm_matrix(ev, w).to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'sender': 0, 'receiver': 1, 'bytes': 12, 'messages': 2, 'wait': 0.5},
     {'sender': 1, 'receiver': 0, 'bytes': 2, 'messages': 1, 'wait': 0.0}]
    """
    import pandas as pd  # a diagnosis's tables: read back into pandas, which is loaded

    send = _is_one_of(events, "op", SENDS) & (events["peer"].to_numpy() >= 0)
    pairs = pd.DataFrame({"sender": events["rank"].to_numpy(np.int64)[send],
                          "receiver": events["peer"].to_numpy(np.int64)[send],
                          "bytes": events["bytes"].to_numpy(np.int64)[send]})
    out = pairs.groupby(["sender", "receiver"], sort=True).agg(bytes=("bytes", "sum"), messages=("bytes", "size"))
    pattern = waits["pattern"].astype(str).to_numpy()
    rank, peer, wait = (waits["rank"].to_numpy(np.int64), waits["peer_rank"].to_numpy(np.int64),
                        waits["wait"].to_numpy(float))
    ls, lr = pattern == "late_sender", pattern == "late_receiver"
    caused = pd.DataFrame({"sender": np.r_[peer[ls], rank[lr]], "receiver": np.r_[rank[ls], peer[lr]],
                           "wait": np.r_[wait[ls], wait[lr]]}).groupby(["sender", "receiver"])["wait"].sum()
    out["wait"] = caused.reindex(out.index, fill_value=0.0).to_numpy(float)
    return out.reset_index()
