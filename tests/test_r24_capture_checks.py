"""``waitlab capture --via smpi`` checks its trace against the live run, as a layer capture does (tester t4 of
session 24).  SMPI's tracer writes a sub-communicator's allreduce without the communicator, so its trace replays
the collective on every rank: Wait at NxN 0.8 s where the program waits 0.1 + 0.3 = 0.4 s (by hand, from the
program's compute: tests/programs/subcomm_allreduce.c).  Such a capture was kept with ``replay_check: null``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from program_scenarios import needs_smpi, program_scenario

from waitlab.errors import SimulationError
from waitlab.experiments.capture import capture
from waitlab.experiments.pipeline import simulate


@pytest.mark.simgrid
@needs_smpi
def test_an_smpi_capture_that_replays_other_waits_is_not_kept(tmp_path: Path) -> None:
    sc = program_scenario(tmp_path, "subcomm_allreduce.c", ranks=4)
    live = simulate(sc).waits
    assert live.groupby("rank")["wait"].sum().round(4).to_dict() == {0: 0.1, 1: 0.3}  # by hand
    with pytest.raises(SimulationError, match=r"wait_at_nxn: live 0\.4.* replay 0\.8.*--via layer"):
        capture(sc, tmp_path / "smpi", via="smpi")
    assert not (tmp_path / "smpi").exists() and not list(tmp_path.glob(".smpi*"))
    # the layer's trace keeps the communicator: it replays the run's waits, and says so
    index = capture(sc, tmp_path / "layer")
    check = json.loads((index.parent / "capture.json").read_text())["replay_check"]
    assert abs(check["replay"]["wait wait_at_nxn"] - 0.4) < 1e-3
    # --no-check keeps SMPI's trace as it is (its replay is the user's to judge)
    index = capture(sc, tmp_path / "kept", via="smpi", check=False)
    assert json.loads((index.parent / "capture.json").read_text())["replay_check"] is None
