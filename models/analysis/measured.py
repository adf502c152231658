"""What a measured trace holds of a run: the tables a diagnosis model reads (:class:`~.protocol.RunData`).

A tracer records the columns :data:`EVENT_COLUMNS` of the calls and regions a rank enters; what only the simulator
knows (:data:`TRUTH_COLUMNS`, the perturbations it inserted, :data:`HIDDEN_OPS`, as rows of their own, and the
application's step of each activity: ``step`` is -1, as ``waitlab analyze`` reads it from a trace) is the answer the
scores compare with, or not in a trace, so :func:`measured_tables` takes it out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from waitlab.models.vocabulary import RMA_ACTIONS

#: The event-table columns a model reads: those a measured trace holds (a table may lack some of them; ``step`` is
#: there, -1 on every row, as in a table read from a trace: :func:`measured_tables`).
EVENT_COLUMNS = ("rank", "seq", "kind", "op", "region", "path", "step", "enter", "exit", "peer", "tag", "comm",
                 "bytes", "recv_bytes", "match", "done", "parent", "depth", "call")
#: The wait-state columns a model reads (``step`` -1, as :data:`EVENT_COLUMNS`).
WAIT_COLUMNS = ("event", "rank", "pattern", "op", "wait", "peer_rank", "peer_event", "region", "path", "step")
#: Event columns only the simulator knows (the cause-ledger row and injected seconds of each activity): never
#: given to a model.
TRUTH_COLUMNS = ("cause", "excess")
#: Operations a perturbation inserts that a tracer does not record as activities of their own (system noise,
#: instrumentation overhead, swap stalls, a flush's pad): a model sees them as ``compute``.  A trace-buffer
#: ``flush`` stays one (Score-P records its flushes, as the region ``TRACE_BUFFER_FLUSH``).
HIDDEN_OPS = ("noise", "overhead", "swap", "delay")


def _as_compute(col: pd.Series, hidden: tuple[str, ...]) -> pd.Series:
    """A categorical (or string) column with the values ``hidden`` relabelled ``compute``."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = [str(c) for c in col.cat.categories]
        if not any(c in hidden for c in cats):
            return col
        keep = [c for c in cats if c not in hidden]
        new = keep if "compute" in keep else [*keep, "compute"]
        to = np.array([new.index("compute" if c in hidden else c) for c in cats], np.int64)
        codes = col.cat.codes.to_numpy()
        return pd.Series(pd.Categorical.from_codes(np.where(codes >= 0, to[codes], -1), categories=new),
                         index=col.index, name=col.name)
    values = col.astype(str)
    return col.where(~values.isin(hidden), "compute")


def measured_events(events: pd.DataFrame) -> pd.DataFrame:
    """The event table as a measured trace holds it: the columns :data:`EVENT_COLUMNS` only, the inserted
    perturbations (:data:`HIDDEN_OPS`) labelled ``compute`` (``op`` and ``kind``), and back-to-back work merged
    (:func:`measured_tables`).

    >>> import pandas as pd
    >>> ev = pd.DataFrame({"rank": [0, 0], "op": pd.Categorical(["compute", "noise"]),
    ...                    "kind": pd.Categorical(["compute", "noise"]), "cause": [-1, 0], "excess": [0.0, 0.1]})
    >>> out = measured_events(ev)
    >>> list(out.columns), out["op"].astype(str).tolist(), out["kind"].astype(str).tolist()
    (['rank', 'kind', 'op'], ['compute', 'compute'], ['compute', 'compute'])
    """
    return measured_tables(events)[0]


