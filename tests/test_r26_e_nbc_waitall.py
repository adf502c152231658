"""Nonblocking collectives completed by one ``MPI_Waitall`` or ``MPI_Testall`` (tester t1 of session 26, finding 1).

``programs/nbc_waitall.c``, 4 ranks on ``dawning_5000a``; rank r computes exactly 0.1 r s first.  By hand (DESIGN.md
section 5): in ``two`` (Iallreduce + Ibarrier, one Waitall) rank r is blocked from 0.1 r to 0.3 s, rank 3's arrival:
wait at NxN 0.3, 0.2, 0.1 s (0.6 s), no barrier wait, as MPI_Waitsome gives and as Scalasca finds.  In ``mixed``
(rank 0's Irecv from rank 3 and an Iallreduce, one Waitall) rank 0's 0.3 s are booked once, to the collective (a
call that completes messages and collectives gives its time to its first collective): NxN 0.3, 0.2, 0.1 s.  In
``halo`` (ring Isend/Irecv at 0 s, then Iallreduce, one Waitall of the three) the messages came at once and each
rank waits for the reduction: NxN 0.3, 0.2, 0.1 s (tester t8: lost when the call's time went to the messages).
In ``late`` (Ibarrier at 0 s everywhere, rank 0 computes 0.3 s, then Waitall(1)) no
rank waits, and the barrier is nonblocking: rank 0 entered its Waitall at 0.3 s but posted at 0 s (the same with
an MPI_Testall loop, ``late_testall``).

Before the fix every collective was recorded with tag 0 (taken as a blocking collective) over the whole call's
[enter, exit]: 1.2 s of wait in ``two`` with negative idle, 0.9 s in ``mixed``, an impossible-timeline warning and a
refused capture in ``late``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from program_scenarios import needs_smpi, program_scenario
from test_programs_mpi import TOL, capture_and_replay

import waitlab
from waitlab.experiments.exports import export_run
from waitlab.experiments.pipeline import simulate
from waitlab.models.analysis.summary import rank_budget
from waitlab.models.analysis.timeline_check import impossible_collectives
from waitlab.simulator.scalasca import find_scalasca

RANKS = 4
needs_otf2 = pytest.mark.skipif(importlib.util.find_spec("otf2") is None,
                                reason="python3-otf2 not installed (scripts/bootstrap.sh)")


def run(tmp: Path, mode: str) -> tuple[Any, Any]:
    sc = program_scenario(tmp, "nbc_waitall.c", ranks=RANKS, args=[mode])
    return sc, simulate(sc)


def waits(res: Any) -> dict[tuple[str, int], float]:
    w = res.waits[res.waits["wait"] > TOL]
    return {(str(p), int(r)): float(x) for (p, r), x in w.groupby(["pattern", "rank"], observed=True)["wait"].sum()
            .items()}


def check_no_second_twice(res: Any) -> None:
    """Each rank's MPI rows do not overlap, and its budget adds up without negative idle."""
    mpi = res.events[res.events["kind"] == "mpi"].sort_values(["rank", "enter", "exit"])
    for _, rows in mpi.groupby("rank"):
        assert (rows["enter"].to_numpy()[1:] >= rows["exit"].to_numpy()[:-1] - 1e-12).all()
    budget = rank_budget(res.events, res.waits, RANKS)
    assert (budget["idle"] >= -1e-9).all()
    assert impossible_collectives(res.events) == []


@pytest.mark.simgrid
@needs_smpi
def test_two_collectives_in_one_waitall_wait_once(tmp_path: Path) -> None:
    _sc, res = run(tmp_path, "two")
    assert waits(res) == pytest.approx({("wait_at_nxn", 0): 0.3, ("wait_at_nxn", 1): 0.2, ("wait_at_nxn", 2): 0.1},
                                       abs=TOL)
    check_no_second_twice(res)
    coll = res.events[res.events["op"].isin(["allreduce", "barrier"])]
    # recorded as nonblocking: the request serials (1 and 2 on every rank), not 0
    assert sorted(coll["tag"].tolist()) == [1] * RANKS + [2] * RANKS


@pytest.mark.simgrid
@needs_smpi
def test_messages_completed_by_a_testall_loop_that_returned_false_are_recorded(tmp_path: Path) -> None:
    """SMPI 3.32's MPI_Testall completes (and nulls) the requests that are done even when it returns flag = 0: those
    completions were lost (rank 0's receives from ranks 1 and 2 in ``recv_testall``); they are recorded as
    MPI_Testsome's are: one completion each, the first polls booked from the first poll (0 s), each later one from
    the completion before it, so each message's late sender is its send's entry minus that poll start."""
    _sc, res = run(tmp_path, "recv_testall")
    ev = res.events[(res.events["rank"] == 0) & res.events["op"].isin(["wait", "waitall", "test"])]
    assert ev["op"].tolist() == ["wait", "wait", "waitall"] and ev["peer"].tolist()[:2] == [1, 2]
    sends = res.events[res.events["op"] == "send"].set_index("rank")["enter"]
    assert sends.to_dict() == pytest.approx({1: 0.1, 2: 0.2, 3: 0.3}, abs=TOL)  # 0.1 r s of compute, then MPI_Send
    starts = ev["enter"].to_numpy()
    assert starts[0] == pytest.approx(0.0, abs=TOL) and (starts[1:] == ev["exit"].to_numpy()[:-1]).all()
    w = res.waits[res.waits["rank"] == 0]
    assert w["pattern"].astype(str).tolist() == ["late_sender"] * 3 and w["peer_rank"].tolist() == [1, 2, 3]
    assert w["wait"].to_numpy() == pytest.approx(sends.loc[[1, 2, 3]].to_numpy() - starts, abs=TOL)
    assert w["wait"].iloc[0] == pytest.approx(0.1, abs=TOL)


