"""The event table as a Chrome/Perfetto trace (JSON): slices, wait states as child slices, messages as flows.

:func:`write_chrome_trace` writes a run's trace section by section, each filled from the columns in C
(:mod:`waitlab.simulator.native_text`); beyond ``max_events`` only the first steps that fit (:func:`first_steps`)
or a first time window (:func:`first_seconds`), and the trace's ``otherData`` says what was summarised.  The tables
are Arrow tables (a run's) or pandas DataFrames (a folder read back), read as numpy columns
(:mod:`waitlab.models.columns`): the same trace, byte for byte, from either.
"""

from __future__ import annotations

import io
import json
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from waitlab.models.analysis.waitstates import call_ops
from waitlab.models.columns import Table, arrow_array, codes, has, is_arrow, is_coded, numpy_array, take_rows, values
from waitlab.models.vocabulary import RECV_ACTIONS, SEND_ACTIONS
from waitlab.simulator.native_text import IfInt, Int, Label, Lit, Part, Text, Us, text_bytes

#: Largest event table exported as a Chrome trace (the JSON grows ~150 bytes per event).
CHROME_MAX_EVENTS = 1_000_000
#: A run's own Chrome trace holds at most this many events: beyond it, the first steps that fit (a trace is for
#: people; ``waitlab export --chrome`` writes the whole run up to :data:`CHROME_MAX_EVENTS`).
CHROME_SUMMARY_EVENTS = 200_000


def to_ns(seconds: np.ndarray) -> np.ndarray:
    """Seconds -> integer nanoseconds, rounded to nearest (monotone, so order and nesting are kept)."""
    return np.rint(np.asarray(seconds, dtype=np.float64) * 1e9).astype(np.int64)


def us_text(ns: np.ndarray) -> list[str]:
    """Integer nanoseconds as JSON microsecond numbers that every reader turns back into exactly ``ns``.

    The Chrome trace format counts ``ts``/``dur`` in microseconds (``displayTimeUnit`` only changes the
    display; Perfetto ignores it).  Perfetto parses a number to a double and *truncates* ``value * 1000``
    to integer nanoseconds, so an exact ``"1.234"`` can come back as 1233 ns.  Each value is therefore
    written as its exact microseconds plus 0.2 ns (``"1.2342"``): truncating or rounding ``ts``, ``dur``
    or ``ts + dur`` to ns gives the exact integers (0.2 ns margin against double rounding up to ~10^15 ns).
    """
    q, r = np.divmod(np.asarray(ns, dtype=np.int64), 1000)
    return [f"{a}.{b:03d}2" for a, b in zip(q.tolist(), r.tolist(), strict=True)]


def _head(t: Table, n: int) -> Table:
    """The first ``n`` rows of ``t`` (a slice, no copy)."""
    return t.slice(0, n) if is_arrow(t) else t.iloc[:n]


def _where(t: Table, keep: npt.NDArray[np.bool_]) -> Table:
    """The rows ``keep`` of ``t`` (a copy, numbered from 0)."""
    return take_rows(t, np.asarray(keep, np.bool_)) if is_arrow(t) else t[keep].reset_index(drop=True)


def _with(t: Table, name: str, column: npt.NDArray[Any]) -> Table:
    """``t`` with its column ``name`` replaced by ``column`` (the others shared)."""
    if is_arrow(t):
        return t.set_column(t.column_names.index(name), name, arrow_array(column))
    return t.assign(**{name: column})


def first_steps(events: Table, waits: Table, max_events: int) -> tuple[Table, Table, int, int | None]:
    """The events of the first steps that fit in ``max_events`` (and events outside steps before them), with their
    waits; row references (``done``, ``waits.event``) renumbered.  When even the first step does not fit (a step
    of many ranks), only its lowest ranks that fit are kept.  Returns the tables (of the kind given: Arrow or
    pandas), the last step kept and the number of ranks kept (``None``: all).

    >>> ev = pa.table({"step": [-1, 0, 0, 1, 1, 2], "done": [-1, 2, -1, 4, -1, -1]})
    >>> w = pa.table({"event": [1, 3, 5], "wait": [1.0, 2.0, 3.0]})
    >>> e2, w2, last, ranks = first_steps(ev, w, 4)
    >>> e2["done"].to_pylist(), w2["event"].to_pylist(), last, ranks
    ([-1, 2, -1], [1], 0, None)
    """
    step = values(events, "step")
    per_step = np.bincount(step[step >= 0]) if (step >= 0).any() else np.zeros(0, np.int64)
    fit = np.flatnonzero(np.cumsum(per_step) + int((step < 0).sum()) <= max_events)
    last = int(fit[-1]) if fit.size else 0
    keep = step <= last
    n_ranks: int | None = None
    if int(keep.sum()) > max_events:  # one step of many ranks: its lowest ranks that fit (at least one)
        rank = values(events, "rank")
        per_rank = np.bincount(rank[keep])
        n_ranks = max(int(np.searchsorted(np.cumsum(per_rank), max_events, side="right")), 1)
        keep &= rank < n_ranks
    out, w_out = _keep_rows(events, waits, keep)
    return out, w_out, last, n_ranks


