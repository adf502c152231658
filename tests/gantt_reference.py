"""The Gantt chart as ``timeline.png`` drew it before issue 25's raster: one matplotlib polygon per merged bar.

Kept as the independent method the raster (:func:`waitlab.experiments.report.plots.gantt_raster`) is checked
against: bars of one layer on one rank that lie at most a pixel apart are merged (sorted by start, a running
maximum of the ends), then each layer is drawn as a ``PolyCollection`` without antialiasing, layer over layer,
and the picture is read back from the PNG matplotlib writes.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from PIL import Image

DPI = 110


def merge_subpixel(rank: np.ndarray, enter: np.ndarray, exit_: np.ndarray, pixel: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bars of one colour merged per rank where they overlap or lie at most ``pixel`` apart (main before issue 25).

    >>> r, a, b = merge_subpixel(np.array([0, 0, 0, 1]), np.array([0.0, 1.05, 3.0, 0.0]),
    ...                          np.array([1.0, 2.0, 4.0, 1.0]), 0.1)
    >>> r.tolist(), a.tolist(), b.tolist()
    ([0, 0, 1], [0.0, 3.0, 0.0], [2.0, 4.0, 1.0])
    """
    if rank.size == 0:
        return rank, enter, exit_
    order = np.lexsort((enter, rank))
    r, a, b = rank[order], enter[order], exit_[order]
    span = float(max(b.max() - min(a.min(), 0.0), pixel)) * 4 + 4 * pixel  # keeps ranks apart in one sweep
    shift = r.astype(np.float64) * span
    reach = np.maximum.accumulate(b + shift)
    new = np.r_[True, (a[1:] + shift[1:] > reach[:-1] + pixel) | (r[1:] != r[:-1])]
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], r.size] - 1
    return r[starts], a[starts], reach[ends] - shift[ends]


def polygons(rank: np.ndarray, start: np.ndarray, end: np.ndarray, height: float = 0.6) -> np.ndarray:
    """Rectangles (n, 4, 2), one per bar, ``height`` rank rows high around the rank."""
    y0, y1 = rank - height / 2, rank + height / 2
    return np.stack([np.stack([start, y0], 1), np.stack([end, y0], 1), np.stack([end, y1], 1),
                     np.stack([start, y1], 1)], 1)


def draw_layers(layers: list[tuple[np.ndarray, np.ndarray, np.ndarray]], colours: list[str], n_ranks: int,
                t_end: float, box: tuple[int, int, int, int], size: tuple[int, int]) -> np.ndarray:
    """RGB pixels inside the axes box ``(left, bottom, width, height)`` (whole pixels of a ``size`` figure) of the
    layers drawn as merged polygons, times 0 to ``t_end`` across the box and ranks top to bottom."""
    left, bottom, width, height = box
    fig = Figure(figsize=(size[0] / DPI, size[1] / DPI), dpi=DPI)
    ax = fig.add_axes((left / size[0], bottom / size[1], width / size[0], height / size[1]))
    for (rank, start, end), colour in zip(layers, colours, strict=True):
        r, a, b = merge_subpixel(np.asarray(rank), np.asarray(start, float), np.asarray(end, float), t_end / width)
        ax.add_collection(PolyCollection(polygons(r, a, b), facecolors=colour, linewidths=0, antialiased=False))
    ax.set_xlim(0.0, t_end)
    ax.set_ylim(n_ranks - 0.5, -0.5)
    ax.set_axis_off()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    top = size[1] - bottom - height
    return np.asarray(Image.open(buf).convert("RGB"))[top:top + height, left:left + width]
