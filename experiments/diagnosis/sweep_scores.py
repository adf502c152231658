"""Diagnosis scores of every point of a sweep (``[sweep] diagnose = ["cwpdm", ...]``).

Each finished point is a case of its own (its run is the point's results folder): the models run on it,
the counterfactual truth is computed (cached), and the point's row of ``sweep.csv`` gets one column per
model and score, ``<model>.<score>`` (e.g. ``cwpdm.blame_error``; scores of
:func:`~waitlab.experiments.diagnosis.evaluate.case_scores`).  ``waitlab plot`` draws them against the
swept keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.experiments.diagnosis.evaluate import SCORES, Settings, evaluate_case
from waitlab.experiments.diagnosis.groundtruth import default_cache_dir
from waitlab.experiments.diagnosis.registry import resolve_all
from waitlab.experiments.diagnosis.suite import Case

#: Scores a sweep adds per model (the leaderboard's, minus the improvement pair).
SWEEP_SCORES = tuple(s for s in SCORES if s not in ("predicted", "realized"))


def score_columns(models: Sequence[str]) -> list[str]:
    """The columns a sweep with ``diagnose = models`` adds (``<model>.<score>``)."""
    return [f"{m}.{s}" for m in models for s in SWEEP_SCORES]


def add_scores(table: pd.DataFrame, points: Sequence[Any], runs: Path, models: Sequence[str],
               say: Callable[[str], None] = lambda _m: None, cache: Path | None = None) -> pd.DataFrame:
    """``table`` (one row per finished point, ``scenario_hash`` column) with the diagnosis score columns.

    ``points`` are the sweep's :class:`~waitlab.experiments.sweep.SweepPoint` objects; a model that fails on
    a point leaves n/a there, one line through ``say`` and a row of ``attrs["model_failures"]`` (``point``,
    ``scenario_hash``, ``model``, ``error``).
    """
    if not len(table) or not models:
        return table
    specs = resolve_all(list(models), "[sweep] diagnose")
    root = Path(cache) if cache is not None else default_cache_dir().parent
    by_key = {pt.key: pt for pt in points}
    cols: dict[str, list[float]] = {c: [] for c in score_columns([s.key for s in specs])}
    failures: list[dict[str, str]] = []
    for key in table["scenario_hash"]:
        pt = by_key[str(key)]
        label = ", ".join(f"{k}={v}" for k, v in pt.values)
        case = Case(pt.scenario.name, Path(pt.scenario.source), "sweep point", label, pt.scenario)
        oc = evaluate_case(case, specs, root, Settings(), folder=runs / str(key))
        for msg in oc.notes:
            say(f"diagnosis at {label}: {msg}")
        for row in oc.rows:
            if row.get("error"):
                failures.append({"point": label, "scenario_hash": str(key), "model": row["model"],
                                 "error": row["error"]})
            for s in SWEEP_SCORES:
                v = row.get(s, math.nan)
                cols[f"{row['model']}.{s}"].append(float(v) if v is not None else math.nan)
    out = table.copy()
    for c, v in cols.items():
        out[c] = v
    out.attrs["model_failures"] = failures
    return out


__all__ = ["SWEEP_SCORES", "add_scores", "score_columns"]
