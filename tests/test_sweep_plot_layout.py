"""Issue 44: `waitlab plot` stays readable with three swept keys: facets, a legend outside the panels, log scale."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from waitlab import cli
from waitlab.errors import InputError
from waitlab.experiments.report.sweep_plots import sweep_figure

ALGS = ("default", "ompi", "mpich", "basic_linear", "bruck", "pair", "ring", "rdb", "2dmesh")


def three_keys() -> pd.DataFrame:
    """The planner's grid of issue 44 (9 algorithms x 2 sizes x 1/2 switches) with made-up times; rdb is 60x the
    rest, as recursive doubling was in the planner's sweep."""
    rows = []
    for a in ALGS:
        for b in (4096, 65536):
            for s in (1, 2):
                t = (1.5 if a == "rdb" else 0.02 + 0.001 * ALGS.index(a)) * b / 4096 * (1 + 0.05 * (s - 1))
                rows.append({"simulation.alltoall": a, "application.bytes_per_peer": b, "platform.supernodes": s,
                             "scenario_hash": f"{a}{b}{s}", "makespan": 0.06 + 3 * t, "alltoall_time": t,
                             "wait_states": 96})
    return pd.DataFrame(rows)


KEYS = ["simulation.alltoall", "application.bytes_per_peer", "platform.supernodes"]


def drawn(fig):
    FigureCanvasAgg(fig).draw()
    return fig.canvas.get_renderer()


def test_three_key_grid_facets_and_keeps_the_legend_off_the_panels():
    fig = sweep_figure(three_keys(), KEYS, ["makespan", "alltoall_time", "wait_states"])
    r = drawn(fig)
    axes = fig.axes
    assert len(axes) == 3 * 2  # rows = results, columns = the facet key's two values
    # defaults: x = the key with the most values, facet = the remaining key with the fewest (first on a tie)
    assert axes[-1].get_xlabel() == "simulation.alltoall"
    assert [ax.get_title() for ax in axes[:2]] == ["application.bytes_per_peer = 4096",
                                                  "application.bytes_per_peer = 65536"]
    assert len(fig.legends) == 1
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["1", "2"]
    assert legend.get_title().get_text() == "platform.supernodes"
    box = legend.get_window_extent(r)
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 + 1 and box.y0 >= fig.bbox.y0 - 1
    for ax in axes:  # tick labels, axis labels and titles included
        assert not box.overlaps(ax.get_tightbbox(r)), ax.get_title() or ax.get_ylabel()
    # the nine category names under the bottom panels do not run into each other
    for ax in axes[-2:]:
        labels = [t.get_window_extent(r) for t in ax.get_xticklabels() if t.get_text()]
        assert len(labels) == len(ALGS)
        assert not any(a.overlaps(b) for i, a in enumerate(labels) for b in labels[i + 1:])
    # panels of one result do not overlap each other either
    for i, a in enumerate(axes):
        for b in axes[i + 1:]:
            assert not a.get_window_extent(r).overlaps(b.get_window_extent(r))
    # rows spanning more than a decade (rdb) are on a log scale, the flat one is not
    assert [axes[2 * i].get_yscale() for i in range(3)] == ["log", "log", "linear"]


def test_x_facet_and_y_are_chosen_by_name():
    fig = sweep_figure(three_keys(), KEYS, ["alltoall_time"], x="application.bytes_per_peer",
                       facet="platform.supernodes")
    drawn(fig)
    assert len(fig.axes) == 2 and fig.axes[0].get_xlabel() == "application.bytes_per_peer"
    assert list(fig.axes[-1].get_xticks()) == [4096, 65536]  # the swept values, nothing in between
    assert len(fig.legends[0].get_texts()) == len(ALGS)  # one series per algorithm
    # numeric x: lines through the points, one colour per series, the same in both facets
    colours = [[line.get_color() for line in ax.get_lines()] for ax in fig.axes]
    assert colours[0] == colours[1] and len(set(colours[0])) == len(ALGS)
    with pytest.raises(InputError, match="--facet"):
        sweep_figure(three_keys(), KEYS, ["makespan"], x="platform.supernodes", facet="platform.supernodes")
    with pytest.raises(InputError, match="--x"):
        sweep_figure(three_keys(), KEYS, ["makespan"], x="scenario.ranks")


def test_waitlab_plot_takes_x_y_facet(tmp_path: Path, capsys):
    three_keys().to_csv(tmp_path / "sweep.csv", index=False)
    assert cli.main(["plot", str(tmp_path), "--x", "platform.supernodes", "--facet", "simulation.alltoall",
                     "--y", "alltoall_time", "-o", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(["plot", str(tmp_path), "--facet", "nope"]) == 2
    assert "--facet: 'nope' is not a swept key" in capsys.readouterr().err