def _keep_rows(events: Table, waits: Table, keep: npt.NDArray[np.bool_]) -> tuple[Table, Table]:
    """Rows ``keep`` of the event table and their waits, row references (``done``, ``waits.event``) renumbered.

    When the rows kept are the table's first ones (the lowest ranks, or all of them: a run without step markers),
    the events are a slice of the table, not a copy of it, and no reference needs a new number.

    >>> ev = pa.table({"rank": [0, 0, 1], "done": [1, -1, -1]})
    >>> e2, w2 = _keep_rows(ev, pa.table({"event": [0, 2], "wait": [1.0, 2.0]}), np.array([True, True, False]))
    >>> e2["done"].to_pylist(), w2["event"].to_pylist()
    ([1, -1], [0])
    """
    n_keep = int(np.count_nonzero(keep))
    w_event = values(waits, "event") if len(waits) else np.zeros(0, np.int64)
    if keep[:n_keep].all():
        out = _head(events, n_keep)
        if has(out, "done"):
            done = values(out, "done")
            if (done >= n_keep).any():  # completed by a row left out
                out = _with(out, "done", np.where(done < n_keep, done, -1))
        w_keep = w_event < n_keep
        return out, waits if w_keep.all() else _where(waits, w_keep)
    new_row = np.cumsum(keep) - 1
    out = _where(events, keep)
    if has(out, "done"):
        done = values(events, "done")[keep]
        ok = done >= 0
        ok[ok] = keep[done[ok]]
        out = _with(out, "done", np.where(ok, new_row[np.maximum(done, 0)], -1))
    w_keep = keep[w_event]
    w_out = _where(waits, w_keep)
    return out, _with(w_out, "event", new_row[w_event[w_keep]])


def first_seconds(events: Table, waits: Table, max_events: int) -> tuple[Table, Table, float]:
    """The events that start before a time ``t`` chosen so at most ``max_events`` remain (a run without steps, or
    one rank's step larger than the limit: a program's), with their waits; returns the tables and ``t``.

    >>> ev = pa.table({"enter": [0.0, 1.0, 2.0, 3.0], "done": [-1, -1, -1, -1]})
    >>> e2, w2, t = first_seconds(ev, pa.table({"event": [0, 3], "wait": [1.0, 1.0]}), 2)
    >>> len(e2), w2["event"].to_pylist(), t
    (2, [0], 2.0)
    """
    enter = values(events, "enter")
    t = float(np.partition(enter, max_events)[max_events])  # the first start left out
    keep = enter < t
    out, w_out = _keep_rows(events, waits, keep)
    return out, w_out, t


def chrome_trace_text(events: Table, waits: Table, metadata: dict[str, Any], max_events: int | None = None) -> str:
    """A Chrome/Perfetto trace (JSON text): one track per rank, regions nested, messages as flows, waits as slices.

    Times are integer nanoseconds of simulated time (enter and exit rounded once, so slices that touch
    or nest in the event table touch or nest exactly), written as microseconds by :func:`us_text`.
    Built as text from numpy columns: the per-row work is one string format, not a dict per event.
    With ``max_events``, a larger table is summarised: only its first steps that fit, or the lowest ranks of the
    first step (:func:`first_steps`), and ``otherData.summarised`` says which.
    """
    out = io.BytesIO()
    _write_chrome(out, events, waits, metadata, max_events)
    return out.getvalue().decode("utf-8")


