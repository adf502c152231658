"""timeline.png's Gantt chart as a raster (issue 25): hand-worked pixel columns, the same pixels matplotlib draws
from merged polygons (tests/gantt_reference.py, the way main drew it), and the picture written around it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from PIL import Image

from waitlab.experiments.report.palette import KIND_COLOURS, WAIT
from waitlab.experiments.report.plots import (
    BAR_HEIGHT,
    Bars,
    bar_rows,
    gantt_layout,
    gantt_raster,
    timeline_png,
)
from waitlab.models.analysis.waitstates import make_events, wait_states

sys.path.insert(0, str(Path(__file__).parent))
from gantt_reference import draw_layers


def _a(*x: float) -> np.ndarray:
    return np.array(x, float)


#: 10 columns of 1 s each (middles at 0.5, 1.5, ... 9.5 s), two ranks, two layers; worked out by hand:
#: rank 0, layer 0: [0, 3] holds the middles 0.5, 1.5, 2.5.
#:   layer 1: [2.2, 2.4] holds no middle and lies 2.6 s from the next bar of its layer: not drawn;
#:   [5.0, 5.2] and [5.9, 6.6] are 0.7 s apart: one bar [5.0, 6.6], middles 5.5 and 6.5;
#:   [8.0, 8.4] and [9.5, 9.7] are 1.1 s apart: two bars, neither holds a middle (9.5 is not after 9.5).
#: rank 1, layer 0: [1.0, 8.5] holds 1.5 ... 8.5 (a bar ending on a middle holds it); layer 1: [3.4, 3.6] holds 3.5,
#:   over layer 0; [4.8, 4.8] has no length and lies 1.2 s from it.
HAND = [Bars(np.array([0, 1]), _a(0.0, 1.0), _a(3.0, 8.5), 0),
        Bars(np.array([0, 0, 0, 0, 0, 1, 1]), _a(2.2, 5.0, 5.9, 8.0, 9.5, 3.4, 4.8),
             _a(2.4, 5.2, 6.6, 8.4, 9.7, 3.6, 4.8), 1)]
HAND_RASTER = [[0, 0, 0, -1, -1, 1, 1, -1, -1, -1],
               [-1, 0, 0, 1, 0, 0, 0, 0, 0, -1]]


@pytest.mark.parametrize("chunk", [1, 2, 3, 1 << 15])
def test_raster_of_hand_worked_bars(chunk: int):
    assert gantt_raster(HAND, 2, 2, 10.0, 10, chunk=chunk).tolist() == HAND_RASTER


def test_raster_scales_time_to_columns_and_clips_at_the_edges():
    # t_end 5 s over 10 columns: 0.5 s each, middles at 0.25, 0.75, ... 4.75 s
    got = gantt_raster([Bars(np.array([0, 0, 0]), _a(-3.0, 2.0, 6.0), _a(0.3, 2.3, 9.0), 0),
                        Bars(np.array([0]), _a(4.6), _a(50.0), 0)], 1, 1, 5.0, 10)
    # [-3, 0.3] holds 0.25 (column 0); [2.0, 2.3] holds 2.25 (column 4); [6, 9] lies beyond; [4.6, 50] holds 4.75
    assert got.tolist() == [[0, -1, -1, -1, 0, -1, -1, -1, -1, 0]]
    # a bar beyond the right edge still closes a gap of at most a column: [4.0, 4.6] s is columns [8, 9.2] (holds
    # 8.5), [5.05, 6] s starts at column 10.1, 0.9 columns later: one bar [8, 12], which holds 9.5 too
    alone = Bars(np.array([0]), _a(4.0), _a(4.6), 0)
    assert gantt_raster([alone], 1, 1, 5.0, 10).tolist() == [[-1] * 8 + [0, -1]]
    beyond = Bars(np.array([0]), _a(5.05), _a(6.0), 0)
    assert gantt_raster([alone, beyond], 1, 1, 5.0, 10).tolist() == [[-1] * 8 + [0, 0]]


def test_raster_layers_from_codes():
    # codes 0 and 1 and a missing value (-1, the last entry of layer_of_code); code 1 is not drawn
    bars = Bars(np.array([0, 0, 0]), _a(0.0, 1.0, 2.0), _a(1.0, 2.0, 3.0), (np.array([0, 1, -1], np.int8),
                                                                             np.array([1, -1, 0])))
    assert gantt_raster([bars], 1, 2, 4.0, 4).tolist() == [[1, -1, 0, -1]]
    assert gantt_raster([bars._replace(layer=-1)], 1, 2, 4.0, 4).tolist() == [[-1, -1, -1, -1]]


def test_bar_rows_by_hand():
    # one rank over 5 rows: middles at -0.4, -0.2, 0, 0.2, 0.4 rank rows; the bar spans -0.3 .. 0.3
    assert bar_rows(1, 5).tolist() == [-1, 0, 0, 0, -1]
    # three ranks over 6 rows, middles -0.25, 0.25, 0.75, 1.25, 1.75, 2.25: within 0.3 of 0, 0, 1, 1, 2, 2
    assert bar_rows(3, 6).tolist() == [0, 0, 1, 1, 2, 2]
    assert BAR_HEIGHT == 0.6


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_raster_is_what_matplotlib_draws_from_merged_polygons(seed: int):
    rng = np.random.default_rng(seed)
    n_ranks, t_end, size, box = 5, 101.0, (1320, 693), (69, 95, 1220, 558)
    colours = ["#ff0000", "#00ff00", "#0000ff"]
    layers = []
    for mean in (0.02, 0.4, 3.0):  # sparse specks, bars about a pixel wide, long bars
        n = int(rng.integers(200, 20_000))
        start = rng.random(n) * 100.0
        layers.append((rng.integers(0, n_ranks, n), start, start + rng.exponential(mean, n) * (rng.random(n) > 0.05)))
    rng.shuffle(layers)
    expected = draw_layers(layers, colours, n_ranks, t_end, box, size)
    shown = gantt_raster([Bars(r, a, b, k) for k, (r, a, b) in enumerate(layers)], n_ranks, 3, t_end, box[2])
    rgb = np.vstack([np.round(np.array([to_rgb(c) for c in colours]) * 255), [[255, 255, 255]]]).astype(np.uint8)
    rows = bar_rows(n_ranks, box[3])
    got = rgb[np.vstack([shown, np.full((1, box[2]), -1)])[rows]]
    assert (expected != 255).any(axis=2).sum() > 20_000  # the reference did draw
    assert np.array_equal(got, expected)


def test_timeline_png_puts_the_raster_in_the_axes_and_is_deterministic(tmp_path: Path):
    # rank 0 computes 0-3 s and sends; rank 1 computes 0-1 s and waits in recv 1-3 s (late sender)
    ev = make_events(rank=[0, 0, 1, 1], op=["compute", "send", "compute", "recv"], enter=[0.0, 3.0, 0.0, 1.0],
                     exit=[3.0, 3.5, 1.0, 3.5], match=[-1, 0, -1, 0], done=[-1, 1, -1, 3], peer=[-1, 1, -1, 0])
    waits = wait_states(ev)
    assert len(waits) == 1
    timeline_png(ev, waits, tmp_path / "a.png", title="two ranks")
    timeline_png(ev, waits, tmp_path / "b.png", title="two ranks")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    image = Image.open(tmp_path / "a.png")
    assert "Software" not in image.info
    pixels = np.asarray(image.convert("RGB"))
    lay = gantt_layout(2, 3)
    assert pixels.shape == (lay.fig_height, lay.fig_width, 3) == (275, 1320, 3)
    top = lay.fig_height - lay.bottom - lay.height
    box = pixels[top:top + lay.height, lay.left:lay.left + lay.width]
    t_end = 3.5 * 1.01
    layer_colours = [*KIND_COLOURS.values(), WAIT]
    # by hand: compute (layer 0) on rank 0 up to 3 s and on rank 1 up to 1 s; MPI (layer 1) on rank 0 from 3 s;
    # wait (the last layer) on rank 1 from 1 to 3 s, over its recv, whose rest (3 to 3.5 s) shows as MPI
    sec = (np.arange(lay.width) + 0.5) * t_end / lay.width  # each column's middle, in seconds
    want = {0: np.where(sec <= 3.0, 0, np.where(sec <= 3.5, 1, -1)),
            1: np.where(sec <= 1.0, 0, np.where(sec <= 3.0, len(KIND_COLOURS), np.where(sec <= 3.5, 1, -1)))}
    rows = bar_rows(2, lay.height)
    rgb = np.round(np.array([to_rgb(c) for c in layer_colours]) * 255).astype(np.uint8)
    inner = slice(2, -2)  # the axes' spines cover the outermost pixels
    for rank in (0, 1):
        mid = np.flatnonzero(rows == rank)[len(np.flatnonzero(rows == rank)) // 2]
        line = box[mid, inner]
        expected = np.where(want[rank][inner, None] >= 0, rgb[np.maximum(want[rank][inner], 0)], 255)
        assert np.array_equal(line, expected), rank
    assert (box[inner][rows[inner] < 0][:, inner] == 255).all()  # between the bars: white
    # the legend below the axes shows compute, MPI and wait, and no other kind
    legend = pixels[lay.fig_height - lay.legend_top:]
    for colour in (KIND_COLOURS["compute"], KIND_COLOURS["mpi"], WAIT):
        assert (legend == np.round(np.array(to_rgb(colour)) * 255)).all(axis=2).sum() > 50, colour
    assert not (legend == np.round(np.array(to_rgb(KIND_COLOURS["noise"])) * 255)).all(axis=2).any()


def test_each_picture_is_drawn_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    draws = []
    draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(1) or draw(self, renderer))
    ev = make_events(rank=[0, 0, 1, 1], op=["compute", "send", "compute", "recv"], enter=[0.0, 3.0, 0.0, 1.0],
                     exit=[3.0, 3.5, 1.0, 3.5], match=[-1, 0, -1, 0], done=[-1, 1, -1, 3], peer=[-1, 1, -1, 0])
    waits = wait_states(ev)
    timeline_png(ev, waits, tmp_path / "gantt.png")
    assert len(draws) == 1  # no layout pass, no drawing before the drawing
    # 71 ranks: the rank x step heatmap (its layout measured, not drawn)
    timeline_png(ev.assign(rank=ev["rank"] * 70), waits.assign(rank=waits["rank"] * 70), tmp_path / "heat.png")
    assert len(draws) == 2
    assert (tmp_path / "heat.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