@pytest.mark.simgrid
@needs_smpi
def test_a_message_and_a_collective_in_one_waitall_wait_once(tmp_path: Path) -> None:
    _sc, res = run(tmp_path, "mixed")
    assert waits(res) == pytest.approx({("wait_at_nxn", 0): 0.3, ("wait_at_nxn", 1): 0.2, ("wait_at_nxn", 2): 0.1},
                                       abs=TOL)
    check_no_second_twice(res)


@pytest.mark.simgrid
@needs_smpi
def test_a_halo_exchange_and_an_iallreduce_in_one_waitall_wait_for_the_reduction(tmp_path: Path) -> None:
    _sc, res = run(tmp_path, "halo")
    assert waits(res) == pytest.approx({("wait_at_nxn", 0): 0.3, ("wait_at_nxn", 1): 0.2, ("wait_at_nxn", 2): 0.1},
                                       abs=TOL)
    check_no_second_twice(res)


@pytest.mark.simgrid
@needs_smpi
def test_one_ibarrier_in_waitall_is_nonblocking_and_its_capture_is_kept(tmp_path: Path) -> None:
    sc, res = run(tmp_path, "late")
    assert waits(res) == {}
    check_no_second_twice(res)  # no impossible timeline: rank 0's entry at 0.3 s is not its arrival
    assert res.events.loc[res.events["op"] == "barrier", "tag"].tolist() == [1] * RANKS
    rep = capture_and_replay(sc, tmp_path)  # the post is kept: the replay overlaps rank 0's compute as the run did
    assert float(rep.waits["wait"].sum()) == pytest.approx(0.0, abs=TOL)
    assert float(rep.events["exit"].max()) == pytest.approx(0.3, abs=TOL)


@pytest.mark.simgrid
@needs_smpi
def test_one_ibarrier_in_a_testall_loop_is_nonblocking(tmp_path: Path) -> None:
    _sc, res = run(tmp_path, "late_testall")
    check_no_second_twice(res)
    assert res.events.loc[res.events["op"] == "barrier", "tag"].tolist() == [1] * RANKS
    # ranks 1-3 wait only for their failed polls (SMPI's cost of MPI_Test, 0.7 ms here), not for rank 0's 0.3 s
    assert float(res.waits["wait"].max()) < 1e-3


@pytest.mark.simgrid
@needs_smpi
@needs_otf2
def test_the_otf2_export_has_no_blocking_collective_the_program_never_called(tmp_path: Path) -> None:
    import otf2

    sc = program_scenario(tmp_path, "nbc_waitall.c", ranks=RANKS, args=["two"])
    (tmp_path / "scenario.toml").write_text(sc.to_toml())
    waitlab.run(tmp_path / "scenario.toml", tmp_path / "run", png=False)
    anchor = export_run(tmp_path / "run", ("otf2",), out=tmp_path / "exp")["otf2"]
    with otf2.reader.open(str(anchor)) as trace:
        names = {ev.region.name for _, ev in trace.events if type(ev).__name__ == "Enter"}
    assert "MPI_Barrier" not in names and "MPI_Allreduce" not in names  # completions, as MPI_Wait's are


@pytest.mark.simgrid
@pytest.mark.scalasca
@needs_smpi
def test_scalasca_finds_the_same_waits(tmp_path: Path) -> None:
    prefix, reason = find_scalasca()
    if prefix is None or importlib.util.find_spec("pycubexr") is None:
        pytest.skip(f"Scalasca / pycubexr not available: {reason}")
    from waitlab.experiments.scalasca_check import compare_waits, scout_run_folder

    hand = {"two": {("wait_at_nxn", 0): 0.3, ("wait_at_nxn", 1): 0.2, ("wait_at_nxn", 2): 0.1},
            "mixed": {("wait_at_nxn", 0): 0.3, ("wait_at_nxn", 1): 0.2, ("wait_at_nxn", 2): 0.1},
            "halo": {("wait_at_nxn", 0): 0.3, ("wait_at_nxn", 1): 0.2, ("wait_at_nxn", 2): 0.1}}
    for mode, want in hand.items():
        sc = program_scenario(tmp_path, "nbc_waitall.c", ranks=RANKS, args=[mode])
        (tmp_path / "scenario.toml").write_text(sc.to_toml())
        waitlab.run(tmp_path / "scenario.toml", tmp_path / mode, png=False)
        cmp = compare_waits(pd.read_parquet(tmp_path / mode / "waits.parquet"),
                            scout_run_folder(tmp_path / mode, out=tmp_path / f"{mode}-exp", timeout=600))
        for tool in ("scalasca", "waitlab"):  # Scalasca on the export agrees with the hand figures, and so does waitlab
            got = {(str(p), int(r)): float(s) for p, r, s in cmp[["pattern", "rank", tool]].itertuples(index=False)
                   if s > TOL}
            assert got == pytest.approx(want, abs=TOL), (mode, tool)