def _write_chrome(out: BinaryIO, events: Table, waits: Table, metadata: dict[str, Any],
                  max_events: int | None) -> None:
    """Write the text of :func:`chrome_trace_text` (UTF-8) to ``out`` one section (metadata, slices, waits, flows)
    at a time, so neither the whole list of records nor the whole text is held."""
    if max_events is not None and len(events) > max_events:
        n_all = len(events)
        events, waits, last, n_ranks = first_steps(events, waits, max_events)
        ranks = "" if n_ranks is None else f", ranks 0..{n_ranks - 1}"
        what = f"steps 0..{last}{ranks}" if (values(events, "step") >= 0).any() else \
            f"ranks 0..{(n_ranks or 1) - 1}"
        if len(events) > max_events:  # no steps (a program without step markers) or one huge step: a time window
            events, waits, t_end = first_seconds(events, waits, max_events)
            what += f", the first {t_end:.9g} s"
        metadata = {**metadata, "summarised": f"{what} only ({len(events)} of {n_all} events): "
                                              "waitlab export --chrome writes the whole run"}
    out.write(b'{"traceEvents":[\n')
    first = True
    for text in _chrome_sections(events, waits, metadata):
        if text:
            if not first:
                out.write(b",\n")
            out.write(text)
            first = False
        del text
    out.write(('\n],"displayTimeUnit":"ns","otherData":' + json.dumps(metadata, sort_keys=True) + "}\n").encode())


def _coded_labels(codes_: npt.NDArray[Any], cats: list[str], quote: bool = True) -> Label:
    """:class:`Label` of categorical codes (-1: missing) and their categories: JSON-quoted with ``quote``; a missing
    value is the last category when quoted (as numpy indexes -1), else ``nan`` (``str``)."""
    cats = list(cats)
    c = np.asarray(codes_).astype(np.int64)
    if not quote and (c < 0).any():
        cats.append("nan")
    c = np.where(c < 0, c + len(cats), c)
    return Label(c, [json.dumps(x) if quote else x for x in cats])


def _labels(t: Table, name: str, quote: bool = True) -> Label:
    """Label of every row of the column ``name``, JSON-quoted with ``quote`` (each distinct label converted once); a
    missing value of a categorical column is its last label when quoted (as numpy indexes -1), else ``nan``
    (``str``).  Any other column: each value's ``str``.

    >>> lab = _labels(pa.table({"p": pa.array(["b", None, "a"]).dictionary_encode()}), "p", quote=False)
    >>> lab.codes.tolist(), lab.labels
    ([0, 2, 1], ['b', 'a', 'nan'])
    """
    if is_coded(t, name):
        coded, cats = codes(t, name)
        return _coded_labels(coded, cats, quote=quote)
    uniq, inv = np.unique(np.asarray(values(t, name), dtype=object).astype(str), return_inverse=True)
    return Label(inv.astype(np.int64).ravel(), [json.dumps(str(u)) if quote else str(u) for u in uniq])


def _call_op_labels(events: Table) -> Label:
    """The quoted labels of every event's operation as the program called it (:func:`call_ops`)."""
    ops = call_ops(events, np.arange(len(events)))
    if isinstance(ops, pa.Array):  # an Arrow table's: a dictionary array (a missing code: NaN)
        idx = numpy_array(ops.indices)
        return _coded_labels(np.where(np.isnan(idx), -1, idx) if idx.dtype.kind == "f" else idx,
                             [str(c) for c in ops.dictionary.to_pylist()])
    return _coded_labels(np.asarray(ops.codes), [str(c) for c in ops.categories])


def _is(t: Table, name: str, wanted: Collection[str]) -> npt.NDArray[np.bool_]:
    """Whether each value of the column ``name``, as text, is one of ``wanted`` (a categorical one by its codes)."""
    c, cats = codes(t, name)
    return np.isin(c, [i for i, x in enumerate(cats) if x in wanted])


def _number(values: npt.NDArray[Any]) -> Int | Text:
    """Python's ``f"{v}"`` of every value: integers in C, anything else (a float column) by Python itself."""
    if np.issubdtype(values.dtype, np.integer):
        return Int(values)
    return Text(np.arange(values.size), [f"{v}" for v in values.tolist()])


