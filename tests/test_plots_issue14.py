"""Figures of issue 14: sweep plot and wait-propagation graph write real PNGs."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from waitlab import cli
from waitlab.errors import InputError
from waitlab.experiments.report.graph_plots import draw_propagation
from waitlab.experiments.report.sweep_plots import plot_sweep
from waitlab.models.analysis.propagation import propagation_graph
from waitlab.models.analysis.waitstates import make_events, wait_states

PNG = b"\x89PNG\r\n\x1a\n"


def test_plot_sweep_writes_a_png(tmp_path: Path):
    rows = [{"ranks": r, "alltoall": a, "seed": s, "makespan": r * (2 if a == "ring" else 1) + s * 0.1,
             "total_wait": r / 10} for r in (16, 32, 64) for a in ("ring", "bruck") for s in (1, 2)]
    out = plot_sweep(pd.DataFrame(rows), ["ranks", "alltoall"], tmp_path / "sweep.png", ["makespan", "total_wait"])
    assert out.read_bytes()[:8] == PNG and out.stat().st_size > 10_000
    with pytest.raises(InputError, match="nodes"):
        plot_sweep(pd.DataFrame(rows), ["nodes"], tmp_path / "x.png")
    with pytest.raises(InputError, match="nonexist"):
        plot_sweep(pd.DataFrame(rows), ["ranks"], tmp_path / "x.png", ["nonexist"])


def test_draw_propagation_writes_a_png(tmp_path: Path):
    ev = make_events(rank=[0, 0, 1, 1, 1, 2, 2], op=["compute", "send", "compute", "recv", "send", "compute", "recv"],
                     enter=[0, 3, 0, 1, 3, 0, 1], exit=[3, 3, 1, 3, 3, 1, 3], match=[-1, 0, -1, 0, 1, -1, 1],
                     done=[-1, 1, -1, 3, 4, -1, 6], peer=[-1, 1, -1, 0, 2, -1, 1])
    assert draw_propagation(propagation_graph(ev, wait_states(ev)), tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:8] == PNG


def test_draw_propagation_of_a_run_without_waits_draws_nothing(tmp_path: Path):
    # the receive is posted after the send: no wait state, so the graph has no node
    ev = make_events(rank=[0, 1], op=["send", "recv"], enter=[0, 1], exit=[0, 1], match=[0, 0], done=[0, 1],
                     peer=[1, 0])
    graph = propagation_graph(ev, wait_states(ev))
    assert graph.number_of_nodes() == 0
    assert not draw_propagation(graph, tmp_path / "g.png")
    assert not (tmp_path / "g.png").exists()


def test_waitlab_plot_reads_a_sweep_folder(tmp_path: Path, capsys):

    rows = [{"simulation.alltoall": a, "scenario.ranks": r, "scenario_hash": f"h{a}{r}", "makespan": r * 0.1,
             "total_wait": 0.0, "max_rank_wait": 0.0} for a in ("ring", "bruck") for r in (16, 64)]
    pd.DataFrame(rows).to_csv(tmp_path / "sweep.csv", index=False)
    assert cli.main(["plot", str(tmp_path)]) == 0
    assert (tmp_path / "sweep.png").read_bytes()[:8] == PNG
    assert "sweep.png" in capsys.readouterr().out
    assert cli.main(["plot", str(tmp_path / "nope")]) == 2
    assert "not a sweep folder" in capsys.readouterr().err
    run = tmp_path / "a-run"  # a folder that is no sweep: refused without a write into it (not even a probe file)
    run.mkdir()
    os.utime(run, (1e9, 1e9))
    assert cli.main(["plot", str(run)]) == 2 and "not a sweep folder" in capsys.readouterr().err
    assert run.stat().st_mtime == 1e9 and not any(run.iterdir())
