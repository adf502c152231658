"""OTF2 round trip of trace runs: `waitlab run` -> `export --otf2` -> `analyze` / `import-otf2` -> replay.

Three faults a tester found, each fixed and tested here end to end through the command line:

1. ranks without events were left out of the archive (MPI_COMM_WORLD short, peers misnumbered, analyze and
   import refused it or counted fewer ranks);
2. ``MPI_Reduce_scatter`` was refused by analyze and import (waitlab's replay runs ``reducescatter``);
3. v-collectives with unequal counts were converted rank by rank into counts the ranks disagreed on (SMPI failed
   with MPI_ERR_TRUNCATE, or deadlocked).

Expected values are by hand (the counts below are worked out in the comments) or read with ``otf2-print`` (OTF2's
own reader), and waits are compared with those of the simulated run the archive was exported from.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from otf2_archives import communicator, score_p_ranks
from test_otf2_export import _records, needs_otf2

from waitlab.cli import main
from waitlab.models.ops import ACTIONS, CODE
from waitlab.models.otf2_ops import Otf2Unreplayable, records_to_ops, records_to_timed_ops

try:
    import otf2
    from otf2.enums import CollectiveOp, Paradigm, RegionRole

    from waitlab.simulator.otf2_import import read_otf2
    HAVE_READER = shutil.which("cc") is not None
except ImportError:
    HAVE_READER = False
needs_reader = pytest.mark.skipif(not HAVE_READER, reason="python3-otf2 / a C compiler not installed")
UNDEFINED = 0xFFFFFFFF


# ------------------------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------------------------

def _run_trace(folder: Path, ranks: int, lines: list[str]) -> Path:
    """``waitlab run`` of a ``kind = "trace"`` scenario of ``ranks`` ranks on dawning_5000a; returns the run folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trace.txt").write_text("".join(f"{r} init\n" for r in range(ranks)) + "\n".join(lines) + "\n")
    (folder / "s.toml").write_text(f'[scenario]\nname = "t"\nranks = {ranks}\n[platform]\nname = "dawning_5000a"\n'
                                   '[application]\nkind = "trace"\ntrace = "trace.txt"\n')
    assert main(["run", str(folder / "s.toml"), "-o", str(folder / "out"), "-q"]) == 0
    return folder / "out"


def _export(run: Path) -> Path:
    assert main(["export", str(run), "--otf2", "-q"]) == 0
    return run / "otf2" / "traces.otf2"


def _import_and_replay(anchor: Path, folder: Path, ranks: int) -> tuple[dict[int, list[str]], Path]:
    """``import-otf2`` of ``anchor`` into ``folder/imp``, then ``waitlab run`` of the trace it wrote: each rank's
    lines (comments left out) and the replay's results folder."""
    assert main(["import-otf2", str(anchor), "-o", str(folder / "imp"), "--platform", "dawning_5000a", "-q"]) == 0
    lines = {r: [ln for ln in (folder / "imp" / f"rank{r}.txt").read_text().splitlines() if not ln.startswith("#")]
             for r in range(ranks)}
    (folder / "r.toml").write_text(f'[scenario]\nname = "r"\nranks = {ranks}\n[platform]\nname = "dawning_5000a"\n'
                                   f'[application]\nkind = "trace"\ntrace = "{folder / "imp" / "index.txt"}"\n')
    assert main(["run", str(folder / "r.toml"), "-o", str(folder / "replayed"), "-q"]) == 0
    return lines, folder / "replayed"


def _waits(folder: Path) -> dict[tuple[str, int], float]:
    w = pd.read_parquet(folder / "waits.parquet")
    g = w.groupby(["pattern", "rank"], observed=True)["wait"].sum()
    return {(str(p), int(r)): float(v) for (p, r), v in g.items() if v > 0}


def _world(anchor: Path) -> tuple[list[str], int]:
    """Location names and the size of MPI_COMM_WORLD's group, as ``otf2-print -G`` (OTF2's own reader) shows them."""
    text = subprocess.run(["otf2-print", "-G", str(anchor)], capture_output=True, text=True, check=True).stdout
    names = re.findall(r'^LOCATION\s+\d+\s+Name: "([^"]*)"', text, flags=re.M)
    world = re.search(r'^GROUP\s+\d+\s+Name: "MPI_COMM_WORLD" .*Type: COMM_GROUP.*?(\d+) Members', text, flags=re.M)
    assert world is not None, text
    return names, int(world.group(1))