def measured_tables(events: pd.DataFrame,
                    waits: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The event table and its wait states as a measured trace holds them.

    A tracer records the calls and regions a rank enters, not the work between them: the time from one recorded
    boundary to the next is one stretch of work, however the simulator made it (an application's compute, then
    the instrumentation overhead, noise or swap stall a perturbation inserted after it).  So, besides keeping the
    columns :data:`EVENT_COLUMNS` and labelling :data:`HIDDEN_OPS` ``compute``, back-to-back ``compute`` rows of
    a rank (consecutive in ``seq``, in the same region) become one row from the first one's ``enter`` to
    the last one's ``exit``.  Otherwise the rows a perturbation inserted would still show, and how long they took:
    the injected excess, to the last digit.  The row references (``done``, ``parent``, an RMA row's ``match``, the
    waits' ``event`` and ``peer_event``) and ``seq`` are renumbered to the merged table.  A trace holds no step
    index either (the simulator's iteration count of each activity): ``step`` is -1 in both tables, as in the
    tables ``waitlab analyze`` reads from a trace, and work across a step boundary is one stretch too.

    >>> import pandas as pd
    >>> from waitlab.models.analysis.waitstates import make_events
    >>> ev = make_events(rank=[0, 0, 0, 1], op=["compute", "overhead", "barrier", "barrier"],
    ...                  enter=[0.0, 1.0, 1.5, 0.0], exit=[1.0, 1.5, 1.5, 1.5], match=[-1, -1, 0, 0])
    >>> out, _ = measured_tables(ev)
    >>> out[["rank", "op", "enter", "exit"]].astype({"op": str}).values.tolist()
    [[0, 'compute', 0.0, 1.5], [0, 'barrier', 1.5, 1.5], [1, 'barrier', 0.0, 1.5]]
    """
    out = events[[c for c in EVENT_COLUMNS if c in events.columns]]
    if "step" in out.columns:  # the simulator's step index: a trace holds none
        out = out.assign(step=np.full(len(out), -1, out["step"].dtype))
    if waits is not None and "step" in waits.columns:
        waits = waits.assign(step=np.full(len(waits), -1, waits["step"].dtype))
    for c in ("op", "kind"):
        if c in out.columns:
            col = out[c]
            relabelled = _as_compute(col, HIDDEN_OPS)
            if relabelled is not col:
                out = out.assign(**{c: relabelled})
    if not {"rank", "op", "enter", "exit"} <= set(out.columns) or len(out) < 2:
        return out, waits
    head = _merged_into(out)
    if head is None:
        return out, waits
    kept = head == np.arange(len(out))
    new_row = np.cumsum(kept) - 1  # the merged table's row of each kept row, and of each merged one's head
    new_row = new_row[head]

    def renumber(refs: npt.NDArray[np.int64], where: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.int64]:
        ok = refs >= 0 if where is None else (refs >= 0) & where
        return np.where(ok, new_row[np.where(ok, refs, 0)], refs).astype(refs.dtype)

    exit_ = out["exit"].to_numpy()
    last = np.full(len(out), -1, np.int64)  # the last row merged into each head
    np.maximum.at(last, head, np.arange(len(out)))
    changes: dict[str, Any] = {"exit": exit_[np.where(kept, last, 0)][kept]}
    for c in ("done", "parent"):
        if c in out.columns:
            changes[c] = renumber(out[c].to_numpy())[kept]
    if "match" in out.columns:
        changes["match"] = renumber(out["match"].to_numpy(), _is_rma(out["op"]))[kept]
    if "seq" in out.columns:  # each rank's positions: the rows merged into an earlier one leave no gap
        seq = out["seq"].to_numpy()
        gone_before = np.cumsum(~kept) - (~kept)  # merged rows before each row, over the whole table
        rank = out["rank"].to_numpy()
        first = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]])  # rows sorted by rank (checked by _merged_into)
        start = np.repeat(gone_before[first], np.diff(np.r_[first, len(out)]))
        changes["seq"] = (seq - (gone_before - start)).astype(seq.dtype)[kept]
    merged = out[kept].reset_index(drop=True)
    merged = merged.assign(**changes)
    if waits is not None and len(waits):
        waits = waits.assign(**{c: renumber(waits[c].to_numpy()) for c in ("event", "peer_event")
                                if c in waits.columns})
    return merged, waits


def _codes_equal(col: pd.Series, name: str) -> npt.NDArray[np.bool_]:
    """Whether each value of a categorical (or string) column is ``name``."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = [str(c) for c in col.cat.categories]
        if name not in cats:
            return np.zeros(len(col), bool)
        return col.cat.codes.to_numpy() == cats.index(name)
    return np.asarray(col.astype(str) == name)


def _is_rma(op: pd.Series) -> npt.NDArray[np.bool_]:
    """Whether each row's ``op`` is a one-sided (RMA) action (its ``match`` is a row: the epoch's call)."""
    names = op.astype(str).to_numpy() if not isinstance(op.dtype, pd.CategoricalDtype) else None
    if names is not None:
        return np.isin(names, list(RMA_ACTIONS))
    is_rma = np.array([str(c) in RMA_ACTIONS for c in op.cat.categories] + [False])
    return is_rma[op.cat.codes.to_numpy()]  # code -1 (missing): the appended False


def _merged_into(ev: pd.DataFrame) -> npt.NDArray[np.int64] | None:
    """For each row of ``ev``, the row it merges into (itself for a row that stays): ``compute`` rows right after a
    ``compute`` row of the same rank and region (``parent``, ``depth``).  ``None`` when nothing merges, or when the
    rows are not in rank and ``seq`` order (a hand-made table: left as it is)."""
    rank = ev["rank"].to_numpy()
    work = _codes_equal(ev["op"], "compute")
    if "kind" in ev.columns:
        work &= _codes_equal(ev["kind"], "compute")
    follows = work[1:] & work[:-1] & (rank[1:] == rank[:-1])
    for c in ("parent", "depth"):
        if c in ev.columns:
            v = ev[c].to_numpy()
            follows &= v[1:] == v[:-1]
    if "seq" in ev.columns:
        seq = ev["seq"].to_numpy()
        in_order = (rank[1:] > rank[:-1]) | ((rank[1:] == rank[:-1]) & (seq[1:] > seq[:-1]))
        if not in_order.all():
            return None
        follows &= seq[1:] == seq[:-1] + 1
    elif not (rank[1:] >= rank[:-1]).all():
        return None
    if not follows.any():
        return None
    idx = np.arange(len(ev))
    starts = np.r_[True, ~follows]
    return np.maximum.accumulate(np.where(starts, idx, 0)).astype(np.int64)


__all__ = ["EVENT_COLUMNS", "HIDDEN_OPS", "TRUTH_COLUMNS", "WAIT_COLUMNS", "measured_events", "measured_tables"]
