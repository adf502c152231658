"""Wait figures of one run and the cause ledger as a table: what ground truth and scores compare.

The event and wait-state tables are pandas DataFrames or Arrow tables (read by :mod:`waitlab.models.columns`); the
ledger is a pandas DataFrame, or an Arrow table (``arrow=True``) made without pandas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from waitlab.models import columns
from waitlab.models.analysis.grouped import group_sums
from waitlab.models.columns import Coded, Table
from waitlab.models.ops import CAUSE_KINDS, Ledger, OpTable

if TYPE_CHECKING:
    import pandas as pd

#: Wait metrics recorded for every run (see :func:`wait_metrics`).
METRICS = ("total_wait", "makespan", "considered_wait", "collective_max_wait")
#: The point-to-point patterns (:data:`~waitlab.models.analysis.waitstates.PATTERNS`); every other is a collective's.
_P2P = ("late_sender", "late_receiver")


def wait_metrics(events: Table, waits: Table) -> dict[str, Any]:
    """Wait figures of one run (plain JSON data).

    ``total_wait``; ``makespan``; ``collective_max_wait`` = sum over collective
    instances of their largest wait; ``considered_wait`` = that plus all
    point-to-point waits (what H-CWP-DM with the "earliest" pairing explains);
    ``wait_by_op`` and ``max_wait_by_op`` (sum over instances of the largest wait, per collective), in name order.

    Examples
    --------
    >>> from waitlab.models.analysis.waitstates import make_events, wait_states
    >>> ev = make_events(rank=[0, 1, 2], op=["barrier"] * 3, enter=[0.0, 1.0, 3.0], exit=[3.0] * 3, match=[0] * 3)
    >>> m = wait_metrics(ev, wait_states(ev))
    >>> m["total_wait"], m["collective_max_wait"], m["max_wait_by_op"]
    (5.0, 3.0, {'barrier': 3.0})
    """
    w = columns.values(waits, "wait").astype(float)
    exit_ = columns.values(events, "exit")
    by_op: dict[str, float] = {}
    max_by_op: dict[str, float] = {}
    coll_max = 0.0
    coll = np.zeros(w.size, bool)
    if w.size:
        code, cats = columns.codes(waits, "op")
        # every row's op among the distinct op names in name order (a missing one is "nan", as pandas writes it)
        names, of_cat = np.unique(np.array([*cats, "nan"], dtype=str), return_inverse=True)
        op = of_cat.reshape(-1)[code]
        p_code, p_cats = columns.codes(waits, "pattern")
        coll = ~np.array([c in _P2P for c in p_cats] + [False])[p_code]
        total = group_sums(op, w, names.size)  # as pandas adds them
        by_op = {str(names[i]): float(total[i]) for i in np.flatnonzero(np.bincount(op, minlength=names.size))}
        # the largest wait of every collective instance (op, match id), in (op, instance) order
        c_op, c_wait = op[coll], w[coll]
        inst = columns.values(events, "match")[columns.values(waits, "event")[coll]]
        order = np.lexsort((inst, c_op))
        c_op, inst, c_wait = c_op[order], inst[order], c_wait[order]
        if c_op.size:
            start = np.flatnonzero(np.r_[True, (c_op[1:] != c_op[:-1]) | (inst[1:] != inst[:-1])])
            per_inst = np.maximum.reduceat(c_wait, start)
            coll_max = float(per_inst.sum())
            inst_op = c_op[start]
            summed = group_sums(inst_op, per_inst, names.size)
            max_by_op = {str(names[i]): float(summed[i])
                         for i in np.flatnonzero(np.bincount(inst_op, minlength=names.size))}
    return {
        "total_wait": float(w.sum()),
        "makespan": float(exit_.max()) if exit_.size else 0.0,
        "collective_max_wait": coll_max,
        "considered_wait": coll_max + float(w[~coll].sum()),
        "wait_by_op": by_op,
        "max_wait_by_op": max_by_op,
    }


def metric_value(metrics: Mapping[str, Any], metric: str) -> float:
    """One figure of :func:`wait_metrics`: a key (``total_wait``, ``makespan``, ...), or
    ``considered_wait:OP+OP`` -- what H-CWP-DM's "earliest" pairing explains when it looks at the waits of
    those MPI operations only: the largest wait of each instance of a collective, every point-to-point wait.

    >>> m = {"total_wait": 9.0, "wait_by_op": {"allreduce": 8.0, "waitall": 1.0},
    ...      "max_wait_by_op": {"allreduce": 2.0}}
    >>> metric_value(m, "considered_wait:allreduce"), metric_value(m, "considered_wait:allreduce+waitall")
    (2.0, 3.0)
    """
    if metric.startswith("considered_wait:"):
        ops = [o for o in metric.split(":", 1)[1].split("+") if o]
        by_op, max_by_op = metrics.get("wait_by_op", {}), metrics.get("max_wait_by_op", {})
        return float(sum(max_by_op[o] if o in max_by_op else by_op.get(o, 0.0) for o in ops))
    return float(metrics[metric])


def ledger_frame(ops: OpTable, *, arrow: bool = False) -> pd.DataFrame | pa.Table:
    """The cause ledger of ``ops`` as a table (``rank, region, step, seconds, kind``); ``(top level)`` = no region.

    A pandas DataFrame, or with ``arrow=True`` an Arrow table (made without pandas) of the same columns: ``rank``
    and ``step`` int64, ``seconds`` float64, ``region`` and ``kind`` categorical (the DataFrame's are text:
    :func:`waitlab.models.columns.text_columns` gives the Arrow table's as text).
    """
    return ledger_table(ops.ledger, ops.names, arrow=arrow)


def ledger_table(led: Ledger, region_names: Sequence[str], *, arrow: bool = False) -> pd.DataFrame | pa.Table:
    """:func:`ledger_frame` of a ledger whose ``region`` indexes ``region_names`` (an operation table's names).

    >>> led = Ledger(rank=np.array([1], np.int32), region=np.array([-1], np.int32), step=np.array([2], np.int32),
    ...              seconds=np.array([0.5]), kind=np.array([0], np.int8))
    >>> ledger_table(led, ["Stencil"], arrow=True).to_pylist() == ledger_table(led, ["Stencil"]).to_dict("records")
    True
    """
    region = np.where(led.region >= 0, led.region, len(region_names))  # outside regions: "(top level)", as models say
    names = [*region_names, "(top level)"]
    rank, step, seconds = led.rank.astype(np.int64), led.step.astype(np.int64), led.seconds.astype(np.float64)
    if arrow:  # the texts as categoricals (waitlab.models.columns.text_columns: plain text, as the files hold them)
        return columns.table({"rank": rank, "region": Coded(region, names), "step": step, "seconds": seconds,
                              "kind": Coded(led.kind, CAUSE_KINDS)})
    import pandas as pd  # a pandas table asked for

    return pd.DataFrame({
        "rank": rank, "region": _texts(names, region), "step": step, "seconds": seconds,
        "kind": _texts(list(CAUSE_KINDS), led.kind),
    })  # fmt: skip


def _texts(names: list[str], codes: npt.NDArray[np.integer]) -> Any:
    """``names[codes]`` as a text column, taken from the names made text once (the column pandas makes of a string
    per row, without them: 0.05 instead of 0.2 s for 1.3 M rows); an empty one stays of objects, as pandas leaves it.

    >>> import pandas as pd
    >>> pd.Series(_texts(["a", "b"], np.array([1, 1, 0]))).tolist(), _texts(["a"], np.zeros(0, np.int8)).dtype
    (['b', 'b', 'a'], dtype('O'))
    """
    import pandas as pd  # a pandas column asked for

    return pd.array(names, dtype="str").take(codes.astype(np.intp)) if codes.size else np.array([], dtype=object)
