"""The numbers docs/diagnosis.md quotes for collectives ("Where the definitions differ"), measured again: waitlab and
Scalasca 2.6 on three 4-rank programs. Zero-count collectives and nonblocking collectives agree pattern by pattern;
a sparse alltoallv is where they differ (waitlab books SMPI's held time, Scalasca ignores every alltoallv). Expected
values by hand from the delays each program injects (smpi_execute_benched)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

import waitlab
from waitlab.experiments.scalasca_check import compare_waits, pattern_totals, scout_run_folder
from waitlab.simulator.scalasca import find_scalasca

PREFIX, REASON = find_scalasca()
pytestmark = [
    pytest.mark.scalasca,
    pytest.mark.simgrid,
    pytest.mark.skipif(PREFIX is None, reason=f"{REASON}; scripts/build_scalasca.sh builds it (make test runs it)"),
    pytest.mark.skipif(importlib.util.find_spec("pycubexr") is None, reason="pycubexr not installed"),
]

ZERO_BYTES = r"""
#include <mpi.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double x[4] = {0}, y[16];
  smpi_execute_benched(0.001 + (rank == 1 ? 0.1 : 0));
  MPI_Bcast(x, 0, MPI_DOUBLE, 1, MPI_COMM_WORLD);              /* root 1 late, no payload */
  smpi_execute_benched(0.001 + (rank == 2 ? 0.1 : 0));
  MPI_Allreduce(x, y, 0, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* no payload */
  smpi_execute_benched(0.001 + (rank == 0 ? 0.1 : 0));
  if (rank == 0) MPI_Send(x, 0, MPI_DOUBLE, 1, 9, MPI_COMM_WORLD);
  if (rank == 1) MPI_Recv(x, 0, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize(); return 0;
}
"""

NONBLOCKING = r"""
#include <mpi.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double x[4] = {1, 2, 3, 4}, y[4]; MPI_Request r;
  smpi_execute_benched(0.001 + (rank == 2 ? 0.2 : 0));
  MPI_Ibarrier(MPI_COMM_WORLD, &r); smpi_execute_benched(0.01); MPI_Wait(&r, MPI_STATUS_IGNORE);
  smpi_execute_benched(0.001 + (rank == 1 ? 0.1 : 0));
  MPI_Iallreduce(x, y, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r); MPI_Wait(&r, MPI_STATUS_IGNORE);
  smpi_execute_benched(0.001 + (rank == 3 ? 0.1 : 0));
  MPI_Ibcast(x, 4, MPI_DOUBLE, 3, MPI_COMM_WORLD, &r); MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Finalize(); return 0;
}
"""

SPARSE_ALLTOALLV = r"""
#include <mpi.h>
int main(int argc, char** argv) {  /* rank r exchanges with r^1 only; rank 3 is 0.2 s late */
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double x[64], y[64]; int sc[8] = {0}, rc[8] = {0}, d[8] = {0};
  sc[rank ^ 1] = 4; rc[rank ^ 1] = 4;
  smpi_execute_benched(0.001 + (rank == 3 ? 0.2 : 0));
  MPI_Alltoallv(x, sc, d, MPI_DOUBLE, y, rc, d, MPI_DOUBLE, MPI_COMM_WORLD);
  MPI_Finalize(); return 0;
}
"""


def _totals(tmp_path: Path, source: str) -> dict[str, tuple[float, float]]:
    """waitlab's and Scalasca's seconds per pattern (Wait at Finalize, which waitlab does not book, left out)."""
    (tmp_path / "p.c").write_text(source)
    (tmp_path / "s.toml").write_text('[scenario]\nname = "p"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                                     '[application]\nkind = "program"\nsources = ["p.c"]\n')
    waitlab.run(tmp_path / "s.toml", tmp_path / "out", png=False)
    cubex = scout_run_folder(tmp_path / "out", timeout=300)
    t = pattern_totals(compare_waits(pd.read_parquet(tmp_path / "out" / "waits.parquet"), cubex))
    return {str(r.pattern): (float(r.waitlab), float(r.scalasca)) for r in t.itertuples()
            if r.pattern != "mpi_finalize_wait" and (r.waitlab > 1e-9 or r.scalasca > 1e-9)}


def test_collectives_without_payload_book_no_wait_in_either_tool(tmp_path: Path) -> None:
    got = _totals(tmp_path, ZERO_BYTES)
    # only the zero-byte message waits: rank 1 receives 0.1 s after it posted (rank 0's 0.1 s of extra work)
    assert set(got) == {"late_sender"}
    assert got["late_sender"][0] == pytest.approx(0.1, abs=1e-4) and got["late_sender"][1] == pytest.approx(
        got["late_sender"][0], rel=1e-6)


def test_nonblocking_collectives_agree(tmp_path: Path) -> None:
    got = _totals(tmp_path, NONBLOCKING)
    # Ibarrier: ranks 0, 1, 3 wait from 0.011 until rank 2 posts at 0.201 (0.19 s each); Iallreduce: rank 1 posts
    # 0.1 s late, the others wait; Ibcast: root 3 posts 0.1 s late, the three others wait
    want = {"wait_at_barrier": 0.57, "wait_at_nxn": 0.29, "late_broadcast": 0.3}
    assert set(got) == set(want)
    for pattern, seconds in want.items():
        assert got[pattern][0] == pytest.approx(seconds, abs=2e-5), pattern
        assert got[pattern][1] == pytest.approx(got[pattern][0], rel=1e-6), pattern


def test_a_sparse_alltoallv_is_where_the_tools_differ(tmp_path: Path) -> None:
    got = _totals(tmp_path, SPARSE_ALLTOALLV)
    # SMPI holds ranks 0, 1 and 2 until rank 3 enters (full overlap): 0.2 s each in waitlab; Scalasca ignores it
    assert got["wait_at_nxn"][0] == pytest.approx(0.6, abs=1e-4) and got["wait_at_nxn"][1] == 0.0
