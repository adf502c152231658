"""One palette for every figure (issue 26): distinct hues where the issue found look-alikes, one colour per
model (ground truth the same green in every panel), distinct sweep series and no lines between categories."""

from __future__ import annotations

import colorsys
import re
from pathlib import Path

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd

from waitlab.experiments.report import diagnosis_plots, palette
from waitlab.experiments.report.canvas import subplots
from waitlab.experiments.report.sweep_plots import sweep_figure

ROOT = Path(__file__).resolve().parents[1]


def _hls(c: str) -> tuple[float, float, float]:
    return colorsys.rgb_to_hls(*mcolors.to_rgb(c))


def _hue_gap(a: str, b: str) -> float:
    d = abs(_hls(a)[0] - _hls(b)[0]) * 360
    return min(d, 360 - d)


def test_look_alikes_of_the_issue_are_apart():
    p = palette.PATTERN_COLOURS
    assert _hue_gap(p["late_sender"], p["wait_at_nxn"]) >= 25  # were two shades of one red
    k = palette.KIND_COLOURS
    noise, delay = _hls(k["noise"]), _hls(k["delay"])
    assert _hue_gap(k["noise"], k["delay"]) >= 60 or abs(noise[1] - delay[1]) >= 0.15
    assert abs(noise[2] - delay[2]) >= 0.2 or _hue_gap(k["noise"], k["delay"]) >= 60  # not two greys


def test_colours_are_unique_within_each_meaning():
    for table in (palette.PATTERN_COLOURS, {k: v for k, v in palette.KIND_COLOURS.items() if k != "sleep"}):
        assert len(set(table.values())) == len(table)
    models = {palette.MODEL_COLOURS[k] for k in ("cwpdm", "hcwpdm", "hcwpdm_each", "ground_truth")}
    assert len(models) == 4
    assert not models & set(palette.SERIES)  # a model's colour never means a region or a sweep line


def test_no_colour_literal_outside_the_palette():
    hexcol = re.compile(r"[\"']#[0-9a-fA-F]{6}[\"']")
    offenders = []
    for f in [*(ROOT / "experiments").rglob("*.py"), ROOT / "docs" / "figures.py"]:
        if f.name == "palette.py":
            continue
        offenders += [f"{f.relative_to(ROOT)}:{i}" for i, line in enumerate(f.read_text().splitlines(), 1)
                      if hexcol.search(line)]
    assert offenders == []


def test_ground_truth_has_one_colour_in_both_blame_panels():
    _fig, (a1, a2) = subplots(1, 2, figsize=(6, 3))
    s = pd.Series({"solve": 2.0, "halo": 1.0})
    diagnosis_plots._bars(a1, {"CWP-DM": s, "H-CWP-DM (each)": s, "ground truth": s}, "left")
    diagnosis_plots._bars(a2, {"H-CWP-DM (earliest)": s, "ground truth": s}, "right")
    truth = mcolors.to_hex(palette.TRUTH)
    for ax in (a1, a2):
        colours = {c.get_label(): mcolors.to_hex(c.patches[0].get_facecolor()) for c in ax.containers}
        assert colours["ground truth"] == truth
    left = {c.get_label(): mcolors.to_hex(c.patches[0].get_facecolor()) for c in a1.containers}
    assert left["CWP-DM"] == palette.MODEL_COLOURS["cwpdm"] and len(set(left.values())) == 3


def test_sweep_series_have_distinct_colours_and_categories_are_not_joined():
    rows = [{"ranks": r, "alltoall": a, "noise": n, "makespan": r * (2 if a == "ring" else 1) + n}
            for r in (16, 32, 64) for a in ("ring", "bruck") for n in (0.0, 0.1)]
    keys = ["ranks", "alltoall", "noise"]
    fig = sweep_figure(pd.DataFrame(rows), keys, ["makespan"], x="alltoall", facet="noise")  # series: ranks
    per_panel = [[mcolors.to_hex(line.get_color()) for line in ax.get_lines()] for ax in fig.axes]
    assert per_panel[0] == per_panel[1]  # a series keeps its colour in every panel
    assert len(set(per_panel[0])) == len(per_panel[0]) == 3  # and no two series share one
    legend = [mcolors.to_hex(h.get_color()) for h in fig.legends[0].legend_handles]
    assert legend == per_panel[0]
    cat = fig.axes[0]  # x = alltoall: categorical
    assert cat.get_xlabel() == "alltoall"
    assert all(line.get_linestyle() == "None" for line in cat.get_lines())
    assert np.isfinite([line.get_xdata() for line in cat.get_lines()]).all()
    numeric = sweep_figure(pd.DataFrame(rows), keys, ["makespan"], x="ranks", facet="noise")
    assert all(line.get_linestyle() == "-" for line in numeric.axes[0].get_lines())
