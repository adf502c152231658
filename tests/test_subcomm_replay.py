"""Sub-communicator collectives outside a program run (issue 25): the OTF2 export keeps them, and a capture and
an OTF2 import replay them (SimGrid 3.32's trace replay runs every collective on MPI_COMM_WORLD; waitlab's replay
extension runs a collective whose TI line ends with ``comm=<members>`` on that communicator), with the program
run's waits."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from program_scenarios import program_scenario

from waitlab import api
from waitlab.experiments.capture import capture

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None
HAVE_OTF2 = shutil.which("otf2-print") is not None
pytestmark = [pytest.mark.simgrid,
              pytest.mark.skipif(not (HAVE_SMPI and HAVE_OTF2), reason="SMPI / OTF2 tools missing")]


def _split_run(tmp_path: Path) -> Path:
    """features.c "split": rows {0, 1} and {2, 3} (reversed inside a row), a barrier and an allreduce on each."""
    sc = program_scenario(tmp_path, "features.c", ranks=4, args=["split"])
    (tmp_path / "split.toml").write_text(sc.to_toml())
    api.run(tmp_path / "split.toml", tmp_path / "run")
    api.export(tmp_path / "run", ("otf2",))
    return tmp_path / "run" / "otf2" / "traces.otf2"


def test_export_writes_sub_communicators_with_their_members(tmp_path: Path) -> None:
    anchor = _split_run(tmp_path)
    defs = subprocess.run(["otf2-print", "-G", str(anchor)], capture_output=True, text=True, check=True).stdout
    comms = [ln for ln in defs.splitlines() if ln.startswith("COMM ")]
    assert len(comms) == 3 and sum('Parent: "MPI_COMM_WORLD"' in ln for ln in comms) == 2
    groups = {ln.split('Name: "')[1].split('"')[0]: ln for ln in defs.splitlines() if ln.startswith("GROUP ")}
    # members in communicator-rank order (key -rank): world ranks 1, 0 and 3, 2
    assert "2 Members: 1 (" in groups["comm 1"] and "2 Members: 3 (" in groups["comm 2"]
    events = subprocess.run(["otf2-print", str(anchor)], capture_output=True, text=True, check=True).stdout
    ends = [ln for ln in events.splitlines() if ln.startswith("MPI_COLLECTIVE_END")]
    assert len(ends) == 12 and all('"comm 1"' in ln or '"comm 2"' in ln for ln in ends)


def test_round_trip_of_a_program_with_sub_communicators(tmp_path: Path) -> None:
    anchor = _split_run(tmp_path)
    (tmp_path / "imp.toml").write_text('[scenario]\nname = "imp"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                                       f'[application]\nkind = "otf2"\ntrace = "{anchor}"\n')
    first = api.load_run(tmp_path / "run")
    second = api.run(tmp_path / "imp.toml").result
    a = first.waits.groupby(["rank", "pattern"], observed=True)["wait"].sum()
    b = second.waits.groupby(["rank", "pattern"], observed=True)["wait"].sum()
    assert b.index.tolist() == a.index.tolist()
    # 0.1%, or 1 ns (the export's clock tick: a wait of 0.65 us on the duplicate's barrier moves by a rounding)
    np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=1e-3, atol=1e-9)
    assert (a > 1e-3).sum() == 4  # the four waits of the hand computation (capture test below)


def _rank_pattern(waits: pd.DataFrame) -> pd.Series:
    return waits.groupby(["rank", "pattern"], observed=True)["wait"].sum()


def test_capture_of_a_comm_split_barrier_replays_with_the_same_waits(tmp_path: Path) -> None:
    """features.c "split" captured through the layer replays (waitlab's replay runs the row barriers and
    allreduces on their communicators) with the program run's per-(rank, pattern) waits; both match the hand
    computation: row {0, 1} computes 0.1 / 0.3 s before its barrier (rank 0 waits 0.2 s), row {2, 3} 0.2 / 0.5 s
    (rank 2 waits 0.3 s); then 0.4 / 0 s and 0 / 0.1 s before the allreduce (ranks 1 and 2 wait 0.4 and 0.1 s)."""
    sc = program_scenario(tmp_path, "features.c", ranks=4, args=["split"])
    (tmp_path / "split.toml").write_text(sc.to_toml())
    index = capture(sc, tmp_path / "cap")
    lines = "".join(p.read_text() for p in sorted((tmp_path / "cap").glob("rank*.txt")))
    assert "barrier comm=1,0" in lines and "barrier comm=3,2" in lines and "allreduce 8 0.0 comm=1,0" in lines
    live = _rank_pattern(api.run(tmp_path / "split.toml").result.waits)
    (tmp_path / "rep.toml").write_text('[scenario]\nname = "rep"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                                       f'[application]\nkind = "trace"\ntrace = "{index}"\n')
    first = api.run(tmp_path / "rep.toml").result
    again = api.run(tmp_path / "rep.toml").result  # deterministic: no host time enters the replay
    pd.testing.assert_frame_equal(again.events, first.events)
    rep = _rank_pattern(first.waits)
    big_live, big_rep = live[live > 1e-3], rep[rep > 1e-3]
    assert big_rep.index.tolist() == big_live.index.tolist()
    np.testing.assert_allclose(big_rep.to_numpy(), big_live.to_numpy(), rtol=1e-3)
    hand = {(0, "wait_at_barrier"): 0.2, (2, "wait_at_barrier"): 0.3, (1, "wait_at_nxn"): 0.4, (2, "wait_at_nxn"): 0.1}
    assert {(int(r), str(p)) for r, p in big_rep.index} == set(hand)
    for (r, p), w in hand.items():
        assert rep[(r, p)] == pytest.approx(w, rel=1e-3)
    # small waits (the barrier on the duplicate, microseconds) agree to a microsecond
    np.testing.assert_allclose(rep.reindex(live.index, fill_value=0.0).to_numpy(), live.to_numpy(), atol=1e-6)
