"""MPI_Ibarrier + MPI_Wait under a linear imbalance (ATS style), in C and in Fortran: the waits are the hand-counted
barrier waits.

Rank r computes 0.5 r s (``smpi_execute_benched``), then calls ``MPI_Ibarrier`` and ``MPI_Wait``.  A barrier
releases everyone when the last rank (3) enters at 1.5 s, so rank r waits 1.5 - 0.5 r s: 1.5 + 1.0 + 0.5 + 0 =
3.0 s in all.  SMPI 3.32's own Ibarrier let ranks 1 and 2 leave at 0.5 and 1.0 s (1.5 s in all, an impossible
timeline); waitlab's measurement layer gives Ibarrier barrier semantics (a one-byte nonblocking allreduce), and
Fortran's mpi_ibarrier goes through the same path (SMPI's own Fortran binding calls SMPI's Ibarrier).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from bad_inputs_corpus import write
from scenario_files import scenario_toml

import waitlab

pytestmark = pytest.mark.simgrid

PROGRAMS = Path(__file__).parent / "programs"
FORTRAN = pytest.mark.skipif(shutil.which("smpif90") is None or shutil.which("gfortran") is None,
                             reason="smpif90 and gfortran are needed for Fortran programs")


@pytest.mark.parametrize("source", ["ibarrier_imbalance.c", pytest.param("ibarrier_imbalance.f90", marks=FORTRAN)])
def test_ibarrier_waits_are_the_hand_sum(tmp_path: Path, source: str) -> None:
    shutil.copy(PROGRAMS / source, tmp_path / source)
    scenario = scenario_toml("ibarrier", 4, f'kind = "program"\nsources = ["{source}"]', seed=1)
    result = waitlab.run(write(tmp_path / "s.toml", scenario)).result
    ev = result.events[result.events["op"].astype(str) == "barrier"].sort_values("rank")
    assert list(ev["rank"]) == [0, 1, 2, 3]
    last_enter = float(ev["enter"].max())
    assert last_enter == pytest.approx(1.5, abs=1e-4)
    # nobody leaves before the last rank entered (the timeline SMPI 3.32's Ibarrier broke)
    assert (ev["exit"].to_numpy() >= last_enter - 1e-5).all(), ev[["rank", "enter", "exit"]]
    waits = result.waits[result.waits["pattern"] == "wait_at_barrier"].groupby("rank")["wait"].sum()
    expected = {0: 1.5, 1: 1.0, 2: 0.5}  # rank 3 enters last and does not wait
    for rank, w in expected.items():
        assert waits.get(rank, 0.0) == pytest.approx(w, abs=1e-4)
    assert float(np.sum(waits.to_numpy())) == pytest.approx(3.0, rel=1e-3)
