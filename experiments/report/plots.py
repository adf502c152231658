"""Timeline pictures: Gantt chart with wait states coloured (<= 64 ranks), rank x step heatmap beyond.

The Gantt chart's bars are a raster: one colour per rank and pixel column, worked out with numpy
(:func:`gantt_raster`: the picture matplotlib drew from one polygon per merged bar, pixel for pixel) and put
on the canvas as it is, under matplotlib's axes, title and legend. Its margins are fixed (:data:`MARGINS`)
instead of measured by ``tight_layout``, which drew the whole figure once more: the figure is drawn once,
when it is saved. A 4.2 M-event chart takes about 0.2 CPU s, most of it matplotlib's ticks and text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import matplotlib
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.backend_bases import RendererBase
from matplotlib.colors import to_rgba_array
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from waitlab.experiments.report.canvas import subplots
from waitlab.experiments.report.palette import KIND_COLOURS
from waitlab.experiments.report.palette import WAIT as WAIT_COLOUR

GANTT_MAX_RANKS = 64
#: Width of the Gantt chart (inches) and its resolution (dots per inch): 1,320 pixels across.
GANTT_WIDTH, GANTT_DPI = 12.0, 110
#: Height of a rank's bar in rank rows (the rest of the row is the gap to the next rank).
BAR_HEIGHT = 0.6
#: Legend entries per legend row.
LEGEND_COLUMNS = 8
#: Margins around the Gantt chart's axes, in points: left (rank numbers of up to two digits and the axis label),
#: right (half of the last time label), top (the title), bottom (time labels and the axis label, down to the top
#: of the legend); then a legend row (8-point labels) per :data:`LEGEND_COLUMNS` entries and a last gap.
MARGINS = {"left": 45.0, "right": 20.0, "top": 26.0, "bottom": 40.0, "legend_row": 14.0, "last": 8.0}
#: In a raster: no layer shows here.
_HIDDEN = -1


class Bars(NamedTuple):
    """One group of bars for :func:`gantt_raster`: the rank, start and end time of each bar, and their layer.

    ``layer`` is one layer for the whole group, or ``(codes, layer_of_code)``: each bar's integer code and each
    code's layer (categorical codes: code -1 takes the last entry of ``layer_of_code``, as numpy indexing does).
    A negative layer is not drawn.
    """

    rank: np.ndarray
    start: np.ndarray
    end: np.ndarray
    layer: int | tuple[np.ndarray, np.ndarray]


def gantt_raster(groups: Sequence[Bars], n_ranks: int, n_layers: int, t_end: float, width: int,
                 chunk: int = 1 << 15, present: np.ndarray | None = None) -> np.ndarray:
    """Which layer shows in each pixel column of each rank's bar: ``(n_ranks, width)`` int8, -1 where none does.

    The picture matplotlib draws (without antialiasing) from one polygon per bar after the bars of a layer on a
    rank that lie less than a pixel apart are merged into one (the merging keeps a chart of millions of bars as it
    looks, solid where bars are dense; `tests/gantt_reference.py` keeps that way of drawing, and the tests compare
    the two pixel for pixel). Times are in pixels of ``t_end / width`` seconds from 0; column ``c`` shows a layer
    when a merged bar ``[a, b]`` holds its middle, ``a < c + 0.5 <= b`` (matplotlib snaps the corners of such a
    bar to whole pixels), i.e. when a bar starting before the middle ends at or after it, or when the middle falls
    in a gap of at most one pixel between that layer's bars. Layers are painted in order: where several show, the
    highest one does (waits over MPI over compute, as the chart paints them).

    Per (layer, rank, column): the earliest start and the latest end of the bars whose first middle after their
    start is that column (two scatters), then a running maximum of the ends and a running minimum of the starts from
    the right; no sort and no Python per bar. Bars are taken ``chunk`` at a time through small reused buffers, so a
    pass over millions of bars runs in the processor's cache, not through newly allocated memory. Times must be
    finite and ``t_end`` positive. ``present``, if given (``n_layers`` booleans), is set for every layer that has a
    bar, drawn or not (a legend's entries).

    Rank 0's bars [0, 2], [2.2, 2.4] and [3.3, 3.4] of layer 0 lie less than a pixel apart: one bar [0, 3.4], shown
    in columns 0 to 2; rank 1's [3.1, 3.2] holds no middle and its layer-1 bar [0.2, 2.7] three:

    >>> gantt_raster([Bars(np.array([0, 0, 0, 1]), np.array([0.0, 2.2, 3.3, 3.1]), np.array([2.0, 2.4, 3.4, 3.2]), 0),
    ...               Bars(np.array([1]), np.array([0.2]), np.array([2.7]), 1)], 2, 2, 4.0, 4).tolist()
    [[0, 0, 0, -1], [1, 1, 1, -1]]
    """
    stride = width + 1  # column `width`: bars starting after the last middle (they can close a gap before it)
    plane = n_ranks * stride
    first = np.full((n_layers + 1) * plane, np.inf)  # plane n_layers: bars not drawn
    last = np.full((n_layers + 1) * plane, -np.inf)
    scale = width / t_end
    # negative layers, and code -1 wrapping round to the last entry, land on the plane of bars not drawn
    for rank, start, end, layer in groups:
        n = len(rank)
        size = min(n, chunk)
        buf_k, buf_i = np.empty(size, np.int64), np.empty(size, np.int64)
        buf_s, buf_e, buf_f = np.empty(size), np.empty(size), np.empty(size)
        if isinstance(layer, tuple):
            offsets = np.where(np.asarray(layer[1]) < 0, n_layers, layer[1]).astype(np.int64) * plane
            codes, whole = layer[0], 0
        else:
            codes, offsets, whole = None, np.zeros(1, np.int64), (layer if layer >= 0 else n_layers) * plane
        for i in range(0, n, chunk):
            j = min(n, i + chunk)
            k, b, s, e, f = buf_k[:j - i], buf_i[:j - i], buf_s[:j - i], buf_e[:j - i], buf_f[:j - i]
            if codes is not None:
                np.take(offsets, codes[i:j], out=k, mode="wrap")
            else:
                k.fill(whole)
            np.copyto(b, rank[i:j])
            b *= stride
            k += b
            np.multiply(start[i:j], scale, out=s)  # contiguous copies: ufunc.at's fast loop needs them
            np.floor(np.add(s, 0.5, out=f), out=f)  # the first column whose middle is after the start
            np.fmin(np.fmax(f, 0.0, out=f), width, out=f)
            np.copyto(b, f, casting="unsafe")
            k += b
            np.multiply(end[i:j], scale, out=e)
            np.minimum.at(first, k, s)
            np.maximum.at(last, k, e)
    planes = (n_layers + 1, n_ranks, stride)
    if present is not None:
        present[:] = (first.reshape(n_layers + 1, -1)[:n_layers] < np.inf).any(axis=1)
    reach = np.maximum.accumulate(last.reshape(planes)[:n_layers, :, :width], axis=2)  # of bars starting before
    after = np.minimum.accumulate(first.reshape(planes)[:n_layers, :, :0:-1], axis=2)[:, :, ::-1]  # the rest
    middle = np.arange(width) + 0.5
    shown = (reach >= middle) | (after - reach <= 1.0)
    out = np.full((n_ranks, width), _HIDDEN, np.int8)
    for painted in range(n_layers):
        out[shown[painted]] = painted
    return out


class _Pixels(Artist):
    """An RGBA image (rows top to bottom) put on the canvas pixel for pixel, its lower left corner at ``(x, y)``
    pixels: no resampling (``imshow`` and ``figimage`` resample through floating point, 25% of the drawing).
    Under the axes' spines and ticks (zorder 1, as the bars it replaces); for a canvas at the figure's own dpi."""

    def __init__(self, rgba: np.ndarray, x: int, y: int) -> None:
        super().__init__()
        self._rgba, self._x, self._y = rgba, x, y
        self.set_zorder(1)

    def draw(self, renderer: RendererBase) -> None:
        if self.get_visible():
            gc = renderer.new_gc()
            renderer.draw_image(gc, self._x, self._y, self._rgba[::-1])  # Agg's rows run bottom to top
            gc.restore()


def bar_rows(n_ranks: int, height: int, bar: float = BAR_HEIGHT) -> np.ndarray:
    """The rank whose bar each pixel row shows, top to bottom, -1 between bars: ``height`` rows span ranks
    ``-0.5 .. n_ranks - 0.5`` and a rank's bar is ``bar`` rows high around it (a row is in it if its middle is).

    >>> bar_rows(2, 10).tolist()
    [-1, 0, 0, 0, -1, -1, 1, 1, 1, -1]
    """
    y = -0.5 + (np.arange(height) + 0.5) * (n_ranks / height)
    rank = np.floor(y + 0.5)
    return np.where(np.abs(y - rank) < bar / 2, rank, -1).astype(np.int64)


class GanttLayout(NamedTuple):
    """Where the Gantt chart's parts go, in whole pixels from the lower left corner of the picture."""

    fig_width: int
    fig_height: int
    left: int  #: the axes box: left edge, bottom edge, width and height
    bottom: int
    width: int
    height: int
    legend_top: int  #: top of the legend


def gantt_layout(n_ranks: int, n_entries: int) -> GanttLayout:
    """The Gantt chart's layout for ``n_ranks`` ranks and ``n_entries`` legend entries: 12 inches wide and
    ``max(2.5, 0.3 * n_ranks + 1.5)`` high at :data:`GANTT_DPI`, the :data:`MARGINS` around the axes.

    16 ranks, 3 entries: 6.3 x 110 = 693 pixels high; at 110 / 72 pixels per point the margins are 69 (45 pt), 31
    (20 pt) and 40 (26 pt) pixels; the legend's top 34 pixels up (14 + 8 pt), the axes 61 (40 pt) above it:

    >>> gantt_layout(16, 3)
    GanttLayout(fig_width=1320, fig_height=693, left=69, bottom=95, width=1220, height=558, legend_top=34)
    """
    px = GANTT_DPI / 72.0
    fig_w, fig_h = round(GANTT_WIDTH * GANTT_DPI), round(max(2.5, 0.3 * n_ranks + 1.5) * GANTT_DPI)
    left, right, top = (round(MARGINS[k] * px) for k in ("left", "right", "top"))
    legend_rows = max(1, -(-n_entries // LEGEND_COLUMNS))
    legend_top = round((legend_rows * MARGINS["legend_row"] + MARGINS["last"]) * px)
    bottom = legend_top + round(MARGINS["bottom"] * px)
    return GanttLayout(fig_w, fig_h, left, bottom, fig_w - left - right, max(fig_h - top - bottom, 1), legend_top)


def timeline_png(events: pd.DataFrame, waits: pd.DataFrame, path: Path, title: str = "") -> None:
    """Write a timeline picture of the run to ``path``, a PNG whatever its suffix (the Gantt chart's bars are
    pixels of that picture)."""
    n_ranks = int(events["rank"].max()) + 1 if len(events) else 0
    if n_ranks <= GANTT_MAX_RANKS:
        _gantt(events, waits, n_ranks, path, title)
    else:
        _heatmap(events, waits, n_ranks, path, title)


def _kinds(events: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Each event's kind as a code (-1: missing) and the names of the codes."""
    kind_col = events["kind"]
    if isinstance(kind_col.dtype, pd.CategoricalDtype):  # its codes: no string per event
        return kind_col.cat.codes.to_numpy(), [str(c) for c in kind_col.cat.categories]
    uniq, inverse = np.unique(kind_col.astype(str).to_numpy(), return_inverse=True)
    return inverse.ravel(), [str(c) for c in uniq]


def _gantt(events: pd.DataFrame, waits: pd.DataFrame, n_ranks: int, path: Path, title: str) -> None:
    kind, labels = _kinds(events)
    # layers, painted in this order: the activity kinds (region rows and other kinds are not drawn), then waits
    layer_of_code = np.array([list(KIND_COLOURS).index(k) if k in KIND_COLOURS else -1 for k in labels] + [-1])
    exit_ = events["exit"].to_numpy()
    t_max = float(np.nanmax(exit_)) if len(events) else 1.0
    t_end = t_max * 1.01 if t_max > 0 else 1.0
    # the legend's entries: the kinds that have events (drawn or not), and waits; the figure's layout depends on them
    present = np.zeros(len(KIND_COLOURS) + 1, bool)
    present[-1] = len(waits) > 0
    width = gantt_layout(n_ranks, 0).width  # the same for any legend
    if n_ranks:
        groups = [Bars(events["rank"].to_numpy(), events["enter"].to_numpy(), exit_, (kind, layer_of_code))]
        if len(waits):
            w_enter = events["enter"].to_numpy()[waits["event"].to_numpy()]
            groups.append(Bars(waits["rank"].to_numpy(), w_enter, w_enter + waits["wait"].to_numpy(),
                               len(KIND_COLOURS)))
        shown = gantt_raster(groups, n_ranks, len(KIND_COLOURS) + 1, t_end, width, present=present)
    handles = [Patch(color=colour, label=k) for (k, colour), there in
               zip([*KIND_COLOURS.items(), ("wait", WAIT_COLOUR)], present, strict=True) if there]
    fig_w, fig_h, left, bottom, width, height, legend_y = gantt_layout(n_ranks, len(handles))
    fig = Figure(figsize=(fig_w / GANTT_DPI, fig_h / GANTT_DPI), dpi=GANTT_DPI)
    ax = fig.add_axes((left / fig_w, bottom / fig_h, width / fig_w, height / fig_h))
    if n_ranks:
        colours = np.round(np.vstack([to_rgba_array([*KIND_COLOURS.values(), WAIT_COLOUR]), np.zeros((1, 4))])
                           * 255).astype(np.uint8)  # the last: clear (no layer shows)
        per_rank = np.vstack([colours[shown].reshape(n_ranks, -1), np.zeros((1, width * 4), np.uint8)])
        ax.add_artist(_Pixels(per_rank[bar_rows(n_ranks, height)].reshape(height, width, 4), left, bottom))
    ax.set_xlim(0.0, t_end)
    ax.set_ylim(n_ranks - 0.5, -0.5)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("rank")
    ax.set_title(title or "timeline", y=1.0)  # where matplotlib puts it (no top axis), without measuring the axes
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=((left + width / 2) / fig_w, legend_y / fig_h),
               ncol=LEGEND_COLUMNS, frameon=False, fontsize=8, borderaxespad=0.0)
    # zlib level 1: about 60% of level 6's time (27 against 44 ms), 33 KB instead of 20 KB for 16 ranks
    fig.savefig(path, format="png", dpi=GANTT_DPI, metadata={"Software": None}, pil_kwargs={"compress_level": 1})


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
    # tight_layout leaves a placeholder layout engine, for which savefig drew the figure once more before drawing it
    fig.set_layout_engine(None)
    # zlib level 1: half of level 6's time (23 against 45 ms), 96 KB instead of 81 KB for 1,024 ranks x 20 steps
    fig.savefig(path, dpi=110, metadata={"Software": None}, pil_kwargs={"compress_level": 1})
