"""Acceptance (issue 13): real MPI programs using more of MPI, with waits computed by hand.

Every delay of ``programs/features.c`` is ``smpi_execute_benched(s)``: exactly ``s`` simulated seconds, so each
rank's enter time into an MPI call is known by hand and the waits follow from DESIGN.md section 5.  Messages and
collectives add microseconds of network time, hence the 1e-4 s tolerance (waits are 0.1 s or more).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from program_scenarios import program_scenario, trace_scenario

import waitlab
from waitlab.errors import InputError, SimulationError
from waitlab.experiments.capture import capture
from waitlab.experiments.pipeline import simulate
from waitlab.models.ops import OpBuilder
from waitlab.models.vocabulary import ACTIONS
from waitlab.simulator.layer_wrappers import WRAPPERS, wrappers_source
from waitlab.simulator.replayable import replayable_ops

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None
needs_smpi = pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI is not installed")
TOL = 1e-4


def run(tmp: Path, mode: str, ranks: int) -> Any:

    sc = program_scenario(tmp, "features.c", ranks=ranks, args=[mode])
    return sc, simulate(sc)


def waits_by_rank(res: Any, op: str) -> dict[int, tuple[str, float, int]]:
    w = res.waits[res.waits["op"] == op]
    return {int(r): (str(p), float(x), int(q)) for r, p, x, q in
            w[["rank", "pattern", "wait", "peer_rank"]].itertuples(index=False)}


def capture_and_replay(sc: Any, tmp: Path) -> Any:

    index = capture(sc, tmp / "cap")
    check = json.loads((tmp / "cap" / "capture.json").read_text())["replay_check"]
    assert check["live"] == pytest.approx(check["replay"], rel=1e-3, abs=1e-9)
    return simulate(trace_scenario(index, sc.ranks))


@pytest.mark.simgrid
@needs_smpi
def test_gatherv_rooted_at_2_in_a_program_and_its_capture(tmp_path: Path) -> None:
    # enter times 0.5, 4, 1 (root), 2: the root waits 4 - 1 = 3 s for rank 1 (early reduce)
    sc, res = run(tmp_path, "gatherv", 4)
    ev = res.events[res.events["op"] == "gatherv"].sort_values("rank")
    assert ev["peer"].tolist() == [2] * 4
    assert ev["bytes"].tolist() == [8, 16, 24, 32]  # (r+1)*2 ints of 4 bytes
    assert ev["recv_bytes"].tolist() == [0, 0, 80, 0]
    assert waits_by_rank(res, "gatherv") == {2: ("early_reduce", pytest.approx(3.0, abs=TOL), 1)}
    rep = capture_and_replay(sc, tmp_path)
    assert waits_by_rank(rep, "gatherv") == {2: ("early_reduce", pytest.approx(3.0, abs=TOL), 1)}
    text = (tmp_path / "cap" / "rank2.txt").read_text()
    assert "2 gatherv 24 8 16 24 32 2 6 6\n" in text  # the root's real per-peer counts and root


@pytest.mark.simgrid
@needs_smpi
def test_scatterv_rooted_at_2_in_a_program_and_its_capture(tmp_path: Path) -> None:
    # enter times 1, 0.5, 3 (root), 2: non-roots wait 3-1 = 2, 3-0.5 = 2.5, 3-2 = 1 s (late broadcast)
    sc, res = run(tmp_path, "scatterv", 4)
    ev = res.events[res.events["op"] == "scatterv"].sort_values("rank")
    assert ev["bytes"].tolist() == [0, 0, 80, 0] and ev["recv_bytes"].tolist() == [8, 16, 24, 32]
    expected = {0: 2.0, 1: 2.5, 3: 1.0}
    for r in (res, capture_and_replay(sc, tmp_path)):
        got = waits_by_rank(r, "scatterv")
        assert set(got) == set(expected)
        for rank, w in expected.items():
            assert got[rank] == ("late_broadcast", pytest.approx(w, abs=TOL), 2)


@pytest.mark.simgrid
@needs_smpi
def test_small_synchronous_send_waits_for_a_late_receiver(tmp_path: Path) -> None:
    # rank 0 MPI_Ssend of 4 bytes at t=0; rank 1 posts the receive at 0.2 s: late receiver 0.2 s on rank 0
    sc, res = run(tmp_path, "ssend", 2)
    assert waits_by_rank(res, "ssend") == {0: ("late_receiver", pytest.approx(0.2, abs=TOL), 1)}
    ev = res.events[res.events["op"] == "ssend"]
    assert ev["bytes"].tolist() == [4]
    # the replay runs it as MPI_Ssend too: the same wait, not a 0 s eager send
    rep = capture_and_replay(sc, tmp_path)
    assert waits_by_rank(rep, "ssend") == {0: ("late_receiver", pytest.approx(0.2, abs=TOL), 1)}


@pytest.mark.simgrid
@needs_smpi
def test_barrier_and_allreduce_on_row_communicators_of_a_2d_split(tmp_path: Path) -> None:
    # rows {0,1} and {2,3} (key -rank: reversed order inside a row).  Barrier enter 0.1, 0.3 | 0.2, 0.5:
    # rank 0 waits 0.2 for rank 1, rank 2 waits 0.3 for rank 3.  Allreduce enter 0.3+0.4 = 0.7, 0.3 | 0.5, 0.6:
    # rank 1 waits 0.4 for rank 0, rank 2 waits 0.1 for rank 3.
    sc, res = run(tmp_path, "split", 4)
    assert res.ops.comms == ((1, 0), (3, 2))  # member world ranks in communicator-rank order
    ev = res.events
    coll = ev[ev["op"].isin(["barrier", "allreduce"])]
    assert sorted(set(zip(coll["rank"], coll["comm"], strict=True))) == [(0, 1), (1, 1), (2, 2), (3, 2)]
    assert (coll.groupby("match")["rank"].nunique() == 2).all()  # every instance holds one row's two ranks
    w = res.waits[res.waits["wait"] > 1e-3]
    got = {(int(r), str(o)): (str(p), float(x), int(q)) for r, o, p, x, q in
           w[["rank", "op", "pattern", "wait", "peer_rank"]].itertuples(index=False)}
    assert got == {
        (0, "barrier"): ("wait_at_barrier", pytest.approx(0.2, abs=TOL), 1),
        (2, "barrier"): ("wait_at_barrier", pytest.approx(0.3, abs=TOL), 3),
        (1, "allreduce"): ("wait_at_nxn", pytest.approx(0.4, abs=TOL), 0),
        (2, "allreduce"): ("wait_at_nxn", pytest.approx(0.1, abs=TOL), 3),
    }
    # an allreduce of one double on 2 ranks: 2 x 8 bytes each way (Score-P accounting within the communicator)
    assert ev[ev["op"] == "allreduce"]["bytes"].tolist() == [16] * 4
    # CWP-DM and H-CWP-DM on the row communicators: rank 1 delays row 0's barrier by 0.2 s of extra work, rank 3
    # row 1's by 0.3 s; rank 0 delays row 0's allreduce by 0.4 s, rank 3 row 1's by 0.1 s

    (tmp_path / "scenario.toml").write_text(sc.to_toml())
    d = waitlab.diagnose(tmp_path / "scenario.toml")
    for m in d.models:
        if m.key in ("cwpdm", "hcwpdm"):
            blame = m.blame().groupby("rank")["cost"].sum()
            blame = blame[blame > 1e-3]
            assert blame.to_dict() == {0: pytest.approx(0.4, abs=TOL), 1: pytest.approx(0.2, abs=TOL),
                                       3: pytest.approx(0.4, abs=TOL)}, m.key
    # the capture replays the row collectives on their communicators (waitlab's replay extension), with the same
    # waits per pattern (its replay check; per rank: tests/test_subcomm_replay.py)

    capture(sc, tmp_path / "cap")
    check = json.loads((tmp_path / "cap" / "capture.json").read_text())["replay_check"]
    assert check["replay"]["wait wait_at_barrier"] == pytest.approx(0.5, abs=TOL)


@pytest.mark.simgrid
@needs_smpi
def test_nonblocking_alltoall_waits_in_its_completion_call(tmp_path: Path) -> None:
    # rank 3 computes 0.3 s before MPI_Ialltoall; the others wait 0.3 s in MPI_Wait, booked as Wait at NxN
    _sc, res = run(tmp_path, "ialltoall", 4)
    got = waits_by_rank(res, "alltoall")
    assert got == {r: ("wait_at_nxn", pytest.approx(0.3, abs=TOL), 3) for r in (0, 1, 2)}
    a2a = res.events[res.events["op"] == "alltoall"]
    assert a2a["bytes"].tolist() == [32] * 4 and a2a["match"].nunique() == 1


@pytest.mark.simgrid
@needs_smpi
def test_persistent_send_and_receive_pair(tmp_path: Path) -> None:
    # rank 0 computes 0.25 s before each MPI_Start of its MPI_Send_init request: rank 1 waits 0.25 s twice
    _sc, res = run(tmp_path, "persistent", 2)
    ev = res.events
    assert [str(o) for o in ev[(ev["rank"] == 0) & (ev["kind"] == "mpi")]["op"]] == ["isend", "wait"] * 2
    assert [str(o) for o in ev[(ev["rank"] == 1) & (ev["kind"] == "mpi")]["op"]] == ["irecv", "wait"] * 2
    w = res.waits
    assert w["rank"].tolist() == [1, 1] and set(w["pattern"]) == {"late_sender"}
    assert w["wait"].tolist() == pytest.approx([0.25, 0.25], abs=TOL)


@pytest.mark.simgrid
@needs_smpi
def test_sends_completed_by_waitall_and_receives_by_wait_capture_and_replay(tmp_path: Path) -> None:
    # LULESH's pattern: the trace must not write a bare waitall that would also complete the pending receives
    sc, res = run(tmp_path, "mixed", 4)
    rep = capture_and_replay(sc, tmp_path)
    assert float(rep.events["exit"].max()) == pytest.approx(float(res.events["exit"].max()), rel=1e-9)
    assert float(rep.waits["wait"].sum()) == pytest.approx(float(res.waits["wait"].sum()), rel=1e-6)
    assert float(res.waits["wait"].sum()) > 0.05  # ranks compute 0.01*(r+1): late senders on the ring
    text = (tmp_path / "cap" / "rank0.txt").read_text()
    assert "waitall" not in text and text.count(" wait ") == 8


def test_replayable_ops_splits_only_a_waitall_that_leaves_requests_pending() -> None:
    b = OpBuilder(n_ranks=2)
    b.add("irecv", 0, peer=1, tag=1, value=8)
    b.add("isend", 0, peer=1, tag=2, value=8)
    b.add("waitall", 0)  # completes the isend only: the irecv is completed by the wait below
    b.add("wait", 0, peer=1, tag=1, value2=1)
    b.add("irecv", 1, peer=0, tag=2, value=8)
    b.add("isend", 1, peer=0, tag=1, value=8)
    b.add("waitall", 1)  # completes both of rank 1's requests: kept
    ops = b.build()
    out = replayable_ops(ops)

    assert [ACTIONS[c] for c in out.code[out.rank == 0]] == ["irecv", "isend", "wait", "wait"]
    assert [ACTIONS[c] for c in out.code[out.rank == 1]] == ["irecv", "isend", "waitall"]
    r0 = np.flatnonzero(out.rank == 0)
    assert (out.peer[r0[2]], out.tag[r0[2]], out.value2[r0[2]]) == (1, 2, 0.0)  # the isend's completion
    assert out.seq[r0].tolist() == [0, 1, 2, 3]


@pytest.mark.simgrid
@needs_smpi
def test_injected_delays_give_a_program_ground_truth(tmp_path: Path) -> None:
    # barrier enters 0, 0.05 (io on rank 1), 0.1 (solve on rank 2), 0: waits 0.1 + 0.05 + 0.1 = 0.25 s;
    # then ranks 1 and 3 inject 0.2 s of solve before the allreduce: ranks 0 and 2 wait 0.2 s each.
    # Counterfactuals by hand: without every solve, rank 1's io is last at the barrier: 3 x 0.05 = 0.15 s
    # (cost 0.65 - 0.15 = 0.5); without io, rank 2 is last: 3 x 0.1 = 0.3 s (cost -0.05); without rank 1's
    # solve, rank 3 alone is late at the allreduce: 3 x 0.2 = 0.6 s instead of 0.4 (cost -0.2).

    sc, res = run(tmp_path, "inject", 4)
    led = res.ledger().sort_values(["rank", "region"]).reset_index(drop=True)
    assert list(zip(led["rank"], led["region"], led["seconds"], led["kind"], strict=True)) == [
        (1, "io", 0.05, "imbalance"), (1, "solve", 0.2, "imbalance"), (2, "solve", 0.1, "imbalance"),
        (3, "solve", 0.2, "imbalance")]
    assert float(res.waits["wait"].sum()) == pytest.approx(0.65, abs=TOL)
    (tmp_path / "scenario.toml").write_text(sc.to_toml())
    d = waitlab.diagnose(tmp_path / "scenario.toml")
    assert d.truth is not None and not any("nothing was injected" in n for n in d.notes)
    region = d.truth.cost("region", "total_wait")
    assert region["solve"] == pytest.approx(0.5, abs=TOL) and region["io"] == pytest.approx(-0.05, abs=TOL)
    rr = d.truth.cost("rank_region", "total_wait")
    assert rr[(2, "solve")] == pytest.approx(0.1, abs=TOL)
    assert rr[(1, "solve")] == pytest.approx(-0.2, abs=TOL)
    assert set(d.scores) >= {"cwpdm", "hcwpdm"}


@pytest.mark.simgrid
@needs_smpi
def test_a_program_without_injections_has_no_truth_to_score(tmp_path: Path) -> None:

    sc = program_scenario(tmp_path, "features.c", ranks=2, args=["ssend"])
    (tmp_path / "scenario.toml").write_text(sc.to_toml())
    d = waitlab.diagnose(tmp_path / "scenario.toml")
    assert d.truth is None and not d.scores
    assert any("nothing was injected" in n and "no ground truth" in n for n in d.notes)


@pytest.mark.simgrid
@needs_smpi
def test_measured_computation_is_booked_where_it_happened(tmp_path: Path) -> None:
    # rank 1 spins on the CPU (40 M additions) before the barrier; SMPI charges it as measured computation

    res = simulate(program_scenario(tmp_path, "features.c", ranks=2, args=["spin"], computation="measured"))
    ev = res.events
    spin = ev[(ev["rank"] == 1) & (ev["kind"] == "compute")]
    work = float((spin["exit"] - spin["enter"]).sum())
    assert work > 1e-3  # the loop took real time, charged as compute of rank 1
    bar = ev[(ev["op"] == "barrier")].set_index("rank")
    assert float(bar.loc[1, "exit"] - bar.loc[1, "enter"]) < 1e-4  # not inside rank 1's barrier
    w = res.waits.set_index("rank")["wait"]
    assert float(w[0]) == pytest.approx(float(bar.loc[1, "enter"] - bar.loc[0, "enter"]), abs=1e-9)


@pytest.mark.simgrid
@needs_smpi
def test_a_program_spinning_on_mpi_wtime_stops_with_a_clear_message(tmp_path: Path) -> None:

    with pytest.raises(SimulationError, match=r"MPI_Wtime returned the same time.*computation = \"measured\""):
        simulate(program_scenario(tmp_path, "features.c", ranks=2, args=["wtime"],
                                  simulation={"timeout": 120}))


@pytest.mark.simgrid
@needs_smpi
def test_program_output_and_files_are_kept_in_the_results_folder(tmp_path: Path) -> None:

    (tmp_path / "in.txt").write_text("hello waitlab\n")
    sc = program_scenario(tmp_path, "features.c", ranks=2, args=["io"], inputs=["in.txt"])
    (tmp_path / "scenario.toml").write_text(sc.to_toml())
    out = tmp_path / "run"
    waitlab.run(tmp_path / "scenario.toml", out, png=False)
    text = (out / "program" / "output.txt").read_text()
    assert "rank 0 read 'hello waitlab'" in text and "rank 1 on stderr" in text
    work = out / "program" / "workdir"
    assert sorted(p.name for p in work.iterdir()) == ["out0.txt", "out1.txt"]  # the unchanged input is not copied
    assert (work / "out1.txt").read_text() == "hello waitlab from 1\n"
    with pytest.raises(InputError, match=r"application\.inputs"):
        program_scenario(tmp_path, "features.c", ranks=2, args=["io"], inputs=["missing.txt"])


@pytest.mark.simgrid
@needs_smpi
def test_fortran_ssend_and_sendrecv(tmp_path: Path) -> None:
    if shutil.which("smpif90") is None or shutil.which("gfortran") is None:
        pytest.skip("smpif90/gfortran not installed")

    sc = program_scenario(tmp_path, "ssend.f90", ranks=2)
    res = simulate(sc)
    # the 4-byte MPI_Ssend waits 0.2 s for rank 1's receive; then rank 0 waits 0.1 s in its MPI_Sendrecv
    got = {(int(r), str(o)): (str(p), float(x)) for r, o, p, x in
           res.waits[["rank", "op", "pattern", "wait"]].itertuples(index=False)}
    assert got == {(0, "ssend"): ("late_receiver", pytest.approx(0.2, abs=TOL)),
                   (0, "sendRecv"): ("late_sender", pytest.approx(0.1, abs=TOL))}  # its MPI_Sendrecv
    # call sites are named after the user's file, not SMPI's temporary copy of it
    sites = {str(r) for r in res.events["region"].unique() if str(r).startswith("@")}
    assert sites and all(s.startswith("@ssend.f90:") for s in sites)
    rep = capture_and_replay(sc, tmp_path)
    assert float(rep.waits["wait"].sum()) == pytest.approx(0.3, abs=TOL)


def test_generated_wrappers_are_fresh() -> None:
    # the C and Fortran wrapper tables come from one declaration (layer_wrappers.WRAPPERS) and the vocabulary

    native = Path(__file__).resolve().parents[1] / "simulator" / "native"
    assert (native / "waitlab_wrappers.inc").read_text() == wrappers_source(), \
        "regenerate: python -m waitlab.simulator.layer_wrappers > simulator/native/waitlab_wrappers.inc"
    text = wrappers_source()
    for w in WRAPPERS:  # every row has its C and its Fortran wrapper
        assert f"int MPI_{w.name}(" in text and f"void mpi_{w.name.lower()}_(" in text
    assert "wl_p2p_send(WL_SSEND," in text and "WL_COLL_ADD((uintptr_t)*req, WL_ALLTOALL," in text


@pytest.mark.simgrid
@needs_smpi
def test_waitsome_completes_each_request_it_reports(tmp_path: Path) -> None:
    # rank 1 waits in its first MPI_Waitsome until 0.1 s (tag 1), in the second from then until 0.3 s (tag 2)
    _sc, res = run(tmp_path, "waitsome", 2)
    ev = res.events
    assert [str(o) for o in ev[(ev["rank"] == 1) & (ev["kind"] == "mpi")]["op"]] == ["irecv", "irecv", "wait", "wait"]
    w = res.waits
    assert w["rank"].tolist() == [1, 1] and set(w["pattern"]) == {"late_sender"}
    # the second Waitsome starts once the first message has arrived (0.1 s + its transfer) and waits for the
    # second send (entered at 0.3 s)
    waits = ev[(ev["rank"] == 1) & (ev["op"] == "wait")]
    assert float(w["wait"].iloc[0]) == pytest.approx(0.1, abs=1e-9)
    send2 = float(ev[(ev["rank"] == 0) & (ev["op"] == "send")]["enter"].iloc[1])  # 0.3 s + the first send's cost
    assert float(w["wait"].iloc[1]) == pytest.approx(send2 - float(waits["enter"].iloc[1]), abs=1e-9)
    assert float(w["wait"].iloc[1]) == pytest.approx(0.2, abs=3e-4)


@pytest.mark.simgrid
@needs_smpi
@pytest.mark.parametrize(("platform", "late"), [("dawning_5000a", [12288, 12289, 20000]),  # [mpi] 12,288 bytes
                                                ("sunway_taihulight", [])])  # [mpi] 65,536 bytes: all eager
def test_late_receiver_from_the_eager_threshold_smpi_ran_with(tmp_path: Path, platform: str,
                                                              late: list[int]) -> None:
    # SMPI sends fewer bytes than smpi/send-is-detached-thresh eagerly, and from it on by rendezvous: rank 0's
    # blocking send of those waits the 0.1 s its receiver is late (Scalasca 2.6 books the same on the export)
    res = simulate(program_scenario(tmp_path, "eager_edge.c", platform=platform))
    ev, w = res.events, res.waits
    sends = ev[ev["op"] == "send"]
    assert sends["bytes"].tolist() == [12272, 12287, 12288, 12289, 20000]
    waited = w[w["op"] == "send"].merge(ev[["bytes"]], left_on="event", right_index=True)
    assert waited["pattern"].astype(str).unique().tolist() in ([], ["late_receiver"])
    assert waited["bytes"].tolist() == late
    assert waited["wait"].tolist() == pytest.approx([0.1] * len(late), abs=TOL)
