"""The measurement layer records the MPI calls that wait or complete requests beyond the common ones.

``programs/recording_more.c`` (and its Fortran twin ``recording_more.f90``), 2 ranks on ``dawning_5000a``: rank 0
computes ``smpi_execute_benched(0.2)`` (exactly 0.2 simulated seconds) before it sends or joins the collective, rank 1
enters its call at 0 s.  By hand (DESIGN.md section 5) rank 1 then waits 0.2 s for rank 0: late sender
``min(E_send, X_recv) - E_recv = 0.2 - 0`` in a receive, wait at NxN ``0.2 - 0`` in a reduce-scatter or an alltoall.
Before these fixes every one of those 0.2 s was ``compute`` of rank 1 (Sendrecv_replace, Probe, Iprobe, Testany,
Testsome, failed Test polls, Reduce_scatter_block, Alltoallw) or a ``test`` (Ireduce_scatter).

Polls (docs/real_programs.md, "Polls"): failed ``MPI_Test*``/``MPI_Iprobe`` calls right before the call that completes
or receives what they polled for are that call's wait (its record enters at the first poll); polls followed by
computation are MPI time of their own (a ``test`` row named after the call), and the computation stays computation.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from program_scenarios import needs_smpi, program_scenario
from test_programs_mpi import TOL, capture_and_replay, waits_by_rank

import waitlab
from waitlab.cli import main
from waitlab.errors import SimulationError
from waitlab.experiments.capture import capture
from waitlab.experiments.pipeline import simulate

LATE = 0.2  # rank 0's smpi_execute_benched before it sends


def run(tmp: Path, mode: str, source: str = "recording_more.c") -> Any:
    sc = program_scenario(tmp, source, ranks=2, args=[mode])
    return sc, simulate(sc)


def mpi_rows(res: Any, rank: int) -> Any:
    ev = res.events
    return ev[(ev["rank"] == rank) & (ev["kind"] == "mpi")]


def compute_seconds(res: Any, rank: int) -> float:
    ev = res.events
    c = ev[(ev["rank"] == rank) & (ev["kind"] == "compute")]
    return float((c["exit"] - c["enter"]).sum())


@pytest.mark.simgrid
@needs_smpi
def test_sendrecv_replace_is_recorded_like_sendrecv(tmp_path: Path) -> None:
    sc, res = run(tmp_path, "sendrecv_replace")
    r1 = mpi_rows(res, 1)
    assert r1["op"].astype(str).tolist() == ["isend", "irecv", "waitall"]
    # named MPI_Sendrecv (SMPI runs it as one): the outputs name its operation as the vocabulary's, sendRecv
    assert set(res.events.loc[res.events["kind"] == "mpi", "call"].astype(str)) == {"MPI_Sendrecv"}
    assert r1["bytes"].tolist()[0] == 16 and r1["recv_bytes"].tolist()[1] == 16  # 4 ints each way
    # rank 1 sent at 0 and waits for rank 0's message, sent at 0.2 s; rank 0 finds rank 1's message there
    assert waits_by_rank(res, "sendRecv") == {1: ("late_sender", pytest.approx(LATE, abs=TOL), 0)}
    assert compute_seconds(res, 1) == pytest.approx(0.0, abs=1e-9)
    rep = capture_and_replay(sc, tmp_path)  # isend + irecv + waitall replay as the run did
    assert float(rep.waits["wait"].sum()) == pytest.approx(LATE, abs=TOL)
    (tmp_path / "scenario.toml").write_text(sc.to_toml())
    waitlab.run(tmp_path / "scenario.toml", tmp_path / "run", png=False)
    assert main(["diagnose", str(tmp_path / "run"), "--no-png", "-q"]) == 0
    assert "Wait by operation: MPI_Sendrecv 0.2 s" in (tmp_path / "run" / "diagnosis" / "diagnosis.md").read_text()


@pytest.mark.simgrid
@needs_smpi
@pytest.mark.parametrize("mode", ["probe", "iprobe"])
def test_the_wait_in_a_probe_is_the_following_receive_s(tmp_path: Path, mode: str) -> None:
    # rank 1: MPI_Probe (or an MPI_Iprobe loop) from 0 s until the message is there, then MPI_Recv: one recv row
    # entering when the probe did, its late sender 0.2 s; no computation of rank 1 at all
    _sc, res = run(tmp_path, mode)
    r1 = mpi_rows(res, 1)
    assert r1["op"].astype(str).tolist() == ["recv"]
    assert float(r1["enter"].iloc[0]) == pytest.approx(0.0, abs=1e-6)
    assert float(r1["exit"].iloc[0]) >= LATE
    assert waits_by_rank(res, "recv") == {1: ("late_sender", pytest.approx(LATE, abs=TOL), 0)}
    assert compute_seconds(res, 1) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.simgrid
@needs_smpi
def test_a_probe_followed_by_computation_is_mpi_time_of_its_own(tmp_path: Path) -> None:
    # rank 1: MPI_Probe from 0 s until the message arrives (0.2 s), 0.05 s of computation, MPI_Recv (no wait: the
    # message is there).  The probe is a `test` row (MPI time), not compute; the 0.05 s stay compute.
    _sc, res = run(tmp_path, "probe_compute")
    r1 = mpi_rows(res, 1)
    assert r1["op"].astype(str).tolist() == ["test", "recv"]
    probe = r1.iloc[0]
    assert float(probe["enter"]) == pytest.approx(0.0, abs=1e-6) and float(probe["exit"]) >= LATE
    assert compute_seconds(res, 1) == pytest.approx(0.05, abs=1e-9)
    assert len(res.waits) == 0


@pytest.mark.simgrid
@needs_smpi
@pytest.mark.parametrize(("mode", "ops"), [
    ("test", ["irecv", "wait"]),
    ("testall", ["irecv", "waitall"]),
    # the MPI_Waitall of the request Testany set to MPI_REQUEST_NULL completes nothing: a `test`, not a waitall
    # (which would complete every pending request of the rank in the matching)
    ("testany", ["irecv", "wait", "test"]),
    ("get_status", ["irecv", "wait"]),
])  # fmt: skip
def test_a_polling_loop_is_the_wait_of_the_call_that_completes(tmp_path: Path, mode: str, ops: list[str]) -> None:
    # rank 1 posts MPI_Irecv at 0 s and polls until rank 0's message (sent at 0.2 s) completes it: the completing
    # call's row enters at the first poll, so its late sender is the 0.2 s of polling
    _sc, res = run(tmp_path, mode)
    r1 = mpi_rows(res, 1)
    assert r1["op"].astype(str).tolist() == ops
    irecv, done = r1.iloc[0], r1.iloc[1]
    assert int(irecv["done"]) == int(r1.index[1])  # the irecv is completed by the polling call's row
    assert float(done["enter"]) == pytest.approx(0.0, abs=1e-6) and float(done["exit"]) >= LATE
    assert waits_by_rank(res, ops[1]) == {1: ("late_sender", pytest.approx(LATE, abs=TOL), 0)}
    assert compute_seconds(res, 1) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.simgrid
@needs_smpi
def test_testsome_completes_each_request_it_reports(tmp_path: Path) -> None:
    # two receives (tags 1, 2) polled with MPI_Testsome from 0 s; rank 0 sends both at 0.2 s
    _sc, res = run(tmp_path, "testsome")
    r1 = mpi_rows(res, 1)
    assert r1["op"].astype(str).tolist() == ["irecv", "irecv", "wait", "wait"]
    assert sorted(r1["done"].tolist()[:2]) == r1.index[2:].tolist()  # each receive completed by its own row
    w = res.waits
    assert set(w["rank"]) == {1} and set(w["pattern"].astype(str)) == {"late_sender"}
    assert float(w["wait"].max()) == pytest.approx(LATE, abs=TOL)  # the first completion's polling
    assert float(w["wait"].sum()) == pytest.approx(LATE, abs=TOL)


@pytest.mark.simgrid
@needs_smpi
def test_polls_between_computations_are_mpi_time_and_the_computation_stays_compute(tmp_path: Path) -> None:
    # rank 1: MPI_Irecv, then 0.05 s of computation and an MPI_Test, until the test completes; rank 0 sends at
    # 0.12 s.  Tests at ~0.05 and ~0.10 s fail, the one at ~0.15 s completes: 3 x 0.05 s of compute, two `test`
    # rows (SMPI's sleep in a failed MPI_Test), and the completing test finds the message there: no wait.
    _sc, res = run(tmp_path, "test_compute")
    r1 = mpi_rows(res, 1)
    assert r1["op"].astype(str).tolist() == ["irecv", "test", "test", "wait"]
    assert ((r1["exit"] - r1["enter"]).iloc[1:3] > 0).all()
    # the polls carry no call name: a `call` column in a run without any wait state cannot be written (the empty
    # wait table's `op` column has no type)
    assert "call" not in res.events.columns
    assert compute_seconds(res, 1) == pytest.approx(0.15, abs=1e-9)
    assert int(r1["done"].iloc[0]) == int(r1.index[3])
    assert len(res.waits) == 0
    # every second of rank 1 is compute or MPI: nothing is lost between the rows
    ev = res.events[(res.events["rank"] == 1) & res.events["kind"].isin(["mpi", "compute"])]
    assert float((ev["exit"] - ev["enter"]).sum()) == pytest.approx(float(ev["exit"].max()), abs=1e-9)


@pytest.mark.simgrid
@needs_smpi
def test_a_capture_of_a_busy_polling_loop_is_refused_by_its_self_check(tmp_path: Path) -> None:
    # the replay has no polling: the replayed wait ends when the message arrives (0.2 s), SMPI's polls noticed it
    # at their next test (0.2016 s)
    sc = program_scenario(tmp_path, "recording_more.c", ranks=2, args=["test"])
    with pytest.raises(SimulationError, match=r"replay differs from the live run \(makespan"):
        capture(sc, tmp_path / "cap")


@pytest.mark.simgrid
@needs_smpi
def test_sendrecv_from_proc_null_and_a_barrier_on_comm_self(tmp_path: Path) -> None:
    # rank 1: MPI_Irecv from rank 0, MPI_Sendrecv with MPI_PROC_NULL on both sides, MPI_Barrier(MPI_COMM_SELF),
    # MPI_Waitall of the receive.  The sendrecv completes nothing: a `test` row (a waitall there would complete
    # the pending receive, and its 0.2 s late sender would be lost); the waitall waits 0.2 s.
    _sc, res = run(tmp_path, "proc_null")
    r1 = mpi_rows(res, 1)
    assert r1["op"].astype(str).tolist() == ["irecv", "test", "barrier", "waitall"]
    assert r1["call"].astype(str).tolist()[1] == "MPI_Sendrecv"
    assert int(r1["done"].iloc[0]) == int(r1.index[3])
    assert res.ops.comms == ((0,), (1,))  # MPI_COMM_SELF of each rank: a communicator of one member
    assert waits_by_rank(res, "waitall") == {1: ("late_sender", pytest.approx(LATE, abs=TOL), 0)}
    assert waits_by_rank(res, "barrier") == {}


@pytest.mark.simgrid
@needs_smpi
def test_a_started_ssend_init_request_is_a_synchronous_send(tmp_path: Path) -> None:
    # (already recorded before; checked here) rank 0 starts its MPI_Ssend_init request of 16 bytes at 0 s and waits;
    # rank 1 posts its receive at 0.2 s: the synchronous send waits for it, a late receiver of 0.2 s
    _sc, res = run(tmp_path, "ssend_init")
    assert mpi_rows(res, 0)["op"].astype(str).tolist() == ["issend", "wait"]
    assert waits_by_rank(res, "wait") == {0: ("late_receiver", pytest.approx(LATE, abs=TOL), 1)}


@pytest.mark.simgrid
@needs_smpi
def test_reduce_scatter_block_is_a_reduce_scatter(tmp_path: Path) -> None:
    sc, res = run(tmp_path, "reduce_scatter_block")
    ev = res.events[res.events["op"] == "reducescatter"]
    assert ev["rank"].tolist() == [0, 1] and ev["bytes"].tolist() == [8, 8]  # the reduced vector: 2 x 1 int
    assert waits_by_rank(res, "reducescatter") == {1: ("wait_at_nxn", pytest.approx(LATE, abs=TOL), 0)}
    rep = capture_and_replay(sc, tmp_path)
    assert waits_by_rank(rep, "reducescatter") == {1: ("wait_at_nxn", pytest.approx(LATE, abs=TOL), 0)}


@pytest.mark.simgrid
@needs_smpi
def test_alltoallw_is_an_alltoallv_with_bytes_from_each_peer_s_datatype(tmp_path: Path) -> None:
    # to peer 0 one MPI_INT (4 bytes), to peer 1 one MPI_DOUBLE (8 bytes): every rank sends 12 bytes; rank 0
    # receives 2 x 4 bytes, rank 1 2 x 8 bytes
    sc, res = run(tmp_path, "alltoallw")
    ev = res.events[res.events["op"] == "alltoallv"].sort_values("rank")
    assert ev["bytes"].tolist() == [12, 12] and ev["recv_bytes"].tolist() == [8, 16]
    assert waits_by_rank(res, "alltoallv") == {1: ("wait_at_nxn", pytest.approx(LATE, abs=TOL), 0)}
    rep = capture_and_replay(sc, tmp_path)
    assert waits_by_rank(rep, "alltoallv") == {1: ("wait_at_nxn", pytest.approx(LATE, abs=TOL), 0)}
    # the per-peer counts in the trace: send 12 bytes (4 to rank 0, 8 to itself), receive 16 (8 from each)
    assert "1 alltoallv 12 4 8 16 8 8" in (tmp_path / "cap" / "rank1.txt").read_text()


@pytest.mark.simgrid
@needs_smpi
def test_nonblocking_reduce_scatters_wait_in_their_completion_call(tmp_path: Path) -> None:
    # Ireduce_scatter_block + Wait (rank 0 late by 0.2 s: rank 1 waits 0.2 s in its MPI_Wait), then
    # Ireduce_scatter with counts {1, 2} + Wait (rank 1 late by 0.1 s: rank 0 waits 0.1 s), each booked as a
    # reduce-scatter at the completion call (Wait at NxN), as the other nonblocking collectives are
    _sc, res = run(tmp_path, "ireduce_scatter")
    ev = res.events
    assert "test" not in set(ev["op"].astype(str))
    rs = ev[ev["op"] == "reducescatter"].sort_values(["rank", "enter"])
    assert rs["rank"].tolist() == [0, 0, 1, 1]
    assert rs["bytes"].tolist() == [8, 12, 8, 12]  # reduced vectors of 2 x 1 and 1 + 2 ints
    assert rs["tag"].tolist() == [1, 2, 1, 2]  # the request serials: nonblocking completions
    assert waits_by_rank(res, "reducescatter") == {
        1: ("wait_at_nxn", pytest.approx(LATE, abs=TOL), 0),
        0: ("wait_at_nxn", pytest.approx(0.1, abs=TOL), 1),
    }


@pytest.mark.simgrid
@needs_smpi
def test_ialltoallw_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(SimulationError, match=r"MPI_Ialltoallw is not supported.*use the blocking call"):
        run(tmp_path, "ialltoallw")


@pytest.mark.simgrid
@needs_smpi
@pytest.mark.parametrize(("mode", "op", "pattern"), [
    ("sendrecv_replace", "sendRecv", "late_sender"), ("probe", "recv", "late_sender"),
    ("iprobe", "recv", "late_sender"), ("test", "wait", "late_sender"), ("testany", "wait", "late_sender"),
    ("testsome", "wait", "late_sender"), ("reduce_scatter_block", "reducescatter", "wait_at_nxn"),
    ("gatherv", "gatherv", "early_reduce"), ("ireduce_scatter_block", "reducescatter", "wait_at_nxn"),
])  # fmt: skip
def test_fortran_bindings_record_the_same(tmp_path: Path, mode: str, op: str, pattern: str) -> None:
    if shutil.which("smpif90") is None or shutil.which("gfortran") is None:
        pytest.skip("smpif90/gfortran not installed")
    _sc, res = run(tmp_path, mode, "recording_more.f90")
    assert waits_by_rank(res, op) == {1: (pattern, pytest.approx(LATE, abs=TOL), 0)}
    assert compute_seconds(res, 1) == pytest.approx(0.0, abs=1e-6)  # a nonblocking post's 0.25 us aside


@pytest.mark.simgrid
@needs_smpi
def test_fortran_nonblocking_v_collectives_are_refused_as_in_c(tmp_path: Path) -> None:
    if shutil.which("smpif90") is None or shutil.which("gfortran") is None:
        pytest.skip("smpif90/gfortran not installed")
    with pytest.raises(SimulationError, match=r"MPI_Igatherv is not supported"):
        run(tmp_path, "igatherv", "recording_more.f90")
