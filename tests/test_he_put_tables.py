"""He et al.'s tables 2 and 3, MPI columns, under the ``mvapich2`` one-sided protocol (issue 12 acceptance).

Issue 12 asks for the MPI columns within 15% of He et al.'s published values at 1 KB and above.  The expected
values are the paper's (``he_put.PAPER_TABLE2``/``PAPER_TABLE3``, copied from its tables 2 and 3); the
simulated ones come from ``he_rma.c`` run under SMPI with the measurement layer's protocol (docs/rma.md).
Two cells are known gaps (docs/sunway.md): they are ``xfail(strict=True)``, so the day they pass this file has
to be updated.
"""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from waitlab.experiments.reproduce import he_put

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None
pytestmark = [pytest.mark.simgrid,
              pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI (smpirun, smpicc) is not installed")]

#: (table, size, column) of the known gaps, with the reason (docs/sunway.md, "Not met").
GAPS = {
    (2, 65536, "MPI passive"): "MVAPICH2's 64 KB lock-put-unlock is 5M + D = 29.44 us; He et al. 37.91 us",
    (2, 1024, "MPI active"): "+15.3%: every packet and the done flag wait for their acknowledgement",
    (3, 65536, "MPI active"): "-30%: without table 2's 64 KB point (faster than the link, out of the calibration since "
                              "issue 22) a 64 KB message runs at the 1 KB-4 MB line's rate, 4.5 GB/s",
    (3, 65536, "MPI passive"): "-29%: the same 64 KB rate as the active column (issue 22)",
}
CELLS = [(t, size, col) for t in (2, 3) for size in he_put.SIZES if size >= 1024
         for col in ("MPI active", "MPI passive")]


@pytest.fixture(scope="module")
def tables() -> dict[int, pd.DataFrame]:
    return {2: he_put.table2(iters=20), 3: he_put.table3(iters=5)}


@pytest.mark.parametrize("cell", [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=GAPS[c]))
                                  if c in GAPS else c for c in CELLS], ids=lambda c: f"T{c[0]}-{c[1]}-{c[2]}")
def test_mpi_cell_within_15_percent(tables: dict[int, pd.DataFrame], cell: tuple[int, int, str]) -> None:
    table, size, column = cell
    df = tables[table]
    row = df[(df["size"] == size) & (df["column"] == column)].iloc[0]
    paper = he_put.PAPER_TABLE2[size] if table == 2 else he_put.PAPER_TABLE3[size]
    index = {"MPI active": 1, "MPI passive": 2} if table == 2 else {"MPI active": 2, "MPI passive": 3}
    assert paper[index[column]] == (row["paper_us"] if table == 2 else row["paper_MBps"])
    assert abs(float(row["error"])) <= 0.15


def test_large_active_puts_stream_at_the_links_rate(tables: dict[int, pd.DataFrame]) -> None:
    # 32 puts of 64 KB, one after another on one queue pair, never faster than the 56 Gb/s link (7,000 MB/s):
    # issued all at once they reached 9,681 MB/s through SMPI's bandwidth factor 1.48 before issue 22 took the
    # 64 KB figure (faster than the link) out of the calibration; every factor is now at most 1
    df = tables[3]
    bw = float(df[(df["size"] == 65536) & (df["column"] == "MPI active")]["simulated_MBps"].iloc[0])
    assert bw < 7000.0