def _hand_archive(folder: Path, n: int, subs: list[list[int]],
                  body: Callable[[list[Any], dict[str, Any], Any, list[Any]], None]) -> Path:
    """An OTF2 archive of ``n`` MPI ranks laid out as Score-P does, with sub-communicators of members ``subs``
    (communicator-rank order); ``body(writers, regions, world, subs)`` writes the events."""
    with otf2.writer.open(str(folder), timer_resolution=10**9) as trace:
        d = trace.definitions
        locs, world = score_p_ranks(d, n)
        comms = [communicator(d, f"sub {k}", m) for k, m in enumerate(subs)]
        regions = {name: d.region(name, region_role=RegionRole.COLL_ALL2ALL, paradigm=Paradigm.MPI)
                   for name in ("MPI_Gatherv", "MPI_Alltoallv", "MPI_Allgatherv", "MPI_Reduce_scatter")}
        body([trace.event_writer_from_location(x) for x in locs], regions, world, comms)
    return folder / "traces.otf2"


def _coll(w: Any, t0: int, t1: int, region: Any, op: Any, comm: Any, root: int, sent: int, got: int) -> None:
    w.enter(t0, region)
    w.mpi_collective_begin(t0)
    w.mpi_collective_end(t1, op, comm, root, sent, got)
    w.leave(t1, region)


# ------------------------------------------------------------------------------------------------------------------
# 1. every rank of the run is a location, ranks without events too
# ------------------------------------------------------------------------------------------------------------------

@pytest.mark.simgrid
@needs_otf2
@pytest.mark.parametrize("idle", [1, 2])  # a rank in the middle (analyze refused) and the last (analyze lost it)
def test_ranks_without_events_are_locations_of_the_world(tmp_path: Path, idle: int) -> None:
    busy = 2 if idle == 1 else 1
    run = _run_trace(tmp_path, 3, ["0 sleep 1", f"0 send {busy} 0 10", f"{busy} recv 0 0 10"])
    anchor = _export(run)
    names, world = _world(anchor)
    assert names == ["rank 0", "rank 1", "rank 2"] and world == 3
    counts, times = _records(anchor)
    # the idle rank has the frame of a measured MPI run only: ProgramBegin, MPI_Init, MPI_Finalize, ProgramEnd
    assert sorted(times) == ["0", "1", "2"] and len(times[str(idle)]) == 6
    assert counts["PROGRAM_BEGIN"] == counts["PROGRAM_END"] == 3
    assert counts["MPI_SEND"] == counts["MPI_RECV"] == 1

    simulated = _waits(run)
    assert simulated.keys() == {("late_sender", busy)} and simulated["late_sender", busy] == pytest.approx(1.0, 1e-3)
    assert main(["analyze", str(anchor), "-o", str(tmp_path / "an"), "--no-png", "-q"]) == 0
    assert json.loads((tmp_path / "an" / "run.json").read_text())["ranks"] == 3
    recorded = _waits(tmp_path / "an")
    assert recorded.keys() == simulated.keys()
    assert recorded["late_sender", busy] == pytest.approx(simulated["late_sender", busy], abs=2e-8)

    lines, replayed = _import_and_replay(anchor, tmp_path, 3)
    assert lines[idle] == [f"{idle} init", f"{idle} finalize"]
    assert f"{busy} recv 0 0 10" in lines[busy] and f"0 send {busy} 0 10" in lines[0]
    again = _waits(replayed)
    assert again.keys() == simulated.keys()
    assert again["late_sender", busy] == pytest.approx(simulated["late_sender", busy], rel=1e-6)