def _chrome_sections(events: Table, waits: Table, metadata: dict[str, Any]) -> Iterator[bytes | memoryview]:
    """The trace's records, section by section (process and thread names, slices, waits, message flows), each
    section's records joined by ``",\\n"``; each section is one template filled from the columns in C
    (:func:`waitlab.simulator.native_text.text_rows`)."""
    enter = values(events, "enter")
    enter_ns = to_ns(enter)
    exit_ns = np.maximum(to_ns(values(events, "exit")), enter_ns)
    rank = values(events, "rank")
    is_region = _is(events, "kind", ("region",))
    yield ",\n".join([json.dumps({"name": "process_name", "ph": "M", "pid": 0,
                                  "args": {"name": f"waitlab: {metadata.get('scenario', '')}"}}),
                      *(f'{{"name":"thread_name","ph":"M","pid":0,"tid":{r},"args":{{"name":"rank {r}"}}}}'
                        for r in sorted(set(rank.tolist())))]).encode()
    # a slice's name: its region's, else its operation's as the program called it (sendRecv, not its waitall)
    region = _labels(events, "region")
    op = _call_op_labels(events) if has(events, "call") else _labels(events, "op")
    name = Label(np.where(is_region, region.codes, np.asarray(op.codes) + len(region.labels)),
                 [*region.labels, *op.labels])
    yield text_bytes([Lit('{"name":'), name, Lit(',"cat":'), _labels(events, "kind"), Lit(',"ph":"X","ts":'),
                     Us(enter_ns), Lit(',"dur":'), Us(exit_ns - enter_ns), Lit(',"pid":0,"tid":'), Int(rank),
                     Lit(',"args":'), *_slice_args(events), Lit("}")], len(events))
    del name
    # A wait is a child of its operation: it starts at the operation's enter and ends inside it.
    if len(waits):
        w_ev = values(waits, "event")
        w_end = np.minimum(to_ns(enter[w_ev] + values(waits, "wait")), exit_ns[w_ev])
        w_end = np.maximum(w_end, enter_ns[w_ev])
        yield text_bytes([Lit('{"name":"wait: '), _labels(waits, "pattern", quote=False),
                         Lit('","cat":"wait","ph":"X","ts":'), Us(enter_ns[w_ev]), Lit(',"dur":'),
                         Us(w_end - enter_ns[w_ev]), Lit(',"pid":0,"tid":'), _number(values(waits, "rank")),
                         Lit(',"cname":"terrible","args":{"peer_rank":'), _number(values(waits, "peer_rank")),
                         Lit("}}")], len(waits))
    # Messages as flow arrows from the send to the end of the operation that completed the receive.
    match = values(events, "match")
    done = values(events, "done")
    matched = match >= 0  # a send or receive without a message (MPI_PROC_NULL) has no flow
    s_rows = np.flatnonzero(_is(events, "op", SEND_ACTIONS) & matched)
    r_rows = np.flatnonzero(_is(events, "op", RECV_ACTIONS) & matched)
    if s_rows.size and r_rows.size:
        recv_of = np.full(int(match.max()) + 1, -1, np.int64)
        recv_of[match[r_rows]] = r_rows
        rr = recv_of[match[s_rows]]
        ok = rr >= 0
        s_rows, rr = s_rows[ok], rr[ok]
        end = np.where(done[rr] >= 0, done[rr], rr)
        if s_rows.size:
            ids = _number(match[s_rows])
            yield text_bytes([Lit('{"name":"message","cat":"message","ph":"s","id":'), ids, Lit(',"ts":'),
                             Us(enter_ns[s_rows]), Lit(',"pid":0,"tid":'), Int(rank[s_rows]), Lit("}")], s_rows.size)
            yield text_bytes([Lit('{"name":"message","cat":"message","ph":"f","bp":"e","id":'), ids, Lit(',"ts":'),
                             Us(exit_ns[end]), Lit(',"pid":0,"tid":'), Int(rank[end]), Lit("}")], s_rows.size)


def _slice_args(events: Table) -> list[Part]:
    """The ``args`` of every slice: step, and where they apply peer (partner or root), bytes sent, tag (MPI
    operations) and the injected excess in seconds (Python's ``repr`` of the float)."""
    parts: list[Part] = [Lit('{"step":'), _number(values(events, "step"))]
    is_mpi = _is(events, "kind", ("mpi",))
    for key, name, keep in (("peer", ',"peer":', lambda v: v >= 0), ("bytes", ',"bytes":', lambda v: v > 0),
                            ("tag", ',"tag":', lambda v: is_mpi & (v >= 0))):
        if has(events, key):
            column = values(events, key)
            if np.issubdtype(column.dtype, np.integer):
                parts.append(IfInt(name, column, keep(column)))
            else:  # a float column (a hand-built table): Python's own text of the values kept
                rows = np.flatnonzero(keep(column))
                parts.append(Text(rows, [f"{name}{v}" for v in column[rows].tolist()]))
    if has(events, "excess"):
        excess = values(events, "excess")
        rows = np.flatnonzero(excess > 0)
        if rows.size:
            parts.append(Text(rows, [f',"injected_excess_s":{float(e)!r}' for e in excess[rows].tolist()]))
    return [*parts, Lit("}")]


def write_chrome_trace(events: Table, waits: Table, metadata: dict[str, Any], path: Path,
                       max_events: int | None = None) -> bool:
    """Write the Chrome trace (summarised beyond ``max_events``) unless the table is too large for one; the tables
    are Arrow tables or pandas DataFrames (the same bytes either way)."""
    if max_events is None and len(events) > CHROME_MAX_EVENTS:
        return False
    with path.open("wb") as out:
        _write_chrome(out, events, waits, metadata, max_events)
    return True
