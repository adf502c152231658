"""Figures through matplotlib's object API, without :mod:`matplotlib.pyplot`.

pyplot keeps a global registry of open figures and loads a GUI-capable backend on import, which costs
every ``waitlab`` command about a quarter of a second at start; a :class:`~matplotlib.figure.Figure`
made directly is saved through the Agg canvas and freed with its last reference (no ``close``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from waitlab.experiments.report.palette import SERIES

__all__ = ["bar_polygons", "barh_collection", "subplots"]


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], **kwargs: Any) -> tuple[Figure, Any]:
    """``pyplot.subplots`` without pyplot: a new :class:`Figure` and its axes (one, or an array).

    Every axes cycles through the shared palette's :data:`~waitlab.experiments.report.palette.SERIES`, so
    a figure that does not pick colours itself still uses waitlab's palette, not matplotlib's default.

    Examples
    --------
    >>> fig, (a, b) = subplots(1, 2, figsize=(4, 2))
    >>> len(fig.axes)
    2
    """
    fig = Figure(figsize=figsize)
    axes = fig.subplots(nrows, ncols, **kwargs)
    for ax in fig.axes:
        ax.set_prop_cycle(color=list(SERIES))
    return fig, axes


def bar_polygons(rank: np.ndarray, start: np.ndarray, width: np.ndarray, height: float = 0.6) -> Any:
    """Rectangles (n, 4, 2) for one PolyCollection: one bar per row at y = rank (an array: matplotlib's fast path;
    typed Any because its stubs ask for a sequence)."""
    x0, x1 = start.astype(float), (start + width).astype(float)
    y0, y1 = rank - height / 2, rank + height / 2
    return np.stack([np.stack([x0, y0], 1), np.stack([x1, y0], 1), np.stack([x1, y1], 1), np.stack([x0, y1], 1)], 1)


def barh_collection(ax: Axes, y: np.ndarray, width: np.ndarray, left: np.ndarray, height: float, color: str,
                    label: str) -> None:
    """``ax.barh`` as one PolyCollection (one artist, not one Rectangle per bar), with a legend entry.

    Thousands of bars draw in a fraction of the time; call ``ax.autoscale_view()`` after the last one.
    """
    ax.add_collection(PolyCollection(bar_polygons(np.asarray(y, float), np.asarray(left, float),
                                                  np.asarray(width, float), height),
                                     facecolors=color, linewidths=0, antialiased=False, label=label))