@pytest.mark.simgrid
@needs_otf2
def test_events_beyond_the_runs_ranks_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An edited run.json whose ``ranks`` is below the event table's ranks: refused in one line, no archive."""
    run = _run_trace(tmp_path, 3, ["0 send 2 0 10", "2 recv 0 0 10"])
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "ranks": 2}))
    assert main(["export", str(run), "--otf2", "--trust-edited", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert "run.json" in err and "ranks" in err and "rank 2" in err and "\n" not in err, err
    assert not (run / "otf2").exists()


# ------------------------------------------------------------------------------------------------------------------
# 2. reduce-scatter: analyzed as an N x N collective, imported as waitlab's reducescatter
# ------------------------------------------------------------------------------------------------------------------

@pytest.mark.simgrid
@needs_otf2
def test_reduce_scatter_round_trip(tmp_path: Path) -> None:
    # rank 0 arrives 0.5 s late: rank 1 waits at the N x N collective (Scalasca's Wait at NxN)
    run = _run_trace(tmp_path, 2, ["0 sleep 0.5", "0 reducescatter 10 20 5 6", "1 reducescatter 10 20 5 6"])
    anchor = _export(run)
    assert _records(anchor)[0]["MPI_COLLECTIVE_END"] == 2
    simulated = _waits(run)
    assert simulated.keys() == {("wait_at_nxn", 1)} and simulated["wait_at_nxn", 1] == pytest.approx(0.5, 1e-3)

    assert main(["analyze", str(anchor), "-o", str(tmp_path / "an"), "--no-png", "-q"]) == 0
    events = pd.read_parquet(tmp_path / "an" / "events.parquet")
    assert (events["op"].astype(str) == "reducescatter").sum() == 2
    recorded = _waits(tmp_path / "an")
    assert recorded.keys() == simulated.keys()
    assert recorded["wait_at_nxn", 1] == pytest.approx(simulated["wait_at_nxn", 1], abs=2e-8)

    lines, replayed = _import_and_replay(anchor, tmp_path, 2)
    # 10 + 20 = 30 bytes of reduced vector, split evenly by the replay: 15 each (the flops are not in OTF2: 0)
    for r in (0, 1):
        assert f"{r} reducescatter 15 15 0.0 6" in lines[r]
    again = _waits(replayed)
    assert again.keys() == simulated.keys()
    assert again["wait_at_nxn", 1] == pytest.approx(simulated["wait_at_nxn", 1], rel=1e-3)


# ------------------------------------------------------------------------------------------------------------------
# 3. v-collectives with unequal counts: one count per instance, the same on every rank
# ------------------------------------------------------------------------------------------------------------------

V_TRACE = [
    # gatherv to root 1 of 10, 20, 40 bytes: 70 bytes in 3 blocks -> 23 per block (69 replayed)
    "0 gatherv 10 10 20 40 1", "1 gatherv 20 10 20 40 1", "2 gatherv 40 10 20 40 1",
    # scatterv from root 0 of 5, 25, 30 bytes: 60 bytes in 3 blocks -> 20
    "0 scatterv 5 25 30 5 0", "1 scatterv 5 25 30 25 0", "2 scatterv 5 25 30 30 0",
    # allgatherv of 10, 20, 30 bytes: each rank receives 60, 180 in all, in 3 x 3 blocks -> 20
    "0 allgatherv 10 10 20 30", "1 allgatherv 20 10 20 30", "2 allgatherv 30 10 20 30",
    # alltoallv of the matrix 10 * [[1, 2, 3], [4, 5, 6], [7, 8, 9]] (row: sent, column: received): 450 bytes
    # in 3 x 3 blocks -> 50
    "0 alltoallv 60 10 20 30 120 10 40 70", "1 alltoallv 150 40 50 60 150 20 50 80",
    "2 alltoallv 240 70 80 90 180 30 60 90",
]


@pytest.mark.simgrid
@needs_otf2
def test_v_collectives_import_with_one_count_per_instance(tmp_path: Path) -> None:
    run = _run_trace(tmp_path, 3, ["1 sleep 0.2", *V_TRACE])
    anchor = _export(run)
    lines, replayed = _import_and_replay(anchor, tmp_path, 3)  # SMPI ran it: no MPI_ERR_TRUNCATE, no deadlock
    for r in range(3):
        assert [ln for ln in lines[r] if not ln.endswith(("init", "finalize")) and " compute " not in ln] == [
            f"{r} gather 23 23 1", f"{r} scatter 20 20 0", f"{r} allgather 20 20", f"{r} alltoall 50 50"]
    # bytes sent per collective, summed over the ranks: the recorded totals, to the rounding of one block
    original = pd.read_parquet(run / "events.parquet").groupby("op", observed=True)["bytes"].sum()
    again = pd.read_parquet(replayed / "events.parquet").groupby("op", observed=True)["bytes"].sum()
    assert {o: int(original[o]) for o in ("gatherv", "scatterv", "allgatherv", "alltoallv")} == {
        "gatherv": 70, "scatterv": 60, "allgatherv": 180, "alltoallv": 450}
    assert {o: int(again[o]) for o in ("gather", "scatter", "allgather", "alltoall")} == {
        "gather": 69, "scatter": 60, "allgather": 180, "alltoall": 450}
    # rank 1 is 0.2 s late at the gatherv (its root: the others wait in the nx1 and later collectives)
    assert sum(_waits(replayed).values()) == pytest.approx(sum(_waits(run).values()), rel=0.05)


@needs_reader
def test_scorep_accounting_of_unequal_v_collectives_gives_equal_counts(tmp_path: Path) -> None:
    """Score-P's byte accounting (``scorep_mpi_coll_bytes_*``): a gatherv's root records its own block as sent and
    every block as received; an alltoallv the row and column sums; a reduce-scatter the whole vector sent and
    ``N x recvcounts[me]`` received, so the ranks' records differ; an allgatherv ``N x sendcount`` sent and the
    sum received.  The instances here are on two sub-communicators of 2 ranks and on MPI_COMM_WORLD."""
    def body(ws: list[Any], reg: dict[str, Any], world: Any, subs: list[Any]) -> None:
        # gatherv to root 0 on MPI_COMM_WORLD of blocks 10, 20, 30, 40 (the root: its own block sent, all 100
        # received): 100 bytes in 4 blocks -> 25
        for me, w in enumerate(ws):
            _coll(w, 0, 10, reg["MPI_Gatherv"], CollectiveOp.GATHERV, world, 0, 10 * (me + 1), 100 if me == 0 else 0)
        # allgatherv on {0, 1} of 8 and 16 bytes (sent 2 x 8, 2 x 16; received 24 each): 48 in 2 x 2 blocks -> 12;
        # on {2, 3} of 2 and 4 bytes (sent 4, 8; received 6): 12 in 4 blocks -> 3
        for me, (w, sub, mine) in enumerate(zip(ws, [0, 0, 1, 1], [8, 16, 2, 4], strict=True)):
            total = 24 if me < 2 else 6
            _coll(w, 20, 30, reg["MPI_Allgatherv"], CollectiveOp.ALLGATHERV, subs[sub], UNDEFINED, 2 * mine, total)
        # alltoallv over the world of the matrix [[5, 2, 3, 4], [5, 6, 7, 8], ..., [13, 14, 15, 16]] (row sums
        # sent, column sums received): 140 bytes in 4 x 4 blocks -> 8.75, rounded to 9 (144 replayed)
        m = np.arange(1, 17).reshape(4, 4)
        m[0, 0] = 5
        for me, w in enumerate(ws):
            _coll(w, 40, 50, reg["MPI_Alltoallv"], CollectiveOp.ALLTOALLV, world, UNDEFINED, int(m[me].sum()),
                  int(m[:, me].sum()))
        # reduce-scatter on the world with recvcounts 10, 20, 30, 40 (100 in all): each rank sends 100 and
        # receives 4 x recvcounts[me] -> the whole vector, 100, on every rank
        for me, w in enumerate(ws):
            _coll(w, 60, 70, reg["MPI_Reduce_scatter"], CollectiveOp.REDUCE_SCATTER, world, UNDEFINED, 100,
                  4 * 10 * (me + 1))

    ops = records_to_ops(read_otf2(_hand_archive(tmp_path / "a", 4, [[0, 1], [2, 3]], body)))
    got = {ACTIONS[c]: [] for c in (CODE["gather"], CODE["allgather"], CODE["alltoall"], CODE["reducescatter"])}
    for r, c, v, v2, p, cm in zip(ops.rank, ops.code, ops.value, ops.value2, ops.peer, ops.comm, strict=True):
        if ACTIONS[c] in got:
            got[ACTIONS[c]].append((int(r), float(v), float(v2), int(p), int(cm)))
    assert got["gather"] == [(r, 25.0, 25.0, 0, 0) for r in range(4)]
    assert got["allgather"] == [(0, 12.0, 12.0, -1, 1), (1, 12.0, 12.0, -1, 1), (2, 3.0, 3.0, -1, 2),
                                (3, 3.0, 3.0, -1, 2)]
    assert got["alltoall"] == [(r, 9.0, 9.0, -1, 0) for r in range(4)]
    assert got["reducescatter"] == [(r, 100.0, 0.0, -1, 0) for r in range(4)]
    assert ops.comms == ((0, 1), (2, 3))


# ------------------------------------------------------------------------------------------------------------------
# reduce-scatter on sub-communicators: analyzed as recorded, refused for a replay with the fix
# ------------------------------------------------------------------------------------------------------------------

def _subcomm_reduce_scatter(folder: Path) -> Path:
    """4 ranks, a reduce-scatter on {0, 1} and one on {2, 3}; entries (us): 100, 400 and 100, 250; every rank leaves
    its instance 10 us after the last entry."""
    def body(ws: list[Any], reg: dict[str, Any], world: Any, subs: list[Any]) -> None:
        for w, sub, enter, leave in zip(ws, [0, 0, 1, 1], [100, 400, 100, 250], [410, 410, 260, 260], strict=True):
            _coll(w, enter * 1000, leave * 1000, reg["MPI_Reduce_scatter"], CollectiveOp.REDUCE_SCATTER, subs[sub],
                  UNDEFINED, 64, 64)

    return _hand_archive(folder, 4, [[0, 1], [2, 3]], body)


@needs_reader
def test_reduce_scatter_on_a_sub_communicator_is_read_but_not_replayed(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    anchor = _subcomm_reduce_scatter(tmp_path / "a")
    ops = records_to_timed_ops(read_otf2(anchor))[0]
    rows = np.flatnonzero(ops.code == CODE["reducescatter"])
    assert ops.comm[rows].tolist() == [1, 1, 2, 2] and ops.comms == ((0, 1), (2, 3))
    assert ops.value[rows].tolist() == [64.0] * 4  # 2 ranks x 64 sent and received / 2: the whole vector
    with pytest.raises(Otf2Unreplayable, match="MPI_Reduce_scatter on a communicator of 2 of the 4") as exc:
        records_to_ops(read_otf2(anchor))
    assert exc.value.where == "rank 0" and "waitlab analyze" in exc.value.fix

    # analyze: Wait at NxN = the instance's last entry - the rank's entry: 300 us on rank 0, 150 us on rank 2
    assert main(["analyze", str(anchor), "-o", str(tmp_path / "an"), "--no-png", "-q"]) == 0
    waits = _waits(tmp_path / "an")
    assert waits.keys() == {("wait_at_nxn", 0), ("wait_at_nxn", 2)}
    assert waits["wait_at_nxn", 0] == pytest.approx(300e-6, abs=1e-9)
    assert waits["wait_at_nxn", 2] == pytest.approx(150e-6, abs=1e-9)
    # import-otf2 (a replay) refuses it in one line naming the archive and the fix, and writes nothing
    assert main(["import-otf2", str(anchor), "-o", str(tmp_path / "imp"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert str(anchor) in err and "MPI_Reduce_scatter" in err and "waitlab analyze" in err and "\n" not in err, err
    assert not (tmp_path / "imp").exists()


@pytest.mark.simgrid
@needs_otf2
@needs_reader
@pytest.mark.parametrize(("case", "lines"), [
    # rank 1 posts its receive 1 s late: a synchronous send waits for it (late receiver, 1 s, by hand)
    ("ssend", ["1 sleep 1", "0 ssend 1 0 10", "1 recv 0 0 10"]),
    ("issend", ["1 sleep 1", "0 issend 1 0 10", "0 wait 0 1 0", "1 recv 0 0 10"]),
    # requests the run never completes (only tested, or left open): completed in MPI_Finalize in the archive
    ("tested", ["0 isend 1 0 10", "0 test 0 1 0", "1 recv 0 0 10"]),
    ("open irecv", ["0 send 1 0 10", "1 irecv 0 0 10"]),
])
def test_synchronous_sends_and_unfinished_requests_survive_the_round_trip(tmp_path: Path, case: str,
                                                                         lines: list[str]) -> None:
    run = _run_trace(tmp_path, 2, lines)
    anchor = _export(run)
    assert main(["analyze", str(anchor), "-o", str(tmp_path / "an"), "-q", "--no-png"]) == 0
    assert _waits(tmp_path / "an") == pytest.approx(_waits(run))
    if case.endswith("send"):
        assert _waits(run) == pytest.approx({("late_receiver", 0): 1.0}, abs=1e-3)


@needs_otf2
@pytest.mark.simgrid
def test_a_nonblocking_barrier_round_trips_without_an_impossible_timeline(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # rank 2 posts its ibarrier 0.2 s late, computes 0.01 s more and only then waits: the others are released by its
    # post. The export records its completion in MPI_Wait, so analyze does not take the wait's entry for its arrival.
    lines = ["0 compute 1e7", "1 compute 1e7", "2 compute 2.1e9",
             "0 ibarrier nbc=1", "1 ibarrier nbc=1", "2 ibarrier nbc=1", "2 compute 1e8",
             "0 barrier nbc=1", "1 barrier nbc=1", "2 barrier nbc=1"]
    run = _run_trace(tmp_path / "a", 3, lines)
    assert "MPI_Wait" in subprocess.run(["otf2-print", str(_export(run))], capture_output=True, text=True,
                                        check=True).stdout
    capsys.readouterr()
    assert main(["analyze", str(run / "otf2" / "traces.otf2"), "-o", str(tmp_path / "an"), "--no-png", "-q"]) == 0
    assert "impossible timeline" not in capsys.readouterr().err
    summary = json.loads((tmp_path / "an" / "summary.json").read_text())
    assert summary["impossible_collectives"] == []
    mine, back = _waits(run), _waits(tmp_path / "an")
    assert mine.keys() == back.keys() and mine  # ranks 0 and 1 wait at the barrier, in both
    assert all(abs(mine[k] - back[k]) < 1e-8 for k in mine)
