"""CWP-DM and H-CWP-DM behind the model protocol (:mod:`waitlab.models.analysis.protocol`).

Each built-in model has a *detail* function returning the model's own result (what the report shows:
short- and long-term costs, hotspots, ...) and a protocol function ``model(run, **options) ->
DataFrame`` that is :func:`~waitlab.models.analysis.protocol.from_costs` of it: the same numbers, no
re-computation.

* :func:`cwpdm_model`: CWP-DM (Boehme et al.; Wu et al. formula 2) over every wait;
* :func:`hcwpdm_earliest_model`: H-CWP-DM (Wu et al. formulas 3-5), the paper's pairing (the earliest
  rank of each collective instance), over the waits of the MPI operations that hold ``focus_share``
  of the wait (:func:`focus_ops`, Wu et al.'s step 2);
* :func:`hcwpdm_each_model`: H-CWP-DM pairing every waiting rank, over every wait.

Examples
--------
>>> from waitlab.models.analysis.protocol import RunData
>>> from waitlab.models.analysis.waitstates import make_events, wait_states
>>> ev = make_events(rank=[0, 0, 1, 1, 2, 2], op=["compute", "barrier"] * 3,
...                  enter=[0, 3, 0, 1, 0, 1], exit=[3, 3, 1, 3, 1, 3], match=[-1, 0] * 3)
>>> out = cwpdm_model(RunData(ev, wait_states(ev)))
>>> out[["rank", "region", "seconds"]].to_dict("records"), out.attrs["explains"]
([{'rank': 0, 'region': '(top level)', 'seconds': 4.0}], 'total_wait')
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from waitlab.models.analysis.cwpdm import CwpdmResult, cwpdm
from waitlab.models.analysis.hcwpdm import DEFAULT_THRESHOLD, HcwpdmResult, hcwpdm
from waitlab.models.analysis.protocol import RunData, from_costs


def focus_ops(waits: pd.DataFrame, share: float = 0.9) -> list[str]:
    """The MPI operations holding the most wait, fewest first that together hold ``share`` of it
    (Wu et al.'s step 2: find where the wait is, e.g. MPI_Allreduce with 99%).  ``share >= 1``: all.

    >>> import pandas as pd
    >>> focus_ops(pd.DataFrame({"op": ["allreduce", "waitall", "allreduce"], "wait": [5.0, 1.0, 4.0]}))
    ['allreduce']
    """
    if not len(waits):
        return []
    by_op = waits.groupby(waits["op"].astype(str))["wait"].sum().sort_values(ascending=False, kind="stable")
    if share >= 1:
        return [str(o) for o in by_op.index]
    need = share * float(by_op.sum())
    cum = by_op.cumsum().to_numpy()
    k = int(np.searchsorted(cum, need - 1e-12 * abs(need))) + 1
    return [str(o) for o in by_op.index[:k]]


def cwpdm_detail(run: RunData, *, tie_relative: float = 0.0, **_: Any) -> CwpdmResult:
    """CWP-DM's own result on ``run`` (``tie_relative``: the relative tie rule, see ``ties``)."""
    return cwpdm(run.events, run.waits, tie_relative=tie_relative, index=run.index)


def cwpdm_frame(res: CwpdmResult) -> pd.DataFrame:
    """The protocol table of a CWP-DM result (``attrs``: explains the total wait)."""
    return from_costs(res.costs, explains="total_wait", explains_wait=res.total_wait, unexplained=res.unexplained)


def cwpdm_model(run: RunData, **options: Any) -> pd.DataFrame:
    """CWP-DM as a protocol model (no options)."""
    return cwpdm_frame(cwpdm_detail(run, **options))


def _focus_metric(focus: list[str]) -> str:
    return "considered_wait:" + "+".join(focus)


def hcwpdm_earliest_detail(run: RunData, *, threshold: float = DEFAULT_THRESHOLD, focus_share: float = 0.9,
                           tie_relative: float = 0.0, **_: Any) -> HcwpdmResult:
    """H-CWP-DM, earliest pairing, over the waits of :func:`focus_ops`."""
    focus = focus_ops(run.waits, focus_share)
    w = run.waits
    focused = w[w["op"].astype(str).isin(focus)] if len(w) else w
    return hcwpdm(run.events, focused, threshold=threshold, pairing="earliest", tie_relative=tie_relative,
                  index=run.index)


def hcwpdm_frame(res: HcwpdmResult, focus: list[str] | None = None) -> pd.DataFrame:
    """The protocol table of an H-CWP-DM result; ``focus``: the operations it looked at (None: every wait)."""
    metric = _focus_metric(focus) if focus is not None else "total_wait"
    return from_costs(res.costs, explains=metric, explains_wait=res.considered_wait, unexplained=res.unexplained)


def hcwpdm_earliest_model(run: RunData, **options: Any) -> pd.DataFrame:
    """H-CWP-DM with Wu et al.'s pairing; options ``threshold`` (hotspots, default 1%), ``focus_share`` (0.9)."""
    return hcwpdm_frame(hcwpdm_earliest_detail(run, **options), focus_ops(run.waits, options.get("focus_share", 0.9)))


def hcwpdm_each_detail(run: RunData, *, threshold: float = DEFAULT_THRESHOLD, tie_relative: float = 0.0,
                       **_: Any) -> HcwpdmResult:
    """H-CWP-DM pairing every waiting rank, over every wait."""
    return hcwpdm(run.events, run.waits, threshold=threshold, pairing="each", tie_relative=tie_relative,
                  index=run.index)


def hcwpdm_each_model(run: RunData, **options: Any) -> pd.DataFrame:
    """H-CWP-DM ("each" pairing); option ``threshold`` (default 1%)."""
    return hcwpdm_frame(hcwpdm_each_detail(run, **options))


__all__ = ["cwpdm_detail", "cwpdm_frame", "cwpdm_model", "focus_ops", "hcwpdm_each_detail", "hcwpdm_each_model",
           "hcwpdm_earliest_detail", "hcwpdm_earliest_model", "hcwpdm_frame"]
