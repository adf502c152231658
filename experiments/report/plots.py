"""Timeline pictures: Gantt chart with wait states coloured (<= 64 ranks), rank x step heatmap beyond."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.collections import PolyCollection
from matplotlib.patches import Patch

from waitlab.experiments.report.canvas import bar_polygons, subplots
from waitlab.experiments.report.palette import KIND_COLOURS
from waitlab.experiments.report.palette import WAIT as WAIT_COLOUR

GANTT_MAX_RANKS = 64
#: Width of the Gantt chart in pixels (figure width x dpi): bars closer than one pixel are drawn as one.
GANTT_PIXELS = 12 * 110


def merge_subpixel(rank: np.ndarray, enter: np.ndarray, exit_: np.ndarray, pixel: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bars of one colour merged per rank where they overlap or lie less than ``pixel`` apart (the same picture,
    drawn with at most a few bars per pixel column: a 4.7 M-event program run drew every bar).

    >>> r, a, b = merge_subpixel(np.array([0, 0, 0, 1]), np.array([0.0, 1.05, 3.0, 0.0]),
    ...                          np.array([1.0, 2.0, 4.0, 1.0]), 0.1)
    >>> r.tolist(), a.tolist(), b.tolist()
    ([0, 0, 1], [0.0, 3.0, 0.0], [2.0, 4.0, 1.0])
    """
    if rank.size == 0:
        return rank, enter, exit_
    in_order = bool(np.all((rank[1:] > rank[:-1]) | ((rank[1:] == rank[:-1]) & (enter[1:] >= enter[:-1]))))
    if in_order:  # already sorted by (rank, enter), as a rank's operations are: the stable sort would not move them
        r, a, b = rank, enter, exit_
    else:
        order = np.lexsort((enter, rank))
        r, a, b = rank[order], enter[order], exit_[order]
    span = float(max(b.max() - min(a.min(), 0.0), pixel)) * 4 + 4 * pixel  # keeps ranks apart in one sweep
    shift = r.astype(np.float64) * span
    reach = np.maximum.accumulate(b + shift)  # furthest end so far (per rank: earlier ranks end below)
    new = np.r_[True, (a[1:] + shift[1:] > reach[:-1] + pixel) | (r[1:] != r[:-1])]
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], r.size] - 1
    return r[starts], a[starts], reach[ends] - shift[ends]


def timeline_png(events: pd.DataFrame, waits: pd.DataFrame, path: Path, title: str = "") -> None:
    """Write a timeline picture of the run to ``path``."""
    n_ranks = int(events["rank"].max()) + 1 if len(events) else 0
    if n_ranks <= GANTT_MAX_RANKS:
        _gantt(events, waits, n_ranks, path, title)
    else:
        _heatmap(events, waits, n_ranks, path, title)


def _gantt(events: pd.DataFrame, waits: pd.DataFrame, n_ranks: int, path: Path, title: str) -> None:
    # One PolyCollection per kind (not one artist per event): 100,000 events draw in about a second.
    fig, ax = subplots(figsize=(12, max(2.5, 0.3 * n_ranks + 1.5)))
    handles = []
    kind_col = events["kind"]
    if isinstance(kind_col.dtype, pd.CategoricalDtype):  # compare codes: no string per event
        kind, labels = kind_col.cat.codes.to_numpy(), [str(c) for c in kind_col.cat.categories]
    else:
        uniq, inverse = np.unique(kind_col.astype(str).to_numpy(), return_inverse=True)
        kind, labels = inverse.ravel(), [str(c) for c in uniq]
    leaf = kind != (labels.index("region") if "region" in labels else -2)
    kind = kind[leaf]
    rank, enter, exit_ = (events[c].to_numpy()[leaf] for c in ("rank", "enter", "exit"))
    t_max = float(events["exit"].max()) if len(events) else 1.0
    pixel = (t_max * 1.01 if t_max > 0 else 1.0) / GANTT_PIXELS
    for k, colour in KIND_COLOURS.items():
        sel = kind == (labels.index(k) if k in labels else -2)
        if sel.any():
            r, a, b = merge_subpixel(rank[sel], enter[sel], exit_[sel], pixel)
            ax.add_collection(PolyCollection(bar_polygons(r, a, b - a), facecolors=colour, linewidths=0,
                                             antialiased=False))
            handles.append(Patch(color=colour, label=k))
    if len(waits):
        w_enter = events["enter"].to_numpy()[waits["event"].to_numpy()]
        r, a, b = merge_subpixel(waits["rank"].to_numpy(), w_enter, w_enter + waits["wait"].to_numpy(), pixel)
        ax.add_collection(PolyCollection(bar_polygons(r, a, b - a), facecolors=WAIT_COLOUR, linewidths=0,
                                         antialiased=False))
        handles.append(Patch(color=WAIT_COLOUR, label="wait"))
    ax.set_xlim(0.0, t_max * 1.01 if t_max > 0 else 1.0)
    ax.set_ylim(n_ranks - 0.5, -0.5)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("rank")
    ax.set_title(title or "timeline")
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=8, frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})


def _heatmap(events: pd.DataFrame, waits: pd.DataFrame, n_ranks: int, path: Path, title: str) -> None:
    steps = int(events["step"].max()) + 1 if len(events) else 0
    grid = np.zeros((n_ranks, max(steps, 1)))
    ok = waits["step"].to_numpy() >= 0
    np.add.at(grid, (waits["rank"].to_numpy()[ok], waits["step"].to_numpy()[ok]), waits["wait"].to_numpy()[ok])
    fig, ax = subplots(figsize=(10, 6))
    im = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="Reds", origin="upper")
    ax.set_xlabel("step")
    ax.set_ylabel("rank")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_title(f"{title}: wait time per rank and step" if title else "wait time per rank and step")
    fig.colorbar(im, ax=ax, label="wait (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
