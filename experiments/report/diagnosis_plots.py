"""Figures of a diagnosis: blamed cost per region (models and truth side by side), culprit timeline."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from waitlab.experiments.report.canvas import barh_collection, subplots
from waitlab.experiments.report.palette import KIND_COLOURS, OTHER, SERIES, WAIT, model_colour
from waitlab.models.analysis.scoring import by_rank_region, by_region

if TYPE_CHECKING:
    from waitlab.experiments.diagnosis.diagnose import Diagnosis

CULPRIT_COLOURS = SERIES
TIMELINE_MAX_RANKS = 48
MAX_REGIONS = 10


def _bars(ax: Axes, series: dict[str, pd.Series], title: str) -> None:
    regions: list[str] = []
    for s in series.values():
        for r in s.index[:MAX_REGIONS]:
            if r not in regions:
                regions.append(str(r))
    regions = regions[:MAX_REGIONS]
    x = np.arange(len(regions))
    width = 0.8 / max(len(series), 1)
    for i, (label, s) in enumerate(series.items()):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, s.reindex(regions).fillna(0.0).to_numpy(), width,
               label=label, color=model_colour(label, i))  # one colour per model, truth green, in both panels
    ax.set_xticks(x)
    ax.set_xticklabels(regions, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("seconds of wait")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def blame_figure(diag: Diagnosis, path: Path) -> None:
    """Blamed cost per region: CWP-DM, H-CWP-DM (each) and the truth of the total wait (left);
    H-CWP-DM (earliest) and the truth of the largest waits per collective instance (right)."""
    truth = diag.truth
    left: dict[str, pd.Series] = {}
    right: dict[str, pd.Series] = {}
    right_metric = "considered_wait"
    for m in diag.models:
        if m.metric == "total_wait":
            left[m.name] = by_region(m.blame())
        else:
            right[m.name] = by_region(m.blame())
            right_metric = m.metric
    if truth is not None:
        left["ground truth"] = truth.cost("region").clip(lower=0)
        right["ground truth"] = truth.cost("region", right_metric).clip(lower=0)
    ops = (", ".join("MPI_" + o.capitalize() for o in right_metric.split(":", 1)[1].split("+") if o)
           or "no operation") if ":" in right_metric else "every operation"
    fig, (ax1, ax2) = subplots(1, 2, figsize=(13, 4.8))
    _bars(ax1, left, "total wait")
    _bars(ax2, right, f"largest wait of each instance of {ops} (Wu et al.'s measure)")
    name = diag.scenario.name if diag.scenario is not None else ""
    fig.suptitle(f"Blamed cost per region {name}".strip())
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})


def _pick_ranks(n_ranks: int, diag: Diagnosis) -> np.ndarray:
    if n_ranks <= TIMELINE_MAX_RANKS:
        return np.arange(n_ranks)
    blamed: list[int] = []
    for m in diag.models:
        for r, _ in by_rank_region(m.blame()).index[: TIMELINE_MAX_RANKS // 4]:
            if int(r) not in blamed:
                blamed.append(int(r))
    blamed = blamed[: TIMELINE_MAX_RANKS // 2]
    rest = [int(r) for r in np.linspace(0, n_ranks - 1, TIMELINE_MAX_RANKS - len(blamed)).round()]
    return np.array(sorted(set(blamed) | set(rest)))


def culprit_timeline(events: pd.DataFrame, waits: pd.DataFrame, diag: Diagnosis, path: Path) -> None:
    """Gantt chart (up to 48 ranks: the most blamed and an even sample) with the culprit regions highlighted."""
    culprits: list[str] = []
    for m in diag.models:
        for c in diag.culprits.get(m.key, []):
            if c not in culprits and not c.startswith("MPI_"):
                culprits.append(c)
    culprits = culprits[: len(CULPRIT_COLOURS)]
    n_ranks = int(events["rank"].max()) + 1 if len(events) else 0
    ranks = _pick_ranks(n_ranks, diag)
    ypos = np.full(max(n_ranks, 1), -1)
    ypos[ranks] = np.arange(ranks.size)
    leaf = events[(events["kind"] != "region") & np.isin(events["rank"].to_numpy(), ranks)]
    y = ypos[leaf["rank"].to_numpy()]
    start = leaf["enter"].to_numpy()
    dur = leaf["exit"].to_numpy() - start
    region = leaf["region"].astype(str).to_numpy()
    is_mpi = (leaf["kind"] == "mpi").to_numpy()
    fig, ax = subplots(figsize=(12, max(3.0, 0.22 * ranks.size + 1.6)))
    other = ~is_mpi & ~np.isin(region, culprits)
    if other.any():  # an empty collection would still put a (wrongly coloured) entry in the legend
        barh_collection(ax, y[other], dur[other], start[other], 0.7, OTHER, "other regions")
    barh_collection(ax, y[is_mpi], dur[is_mpi], start[is_mpi], 0.7, KIND_COLOURS["mpi"], "MPI")
    for c, colour in zip(culprits, CULPRIT_COLOURS, strict=False):
        sel = ~is_mpi & (region == c)
        barh_collection(ax, y[sel], dur[sel], start[sel], 0.7, colour, c)
    if len(waits):
        w = waits[np.isin(waits["rank"].to_numpy(), ranks)]
        enter = events["enter"].to_numpy()[w["event"].to_numpy()]
        barh_collection(ax, ypos[w["rank"].to_numpy()], w["wait"].to_numpy(), enter, 0.35, WAIT, "wait")
    ax.autoscale_view()
    ax.set_yticks(np.arange(ranks.size))
    ax.set_yticklabels([str(r) for r in ranks], fontsize=6 if ranks.size > 24 else 8)
    ax.set_ylim(max(ranks.size, 1) - 0.5, -0.5)  # no rank shown (a run without events): an empty lane
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("rank" if ranks.size == n_ranks else f"rank ({ranks.size} of {n_ranks})")
    name = diag.scenario.name if diag.scenario is not None else ""
    ax.set_title(f"{name}: culprit regions highlighted".strip(": "))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=min(8, len(culprits) + 3), frameon=False,
              fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
