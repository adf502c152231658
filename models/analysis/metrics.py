"""Wait figures of one run and the cause ledger as a table: what ground truth and scores compare."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from waitlab.models.analysis.callpaths import pattern_codes
from waitlab.models.analysis.waitstates import PATTERNS
from waitlab.models.ops import CAUSE_KINDS, Ledger, OpTable

#: Wait metrics recorded for every run (see :func:`wait_metrics`).
METRICS = ("total_wait", "makespan", "considered_wait", "collective_max_wait")
_P2P = {PATTERNS.index("late_sender"), PATTERNS.index("late_receiver")}


def wait_metrics(events: pd.DataFrame, waits: pd.DataFrame) -> dict[str, Any]:
    """Wait figures of one run (plain JSON data).

    ``total_wait``; ``makespan``; ``collective_max_wait`` = sum over collective
    instances of their largest wait; ``considered_wait`` = that plus all
    point-to-point waits (what H-CWP-DM with the "earliest" pairing explains);
    ``wait_by_op`` and ``max_wait_by_op`` (sum over instances of the largest wait, per collective).

    Examples
    --------
    >>> from waitlab.models.analysis.waitstates import make_events, wait_states
    >>> ev = make_events(rank=[0, 1, 2], op=["barrier"] * 3, enter=[0.0, 1.0, 3.0], exit=[3.0] * 3, match=[0] * 3)
    >>> m = wait_metrics(ev, wait_states(ev))
    >>> m["total_wait"], m["collective_max_wait"], m["max_wait_by_op"]
    (5.0, 3.0, {'barrier': 3.0})
    """
    w = waits["wait"].to_numpy(float)
    ops = waits["op"].astype(str).to_numpy() if len(waits) else np.array([], dtype=object)
    coll = ~np.isin(pattern_codes(waits), list(_P2P)) if len(waits) else np.zeros(0, bool)
    inst = events["match"].to_numpy()[waits["event"].to_numpy()] if len(waits) else np.zeros(0, np.int64)
    frame = pd.DataFrame({"op": ops[coll], "inst": inst[coll], "wait": w[coll]})
    per_inst = frame.groupby(["op", "inst"])["wait"].max() if len(frame) else pd.Series(dtype=float)
    max_by_op = per_inst.groupby(level=0).sum() if len(per_inst) else pd.Series(dtype=float)
    by_op = pd.Series(w).groupby(ops).sum() if len(w) else pd.Series(dtype=float)
    coll_max = float(per_inst.sum()) if len(per_inst) else 0.0
    return {
        "total_wait": float(w.sum()),
        "makespan": float(events["exit"].max()) if len(events) else 0.0,
        "collective_max_wait": coll_max,
        "considered_wait": coll_max + float(w[~coll].sum()),
        "wait_by_op": {str(k): float(v) for k, v in by_op.items()},
        "max_wait_by_op": {str(k): float(v) for k, v in max_by_op.items()},
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


def ledger_frame(ops: OpTable) -> pd.DataFrame:
    """The cause ledger of ``ops`` as a table (``rank, region, step, seconds, kind``); ``(top level)`` = no region."""
    return ledger_table(ops.ledger, ops.names)


def ledger_table(led: Ledger, region_names: Sequence[str]) -> pd.DataFrame:
    """:func:`ledger_frame` of a ledger whose ``region`` indexes ``region_names`` (an operation table's names)."""
    region = np.where(led.region >= 0, led.region, len(region_names))  # outside regions: "(top level)", as models say
    return pd.DataFrame({
        "rank": led.rank.astype(int), "region": _texts([*region_names, "(top level)"], region),
        "step": led.step.astype(int), "seconds": led.seconds, "kind": _texts(list(CAUSE_KINDS), led.kind),
    })  # fmt: skip


def _texts(names: list[str], codes: npt.NDArray[np.integer]) -> Any:
    """``names[codes]`` as a text column, taken from the names made text once (the column pandas makes of a string
    per row, without them: 0.05 instead of 0.2 s for 1.3 M rows); an empty one stays of objects, as pandas leaves it.

    >>> pd.Series(_texts(["a", "b"], np.array([1, 1, 0]))).tolist(), _texts(["a"], np.zeros(0, np.int8)).dtype
    (['b', 'b', 'a'], dtype('O'))
    """
    return pd.array(names, dtype="str").take(codes.astype(np.intp)) if codes.size else np.array([], dtype=object)
