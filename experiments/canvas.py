"""Figures through matplotlib's object API, without :mod:`matplotlib.pyplot`.

pyplot keeps a global registry of open figures and loads a GUI-capable backend on import, which costs
every ``waitlab`` command about a quarter of a second at start; a :class:`~matplotlib.figure.Figure`
made directly is saved through the Agg canvas and freed with its last reference (no ``close``).
"""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

__all__ = ["subplots"]


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], **kwargs: Any) -> tuple[Figure, Any]:
    """``pyplot.subplots`` without pyplot: a new :class:`Figure` and its axes (one, or an array).

    Examples
    --------
    >>> fig, (a, b) = subplots(1, 2, figsize=(4, 2))
    >>> len(fig.axes)
    2
    """
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)
