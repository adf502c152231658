"""waitlab's wait states against Scalasca's on the same run: export OTF2, run ``scout.mpi``, compare per pattern.

:func:`compare_waits` is the cross-check of ``tests/test_scalasca.py`` and of the table in docs/diagnosis.md
(``benchmarks/scalasca_table.py``): both tools see the same timestamps (waitlab's OTF2 export is exact to
the nanosecond), so their wait states must agree where their definitions agree.  The name map is
:data:`waitlab.simulator.scalasca.SCALASCA_METRIC`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from waitlab.experiments.exports import export_run
from waitlab.experiments.results import load_run
from waitlab.simulator.scalasca import SCALASCA_METRIC, read_cubex, run_scout, scalasca_waits


def scout_run_folder(folder: str | Path, *, rootcause: bool = True, critical_path: bool = True,
                     timeout: float = 600.0, out: str | Path | None = None) -> Path:
    """Export a results folder as OTF2 (into ``out``, default the folder) and run ``scout.mpi`` on it.

    Returns the ``scout.cubex`` path.
    """
    run = load_run(folder)
    anchor = export_run(folder, ("otf2",), out=out)["otf2"]
    return run_scout(anchor, int(run.scenario.ranks), rootcause=rootcause, critical_path=critical_path, timeout=timeout)


def waitlab_waits(waits: pd.DataFrame) -> pd.DataFrame:
    """waitlab's wait-state table summed per ``pattern, rank`` (``seconds``)."""
    if not len(waits):
        return pd.DataFrame({"pattern": pd.Series(dtype=str), "rank": pd.Series(dtype=np.int64),
                             "seconds": pd.Series(dtype=np.float64)})
    g = waits.assign(pattern=waits["pattern"].astype(str)).groupby(["pattern", "rank"], observed=True)["wait"].sum()
    return pd.DataFrame({"pattern": g.index.get_level_values(0).astype(str),
                         "rank": g.index.get_level_values(1).to_numpy(np.int64), "seconds": g.to_numpy(np.float64)})


def compare_waits(waits: pd.DataFrame, cubex: str | Path) -> pd.DataFrame:
    """Per pattern and rank: ``pattern, rank, waitlab, scalasca`` seconds (0 where a tool has none).

    Patterns are waitlab's names (:data:`SCALASCA_METRIC`); a row for every (pattern, rank) either tool has.
    """
    ours = waitlab_waits(waits).rename(columns={"seconds": "waitlab"})
    theirs = scalasca_waits(read_cubex(cubex)).rename(columns={"seconds": "scalasca"})
    both = ours.merge(theirs, on=["pattern", "rank"], how="outer").fillna({"waitlab": 0.0, "scalasca": 0.0})
    unknown = sorted(set(both["pattern"]) - set(SCALASCA_METRIC))
    if unknown:  # a waitlab pattern without a Scalasca name would silently compare against zero
        raise ValueError(f"waitlab patterns {unknown} have no Scalasca metric in SCALASCA_METRIC")
    return both.sort_values(["pattern", "rank"], ignore_index=True)


def pattern_totals(comparison: pd.DataFrame) -> pd.DataFrame:
    """:func:`compare_waits` summed per pattern, with the relative difference ``rel`` (of the larger total)."""
    t = comparison.groupby("pattern")[["waitlab", "scalasca"]].sum()
    scale = np.maximum(t["waitlab"].abs(), t["scalasca"].abs())
    t["rel"] = np.where(scale > 0, (t["scalasca"] - t["waitlab"]).abs() / np.where(scale > 0, scale, 1.0), 0.0)
    return t.reset_index()
