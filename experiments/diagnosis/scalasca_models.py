"""Scalasca's root-cause analysis and critical path as diagnosis models (the protocol of
:mod:`waitlab.models.analysis.protocol`), scored like every other model.

Each model writes the run it is given as OTF2 (:func:`waitlab.simulator.otf2_export.write_otf2`, into a
temporary folder), runs Scalasca's ``scout.mpi`` on it (:func:`waitlab.simulator.scalasca.run_scout`) and
turns ``scout.cubex`` into blame per (rank, region):

* :func:`scalasca_delay_model`: the delay costs of Böhme et al. (SC10), short- and long-term, of every wait
  pattern (``delay_latesender``, ``delay_n2n``, ...: :data:`~waitlab.simulator.scalasca.DELAY_METRICS`), at the
  rank and call path where the delay happened;
* :func:`scalasca_critical_path_model`: the critical-path imbalance impact of Böhme et al. (IPDPS 2012),
  ``critical_imbalance_impact``, per rank and call path (scaled to the run's wait if it exceeds it, as the
  built-in ``critical_path`` model is).

A call path's region is its innermost waitlab region (``waitlab>Stencil>compute`` -> ``Stencil``; none:
``(top level)``).  They need Scalasca (:func:`~waitlab.simulator.scalasca.find_scalasca`); without it they
raise an :class:`~waitlab.errors.EnvironmentProblem` naming the reason.  ``waitlab evaluate --scalasca`` scores
them beside the other models (:func:`scalasca_specs`; without Scalasca it says in one line that their rows are
skipped and why); they are opt-in because ``scout.mpi`` needs one process per rank (a 256-rank case takes
minutes on two cores).

Sub-communicators: a model sees the event table, not the run's communicator list; a communicator's members
are taken as the ranks that used it, in rank order (``MPI_Comm_split`` with the rank as key).
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from waitlab.experiments.diagnosis.registry import ModelSpec
from waitlab.models.analysis.protocol import RunData
from waitlab.simulator.otf2_export import write_otf2
from waitlab.simulator.scalasca import DELAY_METRICS, find_scalasca, read_cubex, require_scalasca, run_scout

TOP = "(top level)"


def _comms(events: pd.DataFrame) -> list[list[int]]:
    """Members of communicators 1, 2, ... of the ``comm`` column: the ranks that used each, in rank order."""
    if "comm" not in events or not len(events):
        return []
    comm = events["comm"].to_numpy(np.int64)
    rank = events["rank"].to_numpy(np.int64)
    return [sorted({int(r) for r in rank[comm == k].tolist()}) for k in range(1, int(comm.max()) + 1)]


#: The last run analyzed and its table: the two models of one run share one ``scout.mpi`` run.
_LAST: list[tuple[RunData, pd.DataFrame]] = []


def scout_table(run: RunData, *, timeout: float = 600.0) -> pd.DataFrame:
    """``scout.cubex`` of the run (:func:`~waitlab.simulator.scalasca.read_cubex`'s table), default analysis."""
    if _LAST and _LAST[0][0] is run:
        return _LAST[0][1]
    prefix = require_scalasca()
    with tempfile.TemporaryDirectory(prefix="waitlab-scalasca-") as tmp:
        anchor = write_otf2(run.events, run.waits, {"scenario": "model"}, Path(tmp) / "otf2",
                            placement=run.placement, comms=_comms(run.events), n_ranks=run.n_ranks)
        cubex = run_scout(anchor, run.n_ranks, timeout=timeout, prefix=prefix)
        table = read_cubex(cubex)
    _LAST[:] = [(run, table)]
    return table


def _blame(table: pd.DataFrame, metrics: tuple[str, ...], run: RunData) -> pd.DataFrame:
    rows = table[table["metric"].isin(metrics)]
    regions = set(run.regions)
    region = [next((p for p in reversed(cp.split(">")) if p in regions), TOP) for cp in rows["callpath"].tolist()]
    out = (pd.DataFrame({"rank": rows["rank"].to_numpy(np.int64), "region": region,
                         "seconds": rows["seconds"].to_numpy(np.float64)})
           .groupby(["rank", "region"], as_index=False)["seconds"].sum())
    return out[out["seconds"] > 0].reset_index(drop=True)


def scalasca_delay_model(run: RunData, **_: Any) -> pd.DataFrame:
    """Scalasca's delay costs (short- plus long-term, every MPI wait pattern) per rank and region."""
    metrics = tuple(m for pair in DELAY_METRICS.values() for m in pair)
    out = _blame(scout_table(run), metrics, run)
    total = float(out["seconds"].sum())  # Scalasca's Late Receiver counts waits waitlab's does not (diagnosis.md)
    if total > run.total_wait > 0:
        out["seconds"] *= run.total_wait / total
    return out


def scalasca_critical_path_model(run: RunData, **_: Any) -> pd.DataFrame:
    """Scalasca's critical-path imbalance impact per rank and region (at most the run's total wait)."""
    out = _blame(scout_table(run), ("critical_imbalance_impact",), run)
    total = float(out["seconds"].sum())
    if total > run.total_wait > 0:
        out["seconds"] *= run.total_wait / total
    return out


def scalasca_specs() -> tuple[list[ModelSpec], str]:
    """The two models as workbench models when Scalasca (and ``pycubexr``) is found; else none, and why."""
    prefix, reason = find_scalasca()
    if prefix is not None and importlib.util.find_spec("pycubexr") is None:
        prefix, reason = None, "pycubexr is not installed (fix: pip install 'waitlab[scalasca]')"
    if prefix is None:
        return [], reason
    return [ModelSpec("scalasca_delay", "Scalasca delay costs", scalasca_delay_model, builtin=True),
            ModelSpec("scalasca_critical_path", "Scalasca critical-path imbalance", scalasca_critical_path_model,
                      builtin=True)], reason


__all__ = ["scalasca_critical_path_model", "scalasca_delay_model", "scalasca_specs", "scout_table"]
