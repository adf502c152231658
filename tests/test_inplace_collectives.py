"""Collectives called with ``MPI_IN_PLACE`` record the bytes MPI moves, and their captures replay.

With ``MPI_IN_PLACE`` MPI ignores the count and datatype that go with that buffer (a program may pass 0 and
``MPI_DATATYPE_NULL``): a rank's own block is in the other buffer.  The measurement layer recorded the ignored count,
so ``MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g, 3, MPI_DOUBLE, ...)`` sent 0 bytes on every rank, and
``waitlab capture`` refused the trace ("sends 0 bytes to each rank but receives 24").  Now every record holds what the
same call without ``MPI_IN_PLACE`` would (native/waitlab_pmpi_coll.c, "MPI_IN_PLACE").

``programs/inplace_collectives.c`` (and its Fortran twin), 4 ranks on ``dawning_5000a``.  Hand values, with the
event table's byte rules (models/byte_accounting.py: a collective's messages, the rank's block to itself included;
N = 4, doubles of 8 bytes, ints of 4):

* ``allgather`` mode.  ``MPI_Allgather`` of 3 doubles: every rank sends 3 x 8 = 24 bytes to each rank, N x 24 = 96
  sent and 96 received.  ``MPI_Allgatherv`` with counts {1, 2, 3, 4}: rank r sends its c[r] x 8 bytes to each rank,
  N x 8 c[r] = 32, 64, 96, 128 sent; every rank receives (1+2+3+4) x 8 = 80.  Rank 2 computes 0.1 s before the
  allgather (all others enter at 0): ranks 0, 1, 3 wait 0.1 s at NxN for rank 2.  Rank 1 computes 0.1 s before the
  allgatherv (the others enter when the allgather ends): ranks 0, 2, 3 wait 0.1 s for rank 1 (a few microseconds
  less where a rank left the allgather later).  Total wait at NxN 0.6 s.
* ``others`` mode (every other collective with MPI_IN_PLACE; bytes only):
  gather (root 1, 2 ints): every rank sends 8 bytes, the root's block to itself included; the root receives 4 x 8 = 32.
  gatherv (root 1, counts {1, 2, 3, 4} ints): rank r sends 4 (r+1) = 4, 8, 12, 16 bytes; the root receives 40.
  scatter (root 2, 2 ints): the root sends 4 x 8 = 32; every rank receives 8, the root its own block.
  scatterv (root 2, counts {4, 3, 2, 1} ints): the root sends 40; rank r receives 16, 12, 8, 4.
  alltoall (2 ints): 4 x 8 = 32 sent and received.  alltoallv (ranks i and j exchange 1 + i + j ints): rank i sends
  and receives 4 (10 + 4 i) = 40, 56, 72, 88.  iallgather (2 doubles): 4 x 16 = 64 each way.  The reductions keep
  their count with MPI_IN_PLACE (unchanged): reduce (root 0, 3 doubles) 24 sent each, root receives 96; allreduce
  96/96; scan of 1 double (N - r) x 8 sent, (r + 1) x 8 received; exscan (N - r - 1) x 8 and r x 8; reduce_scatter
  (1 double per rank) 32/32.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from program_scenarios import needs_smpi, program_scenario
from test_programs_mpi import TOL, capture_and_replay, waits_by_rank

from waitlab.experiments.pipeline import simulate

LATE = 0.1  # smpi_execute_benched of the late rank before each collective of the allgather mode

#: (bytes, recv_bytes) per rank 0..3 of each operation, computed by hand (module docstring).
ALLGATHER_BYTES = {
    "allgather": ([96, 96, 96, 96], [96, 96, 96, 96]),
    "allgatherv": ([32, 64, 96, 128], [80, 80, 80, 80]),
}
OTHERS_BYTES = {
    "gather": ([8, 8, 8, 8], [0, 32, 0, 0]),
    "gatherv": ([4, 8, 12, 16], [0, 40, 0, 0]),
    "scatter": ([0, 0, 32, 0], [8, 8, 8, 8]),
    "scatterv": ([0, 0, 40, 0], [16, 12, 8, 4]),
    "alltoall": ([32, 32, 32, 32], [32, 32, 32, 32]),
    "alltoallv": ([40, 56, 72, 88], [40, 56, 72, 88]),
    "allgather": ([64, 64, 64, 64], [64, 64, 64, 64]),  # the MPI_Iallgather, recorded at its MPI_Wait
    "reduce": ([24, 24, 24, 24], [96, 0, 0, 0]),
    "allreduce": ([96, 96, 96, 96], [96, 96, 96, 96]),
    "scan": ([32, 24, 16, 8], [8, 16, 24, 32]),
    "exscan": ([24, 16, 8, 0], [0, 8, 16, 24]),
    "reducescatter": ([32, 32, 32, 32], [32, 32, 32, 32]),
}
#: The Fortran twin's others mode: the collectives every rank calls with MPI_IN_PLACE.
FORTRAN_OTHERS = ("alltoall", "alltoallv", "allgather")

#: Wait at NxN of each rank, by hand: rank 2 late at the allgather, rank 1 at the allgatherv.
ALLGATHER_WAITS = {
    "allgather": {r: ("wait_at_nxn", pytest.approx(LATE, abs=TOL), 2) for r in (0, 1, 3)},
    "allgatherv": {r: ("wait_at_nxn", pytest.approx(LATE, abs=TOL), 1) for r in (0, 2, 3)},
}


def run(tmp: Path, mode: str, source: str = "inplace_collectives.c") -> tuple[Any, Any]:
    tmp.mkdir(parents=True, exist_ok=True)
    sc = program_scenario(tmp, source, ranks=4, args=[mode])
    return sc, simulate(sc)


def bytes_by_op(res: Any) -> dict[str, tuple[list[int], list[int]]]:
    """(bytes, recv_bytes) of ranks 0..3 for each MPI operation of the run (one call of each per rank)."""
    ev = res.events[res.events["kind"] == "mpi"]
    out = {}
    for op, g in ev.groupby(ev["op"].astype(str)):
        g = g.sort_values("rank")
        assert g["rank"].tolist() == [0, 1, 2, 3], op
        out[op] = (g["bytes"].astype(int).tolist(), g["recv_bytes"].astype(int).tolist())
    return out


def needs_fortran() -> None:
    if shutil.which("smpif90") is None or shutil.which("gfortran") is None:
        pytest.skip("smpif90/gfortran not installed")


@pytest.mark.simgrid
@needs_smpi
def test_allgather_and_allgatherv_in_place_send_their_own_blocks_and_capture(tmp_path: Path) -> None:
    sc, res = run(tmp_path, "allgather")
    assert bytes_by_op(res) == ALLGATHER_BYTES  # was 0 sent on every rank
    for op, expected in ALLGATHER_WAITS.items():
        assert waits_by_rank(res, op) == expected
    assert float(res.waits["wait"].sum()) == pytest.approx(6 * LATE, abs=TOL)
    # the capture keeps the trace (its count check refused "sends 0 bytes ... but receives 24") and replays the waits
    rep = capture_and_replay(sc, tmp_path)
    for op, expected in ALLGATHER_WAITS.items():
        assert waits_by_rank(rep, op) == expected
    for r, c in enumerate((1, 2, 3, 4)):
        lines = (tmp_path / "cap" / f"rank{r}.txt").read_text().splitlines()
        assert f"{r} allgather 24 24" in lines  # 3 doubles sent to and received from each rank
        assert f"{r} allgatherv {8 * c} 8 16 24 32 6 6" in lines  # its own block; every rank's, in bytes


@pytest.mark.simgrid
@needs_smpi
def test_every_other_in_place_collective_records_what_mpi_moves_and_captures(tmp_path: Path) -> None:
    sc, res = run(tmp_path, "others")
    assert bytes_by_op(res) == OTHERS_BYTES
    rep = capture_and_replay(sc, tmp_path)  # the count checks pass; the replay's makespan is the run's
    replayed = bytes_by_op(rep)
    assert replayed.pop("iallgather") == ([0] * 4, [0] * 4)  # the replay's post: its bytes are at the completion
    assert replayed == OTHERS_BYTES
    root_lines = {1: ["1 gather 8 8 1", "1 gatherv 8 4 8 12 16 1 6 6"],
                  2: ["2 scatter 8 8 2", "2 scatterv 16 12 8 4 8 2 6 6"]}
    for r, expected in root_lines.items():
        lines = (tmp_path / "cap" / f"rank{r}.txt").read_text().splitlines()
        assert all(e in lines for e in expected), (r, expected)


@pytest.mark.simgrid
@needs_smpi
def test_fortran_in_place_collectives_record_the_same(tmp_path: Path) -> None:
    needs_fortran()
    _sc, res = run(tmp_path / "allgather", "allgather", "inplace_collectives.f90")
    assert bytes_by_op(res) == ALLGATHER_BYTES
    for op, expected in ALLGATHER_WAITS.items():
        assert waits_by_rank(res, op) == expected
    _sc, res = run(tmp_path / "others", "others", "inplace_collectives.f90")
    assert bytes_by_op(res) == {op: OTHERS_BYTES[op] for op in FORTRAN_OTHERS}
