"""Columns of a sweep table beyond a point's summary: what a capacity planner reads to compare and to trust a point.

``<op>_time``: the mean time of one collective of each operation (last entry to last exit,
:func:`waitlab.models.analysis.collective_times.collective_times`); ``alltoall_ran``: the alltoall algorithm SMPI
ran, a selector (``default``, ``ompi``, ``mpich``, ``mvapich2``) resolved per call
(:func:`waitlab.models.apps.alltoall_selectors.alltoall_ran`); ``figures_assumed`` / ``figures_sourced``: the
platform file's own marks (``waitlab platforms NAME``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from waitlab.models.analysis.collective_times import alltoall_shapes, collective_times
from waitlab.models.apps.alltoall import P2P_ALLTOALL_ALGORITHMS
from waitlab.models.apps.alltoall_selectors import alltoall_ran
from waitlab.platforms import PlatformModel, load_platform
from waitlab.readers import read_json

__all__ = ["details", "figures_note"]


#: Columns of the events table :func:`details` reads.
_EVENT_COLUMNS = ["rank", "op", "match", "enter", "exit", "bytes"]


def details(folder: Path, figures: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """What a planner compares besides the totals: the time of one collective per operation (``<op>_time``,
    :func:`~waitlab.models.analysis.collective_times.collective_times`), the alltoall algorithm SMPI ran
    (``alltoall_ran``: a selector such as ``default`` resolved per call, :mod:`~waitlab.models.apps.alltoall_selectors`)
    and how many of the platform file's figures are assumed rather than sourced (``figures_assumed``,
    ``figures_sourced``; ``figures`` caches them per platform)."""
    out: dict[str, Any] = {}
    events = pd.read_parquet(folder / "events.parquet", columns=_EVENT_COLUMNS)
    for op, seconds in collective_times(events).items():
        out[f"{op}_time"] = seconds
    meta = read_json(folder / "run.json", "run.json", 16 << 20, "run the sweep again")
    configured = str(meta.get("smpi_config", {}).get("smpi/alltoall", "default"))
    shapes = alltoall_shapes(events)
    app_alg = meta.get("resolved_scenario", {}).get("application", {}).get("alltoall_algorithm")
    if shapes:
        per_host = _ranks_per_host(folder) if configured == "impi" else 1
        out["alltoall_ran"] = "+".join(dict.fromkeys(alltoall_ran(configured, p, n, per_host) for p, n in shapes))
    elif app_alg in P2P_ALLTOALL_ALGORITHMS:
        out["alltoall_ran"] = app_alg
    platform = str(meta.get("resolved_scenario", {}).get("platform", {}).get("name", ""))
    if platform and platform not in figures:
        model = load_platform(platform)
        figures[platform] = (len(model.assumed), len(model.figures) - len(model.assumed))
    if platform:
        out["figures_assumed"], out["figures_sourced"] = figures[platform]
    return out


def _ranks_per_host(folder: Path) -> int:
    """Ranks on every SimGrid host of the run (``placement.csv``), or 1 when hosts hold different numbers (SMPI's
    ``Comm::is_uniform``, which Intel MPI's selector reads)."""
    placement = folder / "placement.csv"
    if not placement.is_file():
        return 1
    counts = pd.read_csv(placement, usecols=["host"])["host"].value_counts()
    return int(counts.iloc[0]) if counts.nunique() == 1 else 1


def figures_note(table: pd.DataFrame, platforms: Sequence[tuple[str, str]],
                 models: Mapping[str, PlatformModel] | None = None) -> str:
    """One line per platform: how many of the table's points use it, how many of its figures are assumed, and
    where to read them (``platforms``: (scenario hash, platform name) of every point; empty for a table without
    the figure columns; ``models``: the platform models the points ran on, by name, loaded when missing)."""
    if table.empty or "figures_assumed" not in table.columns:
        return ""
    done = set(table["scenario_hash"])
    names = pd.Series([name for key, name in platforms if key in done], dtype=object)
    lines = []
    for name, n in names.value_counts(sort=False).items():
        model = (models or {}).get(str(name)) or load_platform(str(name))
        a = len(model.assumed)
        lines.append(f"  {model.name}: {n} point{'s rest' if n != 1 else ' rests'} on {a} assumed and "
                     f"{len(model.figures) - a} sourced platform figures (columns figures_assumed, figures_sourced; "
                     f"`waitlab platforms {name}` lists them)")
    return "figures behind the answers:\n" + "\n".join(lines)
