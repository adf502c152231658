"""One-sided MPI captured and replayed (issue 25): waitlab's replay extension runs ``win_create``, ``win_free``,
``win_fence``, ``win_lock`` (exclusive), ``win_unlock``, ``put`` and ``get`` (SimGrid 3.32's TI replay has no RMA
action), so fence and lock programs capture and replay with the program run's waits; post / start / complete /
wait, shared locks and the other one-sided calls are still refused at capture."""

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


#: rma_patterns.c modes with their hand-computed waits above 1 ms (as tests/test_rma.py CASES): mode, A, B,
#: {(rank, pattern): seconds}.  "fence": rank 1 computes A = 0.1 s then puts into rank 0, rank 2 computes
#: B = 0.25 s; at the closing fence rank 0 waits 0.1 s for the put (Early Fence) and 0.15 s more (Wait at Fence),
#: rank 1 0.15 s.  "lock": rank 0 locks rank 2's window for A = 0.2 s, rank 1 asks at B = 0.05 s and waits
#: A - B (Lock Contention); rank 2 waits A in win_free.
CASES = [
    ("fence", 0.1, 0.25, {(0, "rma_early_fence"): 0.1, (0, "rma_wait_at_fence"): 0.15, (1, "rma_wait_at_fence"): 0.15}),
    ("lock", 0.2, 0.05, {(1, "rma_lock_contention"): 0.15, (2, "rma_wait_at_free"): 0.2}),
]  # fmt: skip


@pytest.mark.parametrize(("mode", "a", "b", "hand"), CASES, ids=[c[0] for c in CASES])
def test_one_sided_capture_replays_with_the_program_runs_waits(tmp_path: Path, mode: str, a: float, b: float,
                                                               hand: dict[tuple[int, str], float]) -> None:
    sc = program_scenario(tmp_path, "rma_patterns.c", ranks=3, args=[mode, str(a), str(b)])
    (tmp_path / "s.toml").write_text(sc.to_toml())
    index = capture(sc, tmp_path / "cap")  # its own replay check: end time and every pattern's total within 0.1%
    text = (tmp_path / "cap" / "rank1.txt").read_text()
    if mode == "fence":
        assert "1 win_create 0 512\n1 win_fence 0\n" in text and "1 put 0 0 64\n1 win_fence 0\n1 win_free 0\n" in text
    else:
        assert "1 win_lock 2 0\n1 put 2 0 64\n1 win_unlock 2 0\n" in text
    live = _rank_pattern(api.run(tmp_path / "s.toml").result.waits)
    (tmp_path / "rep.toml").write_text('[scenario]\nname = "rep"\nranks = 3\n[platform]\nname = "dawning_5000a"\n'
                                       f'[application]\nkind = "trace"\ntrace = "{index}"\n')
    rep = _rank_pattern(api.run(tmp_path / "rep.toml").result.waits)
    assert rep.index.tolist() == live.index.tolist()
    np.testing.assert_allclose(rep.to_numpy(), live.to_numpy(), rtol=1e-3, atol=1e-9)
    assert {(int(r), str(p)) for r, p in rep[rep > 1e-3].index} == set(hand)
    for key, w in hand.items():
        assert rep[key] == pytest.approx(w, rel=1e-3)


@pytest.mark.parametrize(("mode", "ranks", "call"), [("late_post", 2, "win_post"),
                                                     ("lock_shared", 3, "win_lock_shared")])
def test_capture_refuses_other_one_sided_calls_naming_the_call(tmp_path: Path, mode: str, ranks: int,
                                                               call: str) -> None:
    sc = program_scenario(tmp_path, "rma_patterns.c", ranks=ranks, args=[mode, "0.001", "0"])
    with pytest.raises(InputError, match=rf"one-sided MPI \({call}\).*runs only win_create, win_free, win_fence"):
        capture(sc, tmp_path / "cap")
    assert not (tmp_path / "cap").exists()
