"""One-sided MPI captured and replayed (issue 25): waitlab's replay extension runs fences, exclusive and shared
locks, post / start / complete / wait, puts and gets with SMPI's own window implementation (SimGrid 3.32's TI
replay has no RMA action), so these programs capture and replay with the program run's waits, and two replays of
one capture are identical to the last bit; the other one-sided calls are refused at capture, naming the record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from program_scenarios import program_scenario

from waitlab import api
from waitlab.errors import InputError
from waitlab.experiments.capture import capture

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None
pytestmark = [pytest.mark.simgrid, pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")]


def _rank_pattern(waits: pd.DataFrame) -> pd.Series:
    return waits.groupby(["rank", "pattern"], observed=True)["wait"].sum()


def _replay_toml(tmp: Path, index: Path, ranks: int, name: str = "rep") -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(f'[scenario]\nname = "{name}"\nranks = {ranks}\n[platform]\nname = "dawning_5000a"\n'
                    f'[application]\nkind = "trace"\ntrace = "{index}"\n')
    return path


#: rma_patterns.c modes with their hand-computed waits above 1 ms (as tests/test_rma.py CASES): mode, ranks, A, B,
#: {(rank, pattern): seconds}, a line the capture must hold (rank 1's file).
#:  "fence": rank 1 computes A = 0.1 s then puts into rank 0, rank 2 computes B = 0.25 s; at the closing fence
#:   rank 0 waits 0.1 s for the put (Early Fence) and 0.15 s more (Wait at Fence), rank 1 0.15 s.
#:  "neighbours": 4 ranks, two fence epochs; rank 2 computes A = 0.2 s, the others B = 0.05 s, every rank puts to
#:   both ring neighbours: at each closing fence every rank but 2 waits A - B = 0.15 s, 0.3 s in all; ranks 1 and 3
#:   (targets of rank 2's puts) as Early Fence, ranks 0 as Wait at Fence.
#:  "lock": rank 0 locks rank 2's window for A = 0.2 s, rank 1 asks at B = 0.05 s and waits A - B (Lock
#:   Contention); rank 2 waits A in win_free.
#:  "lock_shared": as "lock", but rank 1 asks for a shared lock (still A - B: rank 0's is exclusive) and rank 2
#:   for a shared lock on its own window at 2 B = 0.1 s: it waits A - 2 B (Lock Contention).
#:  "lock_all": every rank locks all windows (shared), rank 1 computes A = 0.2 s, the others B = 0.05 s, each puts
#:   to the next rank, flushes it, accumulates into the rank after, flushes all and unlocks all: passive target,
#:   nobody waits for rank 1 before MPI_Win_free, where ranks 0 and 2 wait A - B.
#:  "late_post": rank 1 computes A = 0.2 s then posts; rank 0's win_start waits A (Late Post).
#:  "early_wait": rank 0 starts, computes A = 0.1 s, puts, computes B = 0.05 s, completes; rank 1's win_wait waits
#:   A + B: Early Wait A (before the put), Late Complete B (after it).
CASES = [
    ("fence", 3, 0.1, 0.25, {(0, "rma_early_fence"): 0.1, (0, "rma_wait_at_fence"): 0.15,
                             (1, "rma_wait_at_fence"): 0.15}, "1 put 0 0 64\n1 win_fence 0 0\n1 win_free 0\n"),
    ("neighbours", 4, 0.2, 0.05, {(0, "rma_wait_at_fence"): 0.3, (1, "rma_early_fence"): 0.3,
                                  (3, "rma_early_fence"): 0.3}, "1 win_fence 0 4\n"),
    ("lock", 3, 0.2, 0.05, {(1, "rma_lock_contention"): 0.15, (2, "rma_wait_at_free"): 0.2},
     "1 win_lock 2 0\n1 put 2 0 64\n1 win_unlock 2 0\n"),
    ("lock_shared", 3, 0.2, 0.05, {(1, "rma_lock_contention"): 0.15, (2, "rma_lock_contention"): 0.1},
     "1 win_lock_shared 2 0\n"),
    ("lock_all", 3, 0.2, 0.05, {(0, "rma_wait_at_free"): 0.15, (2, "rma_wait_at_free"): 0.15},
     "1 win_lock_all 0\n"),
    ("late_post", 2, 0.2, 0.0, {(0, "rma_late_post"): 0.2}, "1 win_post 0 0\n1 win_group 0 0\n1 win_wait 0\n"),
    ("early_wait", 2, 0.1, 0.05, {(1, "rma_early_wait"): 0.1, (1, "rma_late_complete"): 0.05},
     "1 win_post 0 0\n1 win_group 0 0\n1 win_wait 0\n"),
]  # fmt: skip


@pytest.mark.parametrize(("mode", "ranks", "a", "b", "hand", "line"), CASES, ids=[c[0] for c in CASES])
def test_one_sided_capture_replays_with_the_program_runs_waits(tmp_path: Path, mode: str, ranks: int, a: float,
                                                               b: float, hand: dict[tuple[int, str], float],
                                                               line: str) -> None:
    sc = program_scenario(tmp_path, "rma_patterns.c", ranks=ranks, args=[mode, str(a), str(b)])
    (tmp_path / "s.toml").write_text(sc.to_toml())
    index = capture(sc, tmp_path / "cap")  # its own replay check: end time and every pattern's total within 0.1%
    assert line in (tmp_path / "cap" / "rank1.txt").read_text()
    live = _rank_pattern(api.run(tmp_path / "s.toml").result.waits)
    rep = _rank_pattern(api.run(_replay_toml(tmp_path, index, ranks)).result.waits)
    assert rep.index.tolist() == live.index.tolist()
    np.testing.assert_allclose(rep.to_numpy(), live.to_numpy(), rtol=1e-3, atol=1e-9)
    assert {(int(r), str(p)) for r, p in rep[rep > 1e-3].index} == set(hand)
    for key, w in hand.items():
        assert rep[key] == pytest.approx(w, rel=1e-3)


@pytest.mark.parametrize("mode", ["neighbours", "early_wait"])
def test_two_replays_of_a_one_sided_capture_are_identical(tmp_path: Path, mode: str) -> None:
    """SMPI's MPI_Win_* functions book the host CPU time since the rank's last MPI call; the replay calls SMPI's
    window implementation instead, so no host time enters and the figures repeat to the last bit."""
    ranks = 4 if mode == "neighbours" else 2
    sc = program_scenario(tmp_path, "rma_patterns.c", ranks=ranks, args=[mode, "0.2", "0.05"])
    index = capture(sc, tmp_path / "cap", check=False)
    runs = [api.run(_replay_toml(tmp_path, index, ranks, f"rep{k}")).result for k in range(2)]
    for table in ("events", "waits"):
        first, second = (getattr(r, table) for r in runs)
        assert pd.util.hash_pandas_object(first).to_numpy().tobytes() == \
            pd.util.hash_pandas_object(second).to_numpy().tobytes(), table


@pytest.mark.parametrize(("mode", "ranks", "message"), [
    ("fetch", 2, r"rank 0 operation \d+ is one-sided MPI \(get_accumulate\) and waitlab's replay runs only"),
])
def test_capture_refuses_what_the_replay_cannot_run_naming_the_record(tmp_path: Path, mode: str, ranks: int,
                                                                      message: str) -> None:
    sc = program_scenario(tmp_path, "rma_patterns.c", ranks=ranks, args=[mode, "0.001", "0"])
    with pytest.raises(InputError, match=message):
        capture(sc, tmp_path / "cap")
    assert not (tmp_path / "cap").exists()


def test_capture_refuses_a_one_sided_program_under_the_mvapich2_protocol(tmp_path: Path) -> None:
    sc = program_scenario(tmp_path, "rma_patterns.c", ranks=3, platform="sunway_taihulight",
                          args=["fence", "0.001", "0.002"])
    with pytest.raises(InputError, match=r"platform\.mpi\.rma_protocol.*'mvapich2'.*rma_protocol = \"smpi\""):
        capture(sc, tmp_path / "cap")
    assert not (tmp_path / "cap").exists()


def test_a_fortran_one_sided_program_captures_and_replays(tmp_path: Path) -> None:
    """rma_fence_lock.f90 (the Fortran bindings): its capture's own replay check holds every pattern's total within
    0.1% of the program run, and both match its hand computation (the program's header)."""
    index = capture(program_scenario(tmp_path, "rma_fence_lock.f90", ranks=3), tmp_path / "cap")
    check = json.loads((index.parent / "capture.json").read_text())["replay_check"]
    assert check["replay"] == pytest.approx(check["live"], rel=1e-3, abs=1e-9)
    hand = {"wait rma_early_fence": 0.1, "wait rma_wait_at_fence": 0.15 + 0.15, "wait rma_lock_contention": 0.15}
    for key, w in hand.items():
        assert check["replay"][key] == pytest.approx(w, rel=1e-3)
