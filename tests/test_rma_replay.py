"""One-sided MPI captured and replayed (issue 25): waitlab's replay extension runs ``win_create``, ``win_free``,
``win_fence``, ``put`` and ``get`` (SimGrid 3.32's TI replay has no RMA action), so a fence + put program
captures and replays with the program run's waits; other one-sided calls are still refused at capture."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_realapps import program_scenario

from waitlab import api
from waitlab.errors import InputError
from waitlab.experiments.capture import capture

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None
pytestmark = [pytest.mark.simgrid, pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")]


def _rank_pattern(waits: pd.DataFrame) -> pd.Series:
    return waits.groupby(["rank", "pattern"], observed=True)["wait"].sum()


def test_fence_and_put_capture_replays_with_the_program_runs_waits(tmp_path: Path) -> None:
    """rma_patterns.c "fence" on 3 ranks, A = 0.1 s, B = 0.25 s: rank 1 computes 0.1 s then puts into rank 0,
    rank 2 computes 0.25 s; the closing fence: rank 0 waits 0.1 s for the put (Early Fence) and 0.15 s more for
    rank 2 (Wait at Fence), rank 1 waits 0.15 s (the hand computation of tests/test_rma.py)."""
    sc = program_scenario(tmp_path, "rma_patterns.c", ranks=3, args=["fence", "0.1", "0.25"])
    (tmp_path / "s.toml").write_text(sc.to_toml())
    index = capture(sc, tmp_path / "cap")  # its own replay check: end time and every pattern's total within 0.1%
    text = (tmp_path / "cap" / "rank1.txt").read_text()
    assert "1 win_create 0 512\n1 win_fence 0\n" in text and "1 put 0 0 64\n1 win_fence 0\n1 win_free 0\n" in text
    live = _rank_pattern(api.run(tmp_path / "s.toml").result.waits)
    (tmp_path / "rep.toml").write_text('[scenario]\nname = "rep"\nranks = 3\n[platform]\nname = "dawning_5000a"\n'
                                       f'[application]\nkind = "trace"\ntrace = "{index}"\n')
    rep = _rank_pattern(api.run(tmp_path / "rep.toml").result.waits)
    assert rep.index.tolist() == live.index.tolist()
    np.testing.assert_allclose(rep.to_numpy(), live.to_numpy(), rtol=1e-3, atol=1e-9)
    hand = {(0, "rma_early_fence"): 0.1, (0, "rma_wait_at_fence"): 0.15, (1, "rma_wait_at_fence"): 0.15}
    assert {(int(r), str(p)) for r, p in rep[rep > 1e-3].index} == set(hand)
    for key, w in hand.items():
        assert rep[key] == pytest.approx(w, rel=1e-3)


def test_capture_refuses_locks_naming_the_call(tmp_path: Path) -> None:
    sc = program_scenario(tmp_path, "rma_patterns.c", ranks=3, args=["lock", "0.2", "0.05"])
    with pytest.raises(InputError, match=r"one-sided MPI \(win_lock\).*runs only win_create, win_free, win_fence"):
        capture(sc, tmp_path / "cap")
    assert not (tmp_path / "cap").exists()
