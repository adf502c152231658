"""Captures keep the placement they ran on (issue 25): 16 ranks captured on 4 nodes replay on 4 nodes."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from program_scenarios import program_scenario

from waitlab.experiments.capture import capture, trace_scenario_text
from waitlab.experiments.pipeline import prepare, simulate
from waitlab.experiments.scenario import from_mapping

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")
def test_sixteen_ranks_on_four_nodes_replay_on_four_nodes(tmp_path: Path) -> None:

    sc = program_scenario(tmp_path, "bsp.c", ranks=16, args=["2"])
    sc = from_mapping({**sc.resolved(), "platform": {"name": "dawning_5000a", "ranks_per_node": 4}},
                      str(tmp_path / "scenario.toml"))
    index = capture(sc, tmp_path / "cap")
    meta = json.loads((tmp_path / "cap" / "capture.json").read_text())
    assert meta["placement"]["nodes"] == 4 and meta["placement"]["ranks_per_node"] == 4
    assert meta["placement"]["node_of_rank"] == [r // 4 for r in range(16)]
    text = trace_scenario_text(index, sc)
    replay_sc = from_mapping(tomllib.loads(text), str(tmp_path / "replay.toml"))
    assert replay_sc.platform.ranks_per_node == 4
    platform = prepare(replay_sc).platform
    assert platform.n_nodes == 4 and list(platform.node_of_rank) == meta["placement"]["node_of_rank"]
    rep = simulate(replay_sc)
    live = meta["replay_check"]["live"]
    assert float(rep.events["exit"].max()) == pytest.approx(live["makespan"], rel=1e-3)
    for pattern, total in rep.waits.groupby("pattern", observed=True)["wait"].sum().items():
        assert total == pytest.approx(live[f"wait {pattern}"], rel=1e-3, abs=1e-9)
    # on one node (what the printed scenario gave before) the same trace waits differently
    one = from_mapping({**tomllib.loads(text), "platform": {"name": "dawning_5000a"}}, str(tmp_path / "one.toml"))
    assert prepare(one).platform.n_nodes == 1
